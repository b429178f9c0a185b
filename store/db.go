// Package store keeps gilf's durable state in SQLite (modernc.org/sqlite, no
// cgo): webhook deliveries, review jobs with their leases and retries, and
// everything a run produced (steps, findings, artifacts, cost spans, shadow
// telemetry, posted reviews).
//
// Writes go through one writer connection whose transactions begin
// IMMEDIATE, so a transaction never has to upgrade a read lock to a write
// lock (the upgrade is what fails with SQLITE_BUSY despite busy_timeout).
// Webhook deliveries are group-committed: one goroutine batches the pending
// deliveries into a single transaction and each caller waits for its
// batch's commit. Reads use their own pool of query-only connections; in
// WAL mode they never wait for the writer.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gilf-review/gilf/migrations"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Defaults for Options. Each is a named limit with a test at its boundary.
const (
	// DefaultBusyTimeout is how long a connection waits for a lock another
	// connection holds before the statement fails with SQLITE_BUSY. The
	// webhook answers 503 when it runs out, well inside GitHub's 10 s.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultSynchronous is the durability level. FULL syncs the WAL
	// before any commit is acknowledged, so an acknowledged delivery
	// survives power loss, not only a process crash; group commit pays
	// one sync per group, off the writer's path (walsync.go).
	DefaultSynchronous = SynchronousFull
	// DefaultMaxAttempts is how many times a job is claimed before a
	// transient failure or an expired lease ends it dead.
	DefaultMaxAttempts = 5
	// DefaultRetryBase and DefaultRetryCap bound the exponential backoff
	// between attempts: base·2^(attempt-1), capped, with jitter.
	DefaultRetryBase = 30 * time.Second
	DefaultRetryCap  = 30 * time.Minute
	// DefaultCheckpointInterval is how often the WAL is copied back into
	// the database (a PASSIVE checkpoint: it never blocks writers).
	DefaultCheckpointInterval = time.Second
	// DefaultBusyCheckpointBytes is the WAL size past which the intake
	// writer checkpoints the WAL itself, between two batches, so that it
	// starts over (see the writer). The writer's WAL is truncated back to
	// this size when it starts over (journal_size_limit), so the file's
	// size tells the writer when the WAL has passed it.
	DefaultBusyCheckpointBytes = 256 << 20
	// DefaultBusyCheckpointInterval is how often at most the writer looks
	// at the WAL's size (and checkpoints it, past
	// DefaultBusyCheckpointBytes).
	DefaultBusyCheckpointInterval = 250 * time.Millisecond
	// DefaultMaxBatch is the most deliveries one group commit holds.
	DefaultMaxBatch = 256
	// DefaultReadConns is the size of the read pool.
	DefaultReadConns = 4
	// DefaultBodySegmentMaxBytes and DefaultBodySegmentMaxAge bound one
	// body log segment: a handle starts a new one past either, so
	// retention can delete the old ones (a whole segment at a time) while
	// `gilf serve` runs for months.
	DefaultBodySegmentMaxBytes = 256 << 20
	DefaultBodySegmentMaxAge   = 24 * time.Hour
)

// pipelineQueue is how many batches may wait for the appender before the
// writer waits too.
const pipelineQueue = 64

// pageSize is the page size of a new database: SQLite's default, which
// measured no slower for 25 KB bodies than larger pages (fewer WAL frames,
// but larger statement-journal copies).
const pageSize = 4096

// writerCacheKiB is the writer connection's page cache: room for a full
// batch of deliveries without spilling mid-transaction. Much larger
// measured slower (fresh page allocations instead of reuse).
const writerCacheKiB = 8 << 10

// Synchronous is the durability level of acknowledged writes, named after
// SQLite's PRAGMA synchronous. The connections themselves run at NORMAL;
// FULL is the store's own fsync of the WAL before it acknowledges a commit.
type Synchronous string

const (
	// SynchronousNormal in WAL mode survives a process crash; a power loss
	// may roll back the last commits.
	SynchronousNormal Synchronous = "NORMAL"
	// SynchronousFull in WAL mode survives power loss.
	SynchronousFull Synchronous = "FULL"
)

