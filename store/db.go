package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
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
	// one sync per group (store/sqlite/walsync.go).
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
)

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
	// CheckpointInterval defaults to DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// BusyCheckpointInterval and BusyCheckpointBytes default to
	// DefaultBusyCheckpointInterval and DefaultBusyCheckpointBytes.
	BusyCheckpointInterval time.Duration
	BusyCheckpointBytes    int64
	// MaxBytes caps the SQLite database file (0: no cap beyond the disk).
	// When a write would pass it, the write fails as if the disk were
	// full, and intake answers 503, so a delivery flood cannot fill the
	// volume.
	MaxBytes int64
	// MaxConns is the pool's size on PostgreSQL (default
	// postgres.DefaultMaxConns); SQLite has one writer connection and a
	// few readers.
	MaxConns int
	// Now is the clock for every stored time and lease; default time.Now.
	Now func() time.Time
	// Jitter returns a uniform value in [0, 1) for retry backoff; default
	// math/rand/v2.
	Jitter func() float64
}

// WithDefaults is o with every zero field set to its default (a driver's
// own defaults aside).
func (o Options) WithDefaults() Options {
	orDefault(&o.BusyTimeout, DefaultBusyTimeout)
	orDefault(&o.MaxAttempts, DefaultMaxAttempts)
	orDefault(&o.RetryBase, DefaultRetryBase)
	orDefault(&o.RetryCap, DefaultRetryCap)
	orDefault(&o.MaxBatch, DefaultMaxBatch)
	orDefault(&o.CheckpointInterval, DefaultCheckpointInterval)
	orDefault(&o.BusyCheckpointInterval, DefaultBusyCheckpointInterval)
	orDefault(&o.BusyCheckpointBytes, DefaultBusyCheckpointBytes)
	o.Synchronous = cmp.Or(o.Synchronous, DefaultSynchronous)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	return o
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// DB is gilf's store. It is safe for concurrent use, also by several
// processes sharing one file.
type DB struct {
	drv      Driver  // what differs between SQLite and PostgreSQL (driver.go)
	w        *sql.DB // SQLite: one connection, BEGIN IMMEDIATE; PostgreSQL: the write pool
	r        *sql.DB // reads: SQLite's query-only pool; PostgreSQL's pool again
	log      *slog.Logger
	opts     Options
	claimSQL string
	stmts    intakeStmts
	reqs     []chan *intakeReq // callers → writers: one queue per writer (intake.go's queueOf)
	quit     chan struct{}
	wg       sync.WaitGroup
	// closer closes once; ready is the last write probe (ready.go).
	closer sync.Once
	ready  readyCache
}

// New is a DB on the migrated database behind w (writes) and r (reads,
// w again when the engine has one pool), run by drv, with writers
// group-commit writers. The DB owns w, r and drv from here: Close closes
// them, and so does New when it fails.
func New(ctx context.Context, w, r *sql.DB, drv Driver, logger *slog.Logger, opts Options, writers int) (*DB, error) {
	d := &DB{drv: drv, w: w, r: r, log: logger, opts: opts.WithDefaults(), reqs: make([]chan *intakeReq, max(writers, 1)),
		quit: make(chan struct{}), ready: readyCache{turn: make(chan struct{}, 1)},
		claimSQL: fmt.Sprintf(sqlClaim, drv.ClaimLock())}
	for i := range d.reqs {
		d.reqs[i] = make(chan *intakeReq)
	}
	if err := d.stmts.prepare(ctx, d); err != nil {
		return nil, errors.Join(err, d.closePools())
	}
	d.wg.Add(len(d.reqs))
	for _, q := range d.reqs {
		go d.writer(context.WithoutCancel(ctx), q)
	}
	return d, nil
}

func (d *DB) closePools() error {
	err := errors.Join(d.drv.Close(), d.r.Close())
	if d.r != d.w {
		err = errors.Join(err, d.w.Close())
	}
	return err
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

// Close stops the group-commit writers (deliveries already taken into a
// batch are committed first; later ones get ErrClosed) and closes the
// pools and what the engine holds. It is safe to call more than once.
func (d *DB) Close() error {
	var err error
	d.closer.Do(func() {
		close(d.quit)
		d.wg.Wait()
		err = errors.Join(d.stmts.close(), d.closePools())
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

// querier is a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryRows runs query on q and returns every row as scan reads it (an
// empty, non-nil slice when there is none).
func queryRows[T any](ctx context.Context, q querier, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		out = append(out, v)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// floatPtr is a nullable column's value, nil when NULL.
func floatPtr(v sql.NullFloat64) *float64 {
	if !v.Valid {
		return nil
	}
	return &v.Float64
}

// scanOne reads a row of one column.
func scanOne[T any](rows *sql.Rows) (T, error) {
	var v T
	err := rows.Scan(&v)
	return v, err
}

// pair is a row of two columns.
type pair[A, B any] struct {
	a A
	b B
}

func scanPair[A, B any](rows *sql.Rows) (pair[A, B], error) {
	var p pair[A, B]
	err := rows.Scan(&p.a, &p.b)
	return p, err
}
