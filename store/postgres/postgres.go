package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/migrations"
	"github.com/gilf-review/gilf/store"
)

// PostgreSQL defaults. Each is a named limit with a test at its boundary.
const (
	// DefaultMaxConns is the size of a replica's pool on PostgreSQL
	// (GILF_DATABASE_MAX_CONNS), reads and writes; LISTEN holds one more
	// connection.
	DefaultMaxConns = 16
	// IntakeWriters is how many group-commit writers a replica runs on
	// PostgreSQL, each committing on its own connection, so commits
	// overlap. What it buys, measured with bench/intake.sh -c 64 (500
	// pull requests): 0.02× a bare net/http handler with one writer
	// against 0.05× with four, in one series at load average 10–15
	// (docs/store.md).
	IntakeWriters = 4
	// migrationLockID is the advisory lock replicas take to apply
	// migrations one at a time ("gilf" in ASCII).
	migrationLockID = 0x67696c66
	// JobsChannel is the LISTEN/NOTIFY channel intake notifies when it
	// queued a job, so idle replicas claim it at once.
	JobsChannel = "gilf_jobs"
)

// IsURL reports whether url selects the PostgreSQL engine.
func IsURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// Open connects to the PostgreSQL database at url (postgres://…),
// applies pending migrations under an advisory lock (replicas starting
// together apply each one once), and starts the group-commit writers.
// Several replicas may share the database: claims never hand a job to
// two of them, and every write a worker makes is fenced by its lease.
func Open(ctx context.Context, url string, logger *slog.Logger, opts store.Options) (*store.DB, error) {
	if logger == nil {
		return nil, errors.New("open store: nil logger")
	}
	if !IsURL(url) {
		return nil, errors.New("open store: not a postgres:// URL")
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's error quotes the URL, password included: say only why.
		return nil, fmt.Errorf("open store: invalid PostgreSQL URL: %s", redactURLError(err))
	}
	opts = opts.WithDefaults()
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
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
	d, err := store.New(ctx, w, w, &pgStore{cfg: cfg, log: logger}, logger, opts, IntakeWriters)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", where, err)
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
	return store.Migrate(ctx, conn, postgresMigrationsTable, migrations.Postgres, now, log)
}

// pgStore is PostgreSQL's store.Driver: a pool shared by reads and
// writes, replicas sharing the database.
type pgStore struct {
	cfg *pgx.ConnConfig // for the sessions outside the pool (LISTEN, task locks)
	log *slog.Logger
}

var _ store.Driver = (*pgStore)(nil)

// postgresMigrationsTable is schema_migrations in PostgreSQL's types.
const postgresMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		name       TEXT   NOT NULL,
		applied_at BIGINT NOT NULL
	)`

func (e *pgStore) Engine() store.Engine { return store.EnginePostgres }

// WriteTx: SERIALIZABLE, so the rules written for one writer hold among
// replicas too; a transaction that lost a conflict runs again.
func (e *pgStore) WriteTx() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelSerializable}
}

// claimTx: claims run READ COMMITTED and take the next job with FOR
// UPDATE SKIP LOCKED (claimSQL), so replicas claiming together each take
// a different job instead of conflicting on the first one; the lease
// rescues in the same transaction re-check their WHERE on the row's
// newest version, so a job is rescued once.
func (e *pgStore) ClaimTx() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

func (e *pgStore) ClaimLock() string { return " FOR UPDATE SKIP LOCKED" }

// intakeTx: a batch whose every delivery touches only its own pull
// request's jobs runs READ COMMITTED under the pull requests' locks
// (lockPRs): deliveries of one pull request take turns on its lock,
// others commit side by side. Under SERIALIZABLE, new heads of one pull
// request arriving together from two replicas would abort each other
// instead. Not a speed-up on one replica: SERIALIZABLE without the locks
// measured 0.05× / 0.03× a bare handler (p99 205 / 1,070 ms) against
// 0.06× / 0.03× (p99 258 / 730 ms) with them (bench/intake.sh -c 64, 1 /
// 500 pull requests, load average 11–14).
func (e *pgStore) IntakeTx(byPR bool) *sql.TxOptions {
	if byPR {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return e.WriteTx()
}

// sqlLockPRs takes the pull requests' advisory locks in key order, so two
// batches never hold one each of the other's.
const sqlLockPRs = `SELECT pg_advisory_xact_lock(k) FROM (SELECT unnest(CAST(? AS BIGINT[])) AS k ORDER BY k) AS l`

func (e *pgStore) LockPRs(ctx context.Context, tx *sql.Tx, keys []int64) error {
	_, err := tx.ExecContext(ctx, sqlLockPRs, keys)
	return err
}

// notify wakes every replica's workers (Listen) with the commit.
func (e *pgStore) Notify(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify(?, '')`, JobsChannel)
	return err
}

func (e *pgStore) JSONEach(param string) string {
	return "json_array_elements_text(CAST(" + param + " AS json))"
}

func (e *pgStore) DayOf(col string) string {
	return "to_char(to_timestamp(" + col + " / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
}

// JobIDs: the sequence's next values, which no other transaction draws.
func (e *pgStore) JobIDs() string {
	return `SELECT id FROM (SELECT nextval('jobs_id_seq') AS id FROM generate_series(1, CAST(?1 AS BIGINT))) AS s ORDER BY id`
}

// Durable: the server synced the commit; Failed: no files of its own.
func (e *pgStore) Durable() error { return nil }
func (e *pgStore) Failed() error  { return nil }

// checkWritable: a standby (a failover that landed on a replica) or a
// read-only database answers reads only.
func (e *pgStore) CheckWritable(ctx context.Context, tx *sql.Tx) error {
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

// Backup: a PostgreSQL database is the server's to back up.
func (e *pgStore) Backup(_ context.Context, dest string) (store.BackupResult, error) {
	return store.BackupResult{Path: dest}, fmt.Errorf("backup to %s: %w", dest, store.ErrBackupPostgres)
}

func (e *pgStore) Close() error { return nil }

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

// Retryable reports whether a failed write transaction can run again: a
// serialization failure or a deadlock the server broke (the transaction
// will see the winner's commit), or a failure to begin — a pooled
// connection the server ended (a restart, a failover) is only found dead
// when used, and nothing was written on it.
func (e *pgStore) Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, store.ErrBegin) || errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// Listen: see store.DB.Listen.
func (e *pgStore) Listen(ctx context.Context, wake chan<- struct{}) error {
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
		e.log.Warn("job notifications lost; reconnecting", logkey.Err, err, "in", backoff)
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
func (e *pgStore) session(ctx context.Context) (*pgx.Conn, func() error, error) {
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

func (e *pgStore) listenOnce(ctx context.Context, nudge func()) error {
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

// Exclusive holds a session advisory lock for name on a connection of its
// own while fn runs, and reports false without running fn when another
// session holds it.
func (e *pgStore) Exclusive(ctx context.Context, name string, fn func(context.Context) error) (ran bool, err error) {
	conn, closeConn, err := e.session(ctx)
	if err != nil {
		return false, fmt.Errorf("exclusive %s: %w", name, err)
	}
	// Closing the session releases the lock.
	defer func() { err = errors.Join(err, closeConn()) }()
	key := store.LockKey("task", name)
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ran); err != nil {
		return false, fmt.Errorf("exclusive %s: %w", name, err)
	}
	if !ran {
		return false, nil
	}
	return true, fn(ctx)
}
