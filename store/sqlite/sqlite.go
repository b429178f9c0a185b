package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/migrations"
	"github.com/gilf-review/gilf/store"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// pageSize is the page size of a new database: SQLite's default, which
// measured no slower for 25 KB bodies than larger pages (fewer WAL frames,
// but larger statement-journal copies).
const pageSize = 4096

// readConns is the size of the read pool.
const readConns = 4

// writerCacheKiB is the writer connection's page cache: room for a full
// batch of deliveries without spilling mid-transaction. Much larger
// measured slower (fresh page allocations instead of reuse).
const writerCacheKiB = 8 << 10

// driver is SQLite's store.Driver: one file, one writer connection, the
// WAL fsynced by the store (walsync.go).
type driver struct {
	ck   *sql.DB  // one connection for WAL checkpoints and backups
	wal  *walFile // the WAL, fsynced by the store (walsync.go)
	log  *slog.Logger
	opts store.Options
	// lastLook is when Durable last looked at the WAL's size (Unix ns).
	lastLook atomic.Int64
	quit     chan struct{} // closed by Close: the checkpointer stops
	done     chan struct{} // closed by the checkpointer once stopped
}

var _ store.Driver = (*driver)(nil)

// sqliteMigrationsTable is schema_migrations in SQLite's types.
const sqliteMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`

// Open opens (creating when missing) the SQLite database at path, applies
// pending migrations one per transaction, and starts the group-commit
// writer. Close releases it.
func Open(ctx context.Context, path string, logger *slog.Logger, opts store.Options) (*store.DB, error) {
	d, _, err := open(ctx, path, logger, opts)
	return d, err
}

// open is Open, and the driver it built.
func open(ctx context.Context, path string, logger *slog.Logger, opts store.Options) (*store.DB, *driver, error) {
	if logger == nil {
		return nil, nil, errors.New("open store: nil logger")
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, nil, fmt.Errorf("open store: invalid database path %q (empty, or holds '?' or '#')", path)
	}
	opts = opts.WithDefaults()
	switch opts.Synchronous {
	case store.SynchronousNormal, store.SynchronousFull:
	default:
		return nil, nil, fmt.Errorf("open store: unknown synchronous level %q", opts.Synchronous)
	}
	fail := func(err error, closers ...func() error) (*store.DB, *driver, error) {
		for _, c := range closers {
			err = errors.Join(err, c())
		}
		return nil, nil, fmt.Errorf("open store %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		return fail(err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// A database from before migration 0012 has its bodies moved into
	// its rows (bodylog.go).
	was, err := legacyVersion(ctx, w)
	if err != nil {
		return fail(err, w.Close)
	}
	if was >= 2 && was < 12 {
		if err := importBodyLog(ctx, w, path, was, logger); err != nil {
			return fail(err, w.Close)
		}
	}
	if err := store.Migrate(ctx, w, sqliteMigrationsTable, migrations.FS, opts.Now, logger); err != nil {
		return fail(err, w.Close)
	}
	if was >= 1 && was < 12 {
		if err := encodeRawBodies(ctx, w); err != nil {
			return fail(err, w.Close)
		}
	}
	ck, err := sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		return fail(err, w.Close)
	}
	ck.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn(path, opts, true))
	if err != nil {
		return fail(err, ck.Close, w.Close)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	if err := r.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("read pool: %w", err), r.Close, ck.Close, w.Close)
	}
	// The writer connection is open (and keeps the WAL in place) from
	// here until Close.
	wal, err := openWAL(path)
	if err != nil {
		return fail(err, r.Close, ck.Close, w.Close)
	}
	e := &driver{ck: ck, wal: wal, log: logger, opts: opts, quit: make(chan struct{}), done: make(chan struct{})}
	go e.checkpointer(context.WithoutCancel(ctx))
	if err := e.Durable(); err != nil { // the migrations just applied
		return fail(err, e.Close, r.Close, w.Close)
	}
	// One writer: the file has one write lock.
	d, err := store.New(ctx, w, r, e, logger, opts, 1)
	if err != nil {
		return nil, nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return d, e, nil
}

// dsn builds the modernc connection string: WAL, busy_timeout, foreign
// keys, and IMMEDIATE write transactions (or query_only for readers).
func dsn(path string, o store.Options, readOnly bool) string {
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

// checkpointer copies committed WAL frames into the database file every
// CheckpointInterval, on its own connection, so commits (and the webhook
// answers waiting on them) never pay for it; a busy writer checkpoints
// itself too (Durable). A PASSIVE checkpoint runs beside the writer's
// commits and copies the frames committed when it began. A last
// checkpoint runs at Close.
func (e *driver) checkpointer(ctx context.Context) {
	defer close(e.done)
	t := time.NewTicker(e.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.checkpoint(ctx, "PASSIVE")
		case <-e.quit:
			e.checkpoint(ctx, "TRUNCATE")
			return
		}
	}
}

// checkpoint runs one checkpoint, and logs it when it failed or (but
// for PASSIVE, which gives way to the writer) left frames behind.
func (e *driver) checkpoint(ctx context.Context, mode string) {
	var busy, logFrames, done int
	if err := e.ck.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &logFrames, &done); err != nil {
		e.log.Error("wal checkpoint failed", "mode", mode, logkey.Err, err)
	} else if busy != 0 && mode != "PASSIVE" {
		e.log.Warn("wal checkpoint incomplete", "mode", mode, "wal_frames", logFrames, "checkpointed", done)
	}
}

func (e *driver) Engine() store.Engine { return store.EngineSQLite }

// WriteTx: the connection's _txlock=immediate.
func (e *driver) WriteTx() *sql.TxOptions                         { return nil }
func (e *driver) ClaimTx() *sql.TxOptions                         { return nil }
func (e *driver) ClaimLock() string                               { return "" }
func (e *driver) IntakeTx(byPR bool) *sql.TxOptions               { return nil }
func (e *driver) LockPRs(context.Context, *sql.Tx, []int64) error { return nil }

// Notify: the one process's workers are woken by their own intake.
func (e *driver) Notify(context.Context, *sql.Tx) error { return nil }

// Retryable: SQLite's busy errors already waited out busy_timeout.
func (e *driver) Retryable(error) bool { return false }

func (e *driver) JSONEach(param string) string { return "json_each(" + param + ")" }
func (e *driver) DayOf(col string) string {
	return "strftime('%Y-%m-%d', " + col + " / 1000, 'unixepoch')"
}

// JobIDs: the next ids after the largest; the writer's transaction is the
// only one writing.
func (e *driver) JobIDs() string {
	return `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?1)
		SELECT (SELECT COALESCE(MAX(id), 0) FROM jobs) + i FROM k ORDER BY i`
}

func (e *driver) CheckWritable(context.Context, *sql.Tx) error { return nil }

// Listen: there is no other process to hear from, and intake wakes its
// own workers.
func (e *driver) Listen(context.Context, chan<- struct{}) error { return nil }

// Exclusive: one process owns the store: fn runs.
func (e *driver) Exclusive(ctx context.Context, _ string, fn func(context.Context) error) (bool, error) {
	return true, fn(ctx)
}

// Close stops the checkpointer after its last checkpoint.
func (e *driver) Close() error {
	close(e.quit)
	<-e.done
	return errors.Join(e.ck.Close(), e.wal.close())
}