// Options tune a DB. The zero value means every default.
type Options struct {
	BusyTimeout time.Duration
	Synchronous Synchronous
	MaxAttempts int
	RetryBase   time.Duration
	RetryCap    time.Duration
	MaxBatch    int
	ReadConns   int
	// CheckpointInterval defaults to DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// BusyCheckpointInterval and BusyCheckpointBytes default to
	// DefaultBusyCheckpointInterval and DefaultBusyCheckpointBytes.
	BusyCheckpointInterval time.Duration
	BusyCheckpointBytes    int64
	// MaxBytes caps the database file and, separately, the delivery body
	// log beside it (0: no cap beyond the disk). When a write would pass
	// either, the write fails as if the disk were full, and intake answers
	// 503, so a delivery flood cannot fill the volume.
	MaxBytes int64
	// BodySegmentMaxBytes and BodySegmentMaxAge default to
	// DefaultBodySegmentMaxBytes and DefaultBodySegmentMaxAge.
	BodySegmentMaxBytes int64
	BodySegmentMaxAge   time.Duration
	// MaxConns is the pool's size on PostgreSQL (default
	// DefaultMaxConns); SQLite has one writer connection and ReadConns
	// readers.
	MaxConns int
	// IntakeWriters is how many group-commit writers run on PostgreSQL
	// (default DefaultIntakeWriters); SQLite runs one.
	IntakeWriters int
	// Now is the clock for every stored time and lease; default time.Now.
	Now func() time.Time
	// Jitter returns a uniform value in [0, 1) for retry backoff; default
	// math/rand/v2.
	Jitter func() float64
}

func (o Options) withDefaults() Options {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.Synchronous == "" {
		o.Synchronous = DefaultSynchronous
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryCap <= 0 {
		o.RetryCap = DefaultRetryCap
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.ReadConns <= 0 {
		o.ReadConns = DefaultReadConns
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.BusyCheckpointInterval <= 0 {
		o.BusyCheckpointInterval = DefaultBusyCheckpointInterval
	}
	if o.BusyCheckpointBytes <= 0 {
		o.BusyCheckpointBytes = DefaultBusyCheckpointBytes
	}
	if o.BodySegmentMaxBytes <= 0 {
		o.BodySegmentMaxBytes = DefaultBodySegmentMaxBytes
	}
	if o.BodySegmentMaxAge <= 0 {
		o.BodySegmentMaxAge = DefaultBodySegmentMaxAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	return o
}

// DB is gilf's store. It is safe for concurrent use, also by several
// processes sharing one file.
type DB struct {
	engine   Engine
	w        *sql.DB         // SQLite: one connection, BEGIN IMMEDIATE; PostgreSQL: the write pool
	r        *sql.DB         // query-only pool
	ck       *sql.DB         // SQLite: one connection for WAL checkpoints
	pgConfig *pgx.ConnConfig // PostgreSQL: for the sessions outside the pool (postgres.go)
	log      *slog.Logger
	opts     Options
	stmts    intakeStmts
	bodies   *bodyLog          // SQLite: raw delivery bodies; see bodies.go (PostgreSQL keeps them in the row)
	wal      *walFile          // SQLite: the WAL, fsynced by the store; see walsync.go
	reqs     []chan *intakeReq // callers → writers: one queue per writer (intake.go's queueOf)
	appends  chan appendJob    // writer → appender
	quit     chan struct{}
	wg       sync.WaitGroup
	closer   sync.Once
	ready    readyCache // see ready.go
}

// Open opens (creating when missing) the SQLite database at path, applies
// pending migrations one per transaction, and starts the group-commit
// writer. Close releases it.
func Open(ctx context.Context, path string, logger *slog.Logger, opts Options) (*DB, error) {
	if logger == nil {
		return nil, errors.New("open store: nil logger")
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store: invalid database path %q (empty, or holds '?' or '#')", path)
	}
	opts = opts.withDefaults()
	switch opts.Synchronous {
	case SynchronousNormal, SynchronousFull:
	default:
		return nil, fmt.Errorf("open store: unknown synchronous level %q", opts.Synchronous)
	}
	w, err := sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrateFS(ctx, w, EngineSQLite, migrations.FS, opts.Now, logger); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), w.Close())
	}
	ck, err := sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), w.Close())
	}
	ck.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn(path, opts, true))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), ck.Close(), w.Close())
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	if err := r.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: read pool: %w", path, err), r.Close(), ck.Close(), w.Close())
	}
	// The writer connection is open (and keeps the WAL in place) from
	// here until Close.
	wal, err := openWAL(path)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), r.Close(), ck.Close(), w.Close())
	}
	bodies, err := openBodyLog(path, opts.MaxBytes, opts.BodySegmentMaxBytes, opts.BodySegmentMaxAge)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), wal.close(), r.Close(), ck.Close(), w.Close())
	}
	d := &DB{engine: EngineSQLite, w: w, r: r, ck: ck, log: logger, opts: opts, bodies: bodies, wal: wal,
		reqs: []chan *intakeReq{make(chan *intakeReq)}, appends: make(chan appendJob, pipelineQueue), quit: make(chan struct{}),
		ready: readyCache{turn: make(chan struct{}, 1)}}
	if err := d.durable(); err != nil { // the migrations just applied
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), bodies.close(), wal.close(), r.Close(), ck.Close(), w.Close())
	}
	if err := d.stmts.prepare(ctx, w, EngineSQLite); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), bodies.close(), wal.close(), r.Close(), ck.Close(), w.Close())
	}
	life := context.WithoutCancel(ctx)
	d.wg.Add(3)
	go d.writer(life, d.reqs[0])
	go d.appender()
	go d.checkpointer(life)
	return d, nil
}

