package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/migrations"
	"github.com/gilf-review/gilf/validation"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
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

// sqliteEngine is SQLite's engine: one file, one writer connection, the
// WAL fsynced by the store (sqlite_walsync.go), delivery bodies in a log
// beside the database (sqlite_bodies.go).
type sqliteEngine struct {
	d       *DB
	ck      *sql.DB        // one connection for WAL checkpoints
	bodies  *bodyLog       // raw delivery bodies (sqlite_bodies.go)
	wal     *walFile       // the WAL, fsynced by the store (sqlite_walsync.go)
	appends chan appendJob // writer → appender (sqlite_intake.go)
	// lastLook is when the writer last looked at the WAL's size
	// (betweenBatches); only the writer uses it.
	lastLook time.Time
}

var _ engine = (*sqliteEngine)(nil)

// sqliteMigrationsTable is schema_migrations in SQLite's types.
const sqliteMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`

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
	if err := migrateFS(ctx, w, sqliteMigrationsTable, migrations.FS, opts.Now, logger); err != nil {
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
	d := newDB(w, r, logger, opts, 1) // one writer: the file has one write lock
	e := &sqliteEngine{d: d, ck: ck, bodies: bodies, wal: wal, appends: make(chan appendJob, pipelineQueue)}
	d.eng = e
	if err := e.durable(); err != nil { // the migrations just applied
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), bodies.close(), wal.close(), r.Close(), ck.Close(), w.Close())
	}
	if err := d.start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", path, err), bodies.close(), wal.close(), r.Close(), ck.Close(), w.Close())
	}
	d.wg.Add(2)
	go e.appender()
	go e.checkpointer(context.WithoutCancel(ctx))
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

// checkpointer copies committed WAL frames into the database file every
// CheckpointInterval, on its own connection, so commits (and the webhook
// answers waiting on them) never pay for it; a busy writer checkpoints
// itself too (betweenBatches). A PASSIVE checkpoint runs beside the writer's
// commits and copies the frames committed when it began — rows whose
// bodies are durable, since a batch commits only after its bodies'
// fsync. A last checkpoint runs at Close.
func (e *sqliteEngine) checkpointer(ctx context.Context) {
	defer e.d.wg.Done()
	t := time.NewTicker(e.d.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.checkpoint(ctx, "PASSIVE")
		case <-e.d.quit:
			e.checkpoint(ctx, "TRUNCATE")
			return
		}
	}
}

// checkpoint runs one checkpoint and returns SQLite's counts: the WAL's
// frames, and how many of them are now in the database file (0, 0 when
// it failed).
func (e *sqliteEngine) checkpoint(ctx context.Context, mode string) (logFrames, done int) {
	var busy int
	if err := e.ck.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &logFrames, &done); err != nil {
		e.d.log.Error("wal checkpoint failed", "mode", mode, "err", err)
		return 0, 0
	}
	if busy != 0 && mode != "PASSIVE" {
		e.d.log.Warn("wal checkpoint incomplete", "mode", mode, "wal_frames", logFrames, "checkpointed", done)
	}
	return logFrames, done
}

func (e *sqliteEngine) name() Engine { return EngineSQLite }

// writeTx: the connection's _txlock=immediate.
func (e *sqliteEngine) writeTx() *sql.TxOptions                         { return nil }
func (e *sqliteEngine) claimTx() *sql.TxOptions                         { return nil }
func (e *sqliteEngine) claimSQL() string                                { return claimSQLite }
func (e *sqliteEngine) intakeTx(byPR bool) *sql.TxOptions               { return nil }
func (e *sqliteEngine) lockPRs(context.Context, *sql.Tx, []int64) error { return nil }

// notify: the one process's workers are woken by their own intake.
func (e *sqliteEngine) notify(context.Context, *sql.Tx) error { return nil }

// retryable: SQLite's busy errors already waited out busy_timeout.
func (e *sqliteEngine) retryable(error) bool { return false }

func (e *sqliteEngine) jsonEach(param string) string { return "json_each(" + param + ")" }
func (e *sqliteEngine) dayOf(col string) string {
	return "strftime('%Y-%m-%d', " + col + " / 1000, 'unixepoch')"
}
func (e *sqliteEngine) recordNewSQL() string { return "" }

// The statements of insertJob on SQLite.
const (
	// The pull request's newest update time: the last entry of
	// jobs_pr_updated.
	sqlNewestUpdate = `SELECT pr_updated_at FROM jobs INDEXED BY jobs_pr_updated
		WHERE repo = ?1 AND pr = ?2 ORDER BY pr_updated_at DESC LIMIT 1`
	// A job with its state worked out, and its id: a chain's, or NULL
	// for SQLite to draw (insertJob); nothing when the reviewed state has
	// its job.
	sqlInsJobAs = `INSERT INTO jobs (id, repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
			trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, ?13)
		ON CONFLICT (repo, pr, head_sha, base_ref) DO NOTHING`
	sqlMaxJobID = `SELECT COALESCE(MAX(id), 0) FROM jobs`
)

func (e *sqliteEngine) jobInsertSQL() [3]string {
	return [3]string{sqlNewestUpdate, sqlInsJobAs, sqlMaxJobID}
}

// insertJob is sqlInsJob in two plain statements: the pull request's
// newest update time, then the job with the state it decides, its id
// drawn by SQLite. The newest update may be that job's own, but then
// nothing is inserted, and attachJob decides with the pull request's
// other heads only. sqlInsJob's INSERT … SELECT reads the table it
// writes, and SQLite copies its row into a temporary table first; its
// RETURNING keeps another: measured 11–14% of the writer's statement time
// on 500 pull requests.
func (e *sqliteEngine) insertJob(ctx context.Context, st boundStmts, del validation.Delivery, job *validation.JobSpec, now int64) (int64, string, error) {
	updated := ms(job.PRUpdatedAt)
	var newest sql.NullInt64
	if err := st.newestUpdate.QueryRowContext(ctx, job.Repo, job.PR).Scan(&newest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("newest update of %s#%d: %w", job.Repo, job.PR, err)
	}
	state, reason := StateQueued, ""
	if newest.Valid && newest.Int64 > updated {
		state, reason = StateSuperseded, staleReason
	}
	r, err := st.insJobAs.ExecContext(ctx, nil, job.Repo, job.PR, job.HeadSHA, job.HeadRepo, job.BaseRef,
		nullInt(job.InstallationID), del.ID, job.Trigger, updated, string(state), reason, now)
	if err != nil {
		return 0, "", err
	}
	if n, err := r.RowsAffected(); err != nil || n == 0 {
		return 0, "", cmp.Or(err, sql.ErrNoRows)
	}
	id, err := r.LastInsertId()
	return id, string(state), err
}

func (e *sqliteEngine) checkWritable(context.Context, *sql.Tx) error { return nil }

// rowBody: a body in its row is from before the body log, as it came.
func (e *sqliteEngine) rowBody(b []byte) ([]byte, error)       { return b, nil }
func (e *sqliteEngine) loggedBody(ref bodyRef) ([]byte, error) { return readBody(e.bodies.dir, ref) }

// listen: there is no other process to hear from, and intake wakes its
// own workers.
func (e *sqliteEngine) listen(context.Context, chan<- struct{}) error { return nil }

// exclusive: one process owns the store: fn runs.
func (e *sqliteEngine) exclusive(ctx context.Context, _ string, fn func(context.Context) error) (bool, error) {
	return true, fn(ctx)
}

func (e *sqliteEngine) close() error {
	return errors.Join(e.bodies.close(), e.ck.Close(), e.wal.close())
}
