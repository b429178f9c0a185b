package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/gilf-review/gilf/migrations"
	"github.com/gilf-review/gilf/validation"
)

// PostgreSQL defaults. Each is a named limit with a test at its boundary.
const (
	// DefaultMaxConns is the size of a replica's pool on PostgreSQL
	// (GILF_DATABASE_MAX_CONNS), reads and writes; LISTEN holds one more
	// connection.
	DefaultMaxConns = 16
	// DefaultIntakeWriters is how many group-commit writers a replica runs
	// on PostgreSQL: each takes every delivery waiting and commits them in
	// one transaction on its own connection, so commits overlap (SQLite
	// has one writer: the file has one write lock).
	DefaultIntakeWriters = 4
	// MaxSerializationRetries is how often a write transaction that lost a
	// serialization conflict to another replica (SQLSTATE 40001, 40P01) is
	// run again before its error is returned.
	MaxSerializationRetries = 20
	// migrationLockID is the advisory lock replicas take to apply
	// migrations one at a time ("gilf" in ASCII).
	migrationLockID = 0x67696c66
	// JobsChannel is the LISTEN/NOTIFY channel intake notifies when it
	// queued a job, so idle replicas claim it at once.
	JobsChannel = "gilf_jobs"
)

// IsPostgresURL reports whether url selects the PostgreSQL engine.
func IsPostgresURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// OpenPostgres connects to the PostgreSQL database at url (postgres://…),
// applies pending migrations under an advisory lock (replicas starting
// together apply each one once), and starts the group-commit writers.
// Several replicas may share the database: claims never hand a job to
// two of them, and every write a worker makes is fenced by its lease.
func OpenPostgres(ctx context.Context, url string, logger *slog.Logger, opts Options) (*DB, error) {
	if logger == nil {
		return nil, errors.New("open store: nil logger")
	}
	if !IsPostgresURL(url) {
		return nil, errors.New("open store: not a postgres:// URL")
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's error quotes the URL, password included: say only why.
		return nil, fmt.Errorf("open store: invalid PostgreSQL URL: %s", redactURLError(err))
	}
	opts = opts.withDefaults()
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.IntakeWriters <= 0 {
		opts.IntakeWriters = DefaultIntakeWriters
	}
	where := fmt.Sprintf("%s@%s/%s", cfg.User, cfg.Host, cfg.Database)
	open := func(n int) *sql.DB {
		db := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		db.SetConnMaxIdleTime(5 * time.Minute)
		return db
	}
	w := open(opts.MaxConns)
	if err := migratePostgres(ctx, w, opts.Now, logger); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", where, err), w.Close())
	}
	// One pool for reads and writes: GILF_DATABASE_MAX_CONNS is then what
	// a replica may hold (and one more session for LISTEN).
	r := w
	d := newDB(w, r, logger, opts, opts.IntakeWriters)
	d.eng = &postgresEngine{d: d, cfg: cfg}
	if err := d.start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", where, err), w.Close())
	}
	return d, nil
}

// redactURLError keeps pgx's reason and drops the URL it quotes.
func redactURLError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return "unparsable"
}

// migratePostgres applies the PostgreSQL migrations on one connection
// holding the migration advisory lock: a replica starting meanwhile waits,
// then finds them applied.
func migratePostgres(ctx context.Context, w *sql.DB, now func() time.Time, log *slog.Logger) (err error) {
	conn, err := w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, migrationLockID); err != nil {
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	defer func() {
		// Unlocked on a fresh context: the caller's may be what failed.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, uerr := conn.ExecContext(uctx, `SELECT pg_advisory_unlock(?)`, migrationLockID); uerr != nil {
			err = errors.Join(err, fmt.Errorf("migrate: release the migration lock: %w", uerr))
		}
	}()
	return migrateFS(ctx, conn, postgresMigrationsTable, migrations.Postgres, now, log)
}

// postgresEngine is PostgreSQL's engine: a pool shared by reads and
// writes, replicas sharing the database, bodies in their rows.
type postgresEngine struct {
	d   *DB
	cfg *pgx.ConnConfig // for the sessions outside the pool (LISTEN, task locks)
}

var _ engine = (*postgresEngine)(nil)

