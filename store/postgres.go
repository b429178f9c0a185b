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
	d := &DB{engine: EnginePostgres, w: w, r: r, log: logger, opts: opts, pgConfig: cfg,
		reqs: make([]chan *intakeReq, opts.IntakeWriters), quit: make(chan struct{}),
		ready: readyCache{turn: make(chan struct{}, 1)}}
	if err := d.stmts.prepare(ctx, w, d.engine); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", where, err), w.Close())
	}
	life := context.WithoutCancel(ctx)
	d.wg.Add(opts.IntakeWriters)
	for i := range d.reqs {
		d.reqs[i] = make(chan *intakeReq)
		go d.writer(life, d.reqs[i])
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
	return migrateFS(ctx, conn, EnginePostgres, migrations.Postgres, now, log)
}

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

// retryable reports whether a failed write transaction can run again:
// on PostgreSQL, a serialization failure or a deadlock the server broke
// (the transaction will see the winner's commit), or a failure to begin —
// a pooled connection the server ended (a restart, a failover) is only
// found dead when used, and nothing was written on it. SQLite's busy
// errors already waited out busy_timeout.
func (d *DB) retryable(err error) bool {
	if d.engine != EnginePostgres {
		return false
	}
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
func (d *DB) Listen(ctx context.Context, wake chan<- struct{}) error {
	if d.engine != EnginePostgres {
		return nil
	}
	nudge := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	for backoff := 100 * time.Millisecond; ; {
		err := d.listenOnce(ctx, nudge)
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
func (d *DB) session(ctx context.Context) (*pgx.Conn, func() error, error) {
	conn, err := pgx.ConnectConfig(ctx, d.pgConfig)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return conn.Close(cctx)
	}, nil
}

func (d *DB) listenOnce(ctx context.Context, nudge func()) error {
	conn, closeConn, err := d.session(ctx)
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

// Engine says which database the store runs on.
func (d *DB) Engine() Engine { return d.engine }

// Exclusive runs fn unless another replica is running the task named
// name: on PostgreSQL it holds a session advisory lock for name on a
// connection of its own while fn runs, and reports false without running
// fn when another session holds it (the periodic tasks every replica schedules — the redelivery sweep,
// retention — then run on one replica at a time, not on all at once). On
// SQLite, one process owns the store: fn runs.
func (d *DB) Exclusive(ctx context.Context, name string, fn func(context.Context) error) (ran bool, err error) {
	if d.engine != EnginePostgres {
		return true, fn(ctx)
	}
	conn, closeConn, err := d.session(ctx)
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