// dsn builds the modernc connection string: WAL, busy_timeout, foreign
// keys, and IMMEDIATE write transactions (or query_only for readers).
func dsn(path string, o Options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10)+")")
	// page_size runs before the journal_mode shorthand (modernc applies
	// _pragma values first), so a new database is created with it; an
	// existing one keeps its own.
	q.Add("_pragma", "page_size("+strconv.Itoa(pageSize)+")")
	q.Set("_journal_mode", "WAL")
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL: a commit does not fsync; with SynchronousFull the store
	// fsyncs the WAL before acknowledging (walsync.go).
	q.Add("_pragma", "synchronous(NORMAL)")
	// The checkpointer goroutine copies the WAL into the database off the
	// commit path; commits never checkpoint themselves. A WAL that starts
	// over is cut back to BusyCheckpointBytes (see the writer).
	q.Add("_pragma", "wal_autocheckpoint(0)")
	q.Add("_pragma", "journal_size_limit("+strconv.FormatInt(o.BusyCheckpointBytes, 10)+")")
	if o.MaxBytes > 0 {
		q.Add("_pragma", "max_page_count("+strconv.FormatInt(max(o.MaxBytes/pageSize, 1), 10)+")")
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "cache_size(-"+strconv.Itoa(writerCacheKiB)+")")
		// Statement journals in memory: a file-backed one costs a write
		// call per page it saves.
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}

// Ping checks that both pools answer.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store writer: %w", err)
	}
	if err := d.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store readers: %w", err)
	}
	return nil
}

// Close stops the group-commit writer (deliveries already taken into a
// batch are committed first; later ones get ErrClosed) and closes both
// pools. It is safe to call more than once.
func (d *DB) Close() error {
	var err error
	d.closer.Do(func() {
		close(d.quit)
		d.wg.Wait()
		errs := []error{d.stmts.close(), d.r.Close(), d.w.Close()}
		if d.engine == EngineSQLite {
			errs = append(errs, d.bodies.close(), d.ck.Close(), d.wal.close())
		}
		err = errors.Join(errs...)
		if err != nil {
			err = fmt.Errorf("close store: %w", err)
		}
	})
	return err
}

func (d *DB) nowMs() int64 { return d.opts.Now().UnixMilli() }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func nullInt(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: v != 0} }

// checkpointer copies committed WAL frames into the database file every
// CheckpointInterval, on its own connection, so commits (and the webhook
// answers waiting on them) never pay for it; a busy writer checkpoints
// itself too (see writer). A PASSIVE checkpoint runs beside the writer's
// commits and copies the frames committed when it began — rows whose
// bodies are durable, since a batch commits only after its bodies'
// fsync. A last checkpoint runs at Close.
func (d *DB) checkpointer(ctx context.Context) {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			d.checkpoint(ctx, "PASSIVE")
		case <-d.quit:
			d.checkpoint(ctx, "TRUNCATE")
			return
		}
	}
}

// checkpoint runs one checkpoint and returns SQLite's counts: the WAL's
// frames, and how many of them are now in the database file (0, 0 when
// it failed).
func (d *DB) checkpoint(ctx context.Context, mode string) (logFrames, done int) {
	var busy int
	if err := d.ck.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &logFrames, &done); err != nil {
		d.log.Error("wal checkpoint failed", "mode", mode, "err", err)
		return 0, 0
	}
	if busy != 0 && mode != "PASSIVE" {
		d.log.Warn("wal checkpoint incomplete", "mode", mode, "wal_frames", logFrames, "checkpointed", done)
	}
	return logFrames, done
}