// postgresMigrationsTable is schema_migrations in PostgreSQL's types.
const postgresMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		name       TEXT   NOT NULL,
		applied_at BIGINT NOT NULL
	)`

func (e *postgresEngine) name() Engine { return EnginePostgres }

// writeTx: SERIALIZABLE, so the rules written for one writer hold among
// replicas too; a transaction that lost a conflict runs again.
func (e *postgresEngine) writeTx() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelSerializable}
}

// claimTx: claims run READ COMMITTED and take the next job with FOR
// UPDATE SKIP LOCKED (claimSQL), so replicas claiming together each take
// a different job instead of conflicting on the first one; the lease
// rescues in the same transaction re-check their WHERE on the row's
// newest version, so a job is rescued once.
func (e *postgresEngine) claimTx() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

func (e *postgresEngine) claimSQL() string { return claimPostgres }

// intakeTx: a batch whose every delivery touches only its own pull
// request's jobs runs READ COMMITTED under the pull requests' locks
// (lockPRs): deliveries of one pull request take turns on its lock,
// others commit side by side. Under SERIALIZABLE, new heads of one pull
// request arriving together would abort each other instead.
func (e *postgresEngine) intakeTx(byPR bool) *sql.TxOptions {
	if byPR {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return e.writeTx()
}

func (e *postgresEngine) lockPRs(ctx context.Context, tx *sql.Tx, keys []int64) error {
	_, err := tx.ExecContext(ctx, sqlLockPRs, keys)
	return err
}

// notify wakes every replica's workers (Listen) with the commit.
func (e *postgresEngine) notify(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, sqlNotifyJobs, JobsChannel)
	return err
}

func (e *postgresEngine) jsonEach(param string) string {
	return "json_array_elements_text(CAST(" + param + " AS json))"
}

func (e *postgresEngine) dayOf(col string) string {
	return "to_char(to_timestamp(" + col + " / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
}

func (e *postgresEngine) recordNewSQL() string { return sqlRecordNew }

func (e *postgresEngine) jobInsertSQL() [3]string { return [3]string{} }

// chains: runPipelined records PostgreSQL's chains (sqlChainPostgres).
func (e *postgresEngine) chains([]*intakeReq) [][]int { return nil }

func (e *postgresEngine) recordChain(context.Context, boundStmts, []*intakeReq, []int, []intakeRes) error {
	return errors.New("record chain: not on PostgreSQL")
}

func (e *postgresEngine) insertJob(ctx context.Context, st boundStmts, del validation.Delivery, job *validation.JobSpec, now int64) (int64, string, error) {
	return insertJobPG(ctx, st, del, job, now)
}

// commit records a batch, bodies in their rows, in one transaction.
func (e *postgresEngine) commit(ctx context.Context, batch []*intakeReq) {
	e.d.commitInline(ctx, batch)
}
func (e *postgresEngine) betweenBatches(context.Context) {}
func (e *postgresEngine) writerDone()                    {}

// durable: the server synced the commit; failed: no files of its own.
func (e *postgresEngine) durable() error { return nil }
func (e *postgresEngine) failed() error  { return nil }

// checkWritable: a standby (a failover that landed on a replica) or a
// read-only database answers reads only.
func (e *postgresEngine) checkWritable(ctx context.Context, tx *sql.Tx) error {
	var standby bool
	var readOnly string
	if err := tx.QueryRowContext(ctx, `SELECT pg_is_in_recovery(), current_setting('transaction_read_only')`).Scan(&standby, &readOnly); err != nil {
		return err
	}
	switch {
	case standby:
		return errors.New("the PostgreSQL server is a read-only standby")
	case readOnly != "off":
		return errors.New("the PostgreSQL database takes no writes (transaction_read_only is " + readOnly + ")")
	}
	return nil
}

// rowBody: a body in its row is encoded as the body log's are.
func (e *postgresEngine) rowBody(b []byte) ([]byte, error) { return decodeBody(b) }

func (e *postgresEngine) loggedBody(bodyRef) ([]byte, error) {
	return nil, fmt.Errorf("%w: a body log reference on PostgreSQL", ErrBodyCorrupt)
}

// pruneBodies: every body is in its row.
func (e *postgresEngine) pruneBodies(ctx context.Context, cutoff int64, res *PruneResult) error {
	return e.d.pruneRowBodies(ctx, cutoff, nil, res)
}

// backup: a PostgreSQL database is the server's to back up.
func (e *postgresEngine) backup(_ context.Context, dest string) (BackupResult, error) {
	return BackupResult{Path: dest}, fmt.Errorf("backup to %s: %w", dest, ErrBackupPostgres)
}

func (e *postgresEngine) close() error { return nil }

// pgConnector hands database/sql connections whose statements are
// rewritten from the store's dialect into PostgreSQL's (dialect.go).
type pgConnector struct{ driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		return nil, errors.Join(fmt.Errorf("pgx stdlib returned a %T", conn), conn.Close())
	}
	return pgConn{sc}, nil
}

// pgConn is pgx's database/sql connection with every statement's text
// rewritten; the rest of its methods (transactions, ping, session reset,
// argument checks) are pgx's own.
type pgConn struct{ *stdlib.Conn }

func (c pgConn) Prepare(q string) (driver.Stmt, error) { return c.Conn.Prepare(postgresSQL(q)) }

func (c pgConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, postgresSQL(q))
}

func (c pgConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, postgresSQL(q), args)
}

func (c pgConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, postgresSQL(q), args)
}

// retryable reports whether a failed write transaction can run again: a
// serialization failure or a deadlock the server broke (the transaction
// will see the winner's commit), or a failure to begin — a pooled
// connection the server ended (a restart, a failover) is only found dead
// when used, and nothing was written on it.
func (e *postgresEngine) retryable(err error) bool {
	var pe *pgconn.PgError
	var be *beginError
	return errors.As(err, &be) || errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// beginError is a transaction that failed to begin.
type beginError struct{ err error }

func (e *beginError) Error() string { return "begin: " + e.err.Error() }
func (e *beginError) Unwrap() error { return e.err }

// Listen wakes: it sends on wake (without blocking: one pending wake-up is
// enough) whenever any replica's intake queued a job, until ctx ends. It
// reconnects after a lost connection, waking once on each reconnect (a
// notification may have been missed). On SQLite it returns at once: there
// is no other process to hear from, and intake wakes its own workers.
func (d *DB) Listen(ctx context.Context, wake chan<- struct{}) error { return d.eng.listen(ctx, wake) }

func (e *postgresEngine) listen(ctx context.Context, wake chan<- struct{}) error {
	d := e.d
	nudge := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	for backoff := 100 * time.Millisecond; ; {
		err := e.listenOnce(ctx, nudge)
		if ctx.Err() != nil {
			return nil
		}
		d.log.Warn("job notifications lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(2*backoff, 10*time.Second)
		nudge()
	}
}

// session opens a connection outside the pool — for LISTEN, and for a
// task's session lock while the task itself uses the pool, which may be
// one connection — and returns it with its closer.
func (e *postgresEngine) session(ctx context.Context) (*pgx.Conn, func() error, error) {
	conn, err := pgx.ConnectConfig(ctx, e.cfg)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return conn.Close(cctx)
	}, nil
}

func (e *postgresEngine) listenOnce(ctx context.Context, nudge func()) error {
	conn, closeConn, err := e.session(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer func() { _ = closeConn() }() // a closing connection's error changes nothing
	if _, err := conn.Exec(ctx, "LISTEN "+JobsChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		nudge()
	}
}

// Exclusive runs fn unless another replica is running the task named
// name: on PostgreSQL it holds a session advisory lock for name on a
// connection of its own while fn runs, and reports false without running
// fn when another session holds it (the periodic tasks every replica schedules — the redelivery sweep,
// retention — then run on one replica at a time, not on all at once). On
// SQLite, one process owns the store: fn runs.
func (d *DB) Exclusive(ctx context.Context, name string, fn func(context.Context) error) (ran bool, err error) {
	return d.eng.exclusive(ctx, name, fn)
}

func (e *postgresEngine) exclusive(ctx context.Context, name string, fn func(context.Context) error) (ran bool, err error) {
	conn, closeConn, err := e.session(ctx)
	if err != nil {
		return false, fmt.Errorf("exclusive %s: %w", name, err)
	}
	// Closing the session releases the lock.
	defer func() { err = errors.Join(err, closeConn()) }()
	key := lockKey("task", name)
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ran); err != nil {
		return false, fmt.Errorf("exclusive %s: %w", name, err)
	}
	if !ran {
		return false, nil
	}
	return true, fn(ctx)
}

// lockKey is an advisory lock key: FNV-1a of kind, ":" and name, so a
// task's keys and the pull requests' never share a namespace. Two names
// sharing a key only take turns.
func lockKey(kind, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{':'})
	h.Write([]byte(name))
	return int64(h.Sum64())
}
