package store

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"
)

// Engine names the database behind a DB.
type Engine string

const (
	// EngineSQLite is the embedded default: one file under GILF_DATA_DIR
	// (store/sqlite).
	EngineSQLite Engine = "sqlite"
	// EnginePostgres is a PostgreSQL server shared by every replica
	// (store/postgres).
	EnginePostgres Engine = "postgres"
)

// Driver is what differs between the databases behind a DB: store/sqlite
// and store/postgres implement it and hand it to New. Nothing in this
// package asks which engine it runs on.
type Driver interface {
	Engine() Engine

	// WriteTx are the options of a write transaction; ClaimTx those of a
	// claim's, whose SELECT ends with ClaimLock; IntakeTx those of an
	// intake batch whose deliveries touch only their own pull requests'
	// jobs (byPR), which takes LockPRs first and Notify last when it
	// queued a job.
	WriteTx() *sql.TxOptions
	ClaimTx() *sql.TxOptions
	ClaimLock() string
	IntakeTx(byPR bool) *sql.TxOptions
	LockPRs(ctx context.Context, tx *sql.Tx, keys []int64) error
	Notify(ctx context.Context, tx *sql.Tx) error
	// Retryable reports whether a failed write transaction may run again
	// (a transaction that could not begin wraps ErrBegin).
	Retryable(err error) bool

	// JSONEach is the table of a JSON array's elements as text, in a
	// column named value (param: the placeholder of the array's text);
	// DayOf is the UTC day (YYYY-MM-DD) of a column of Unix milliseconds.
	JSONEach(param string) string
	DayOf(col string) string
	// JobIDs is a statement whose rows are ?1 new job ids, ascending,
	// for the jobs a transaction inserts next (chain.go).
	JobIDs() string

	// Durable makes every commit so far durable; Failed is why the
	// engine refuses writes for good (a failed fsync), or nil;
	// CheckWritable, inside a write transaction, is why the database
	// takes no writes, or nil.
	Durable() error
	Failed() error
	CheckWritable(ctx context.Context, tx *sql.Tx) error

	Backup(ctx context.Context, dest string) (BackupResult, error)
	Listen(ctx context.Context, wake chan<- struct{}) error
	Exclusive(ctx context.Context, name string, fn func(context.Context) error) (bool, error)
	// Close releases what the driver holds, once the writers stopped and
	// before the pools close.
	Close() error
}

// ErrBegin wraps the error of a transaction that failed to begin.
var ErrBegin = errors.New("begin transaction")

// beginError is a transaction that failed to begin.
type beginError struct{ err error }

func (e *beginError) Error() string   { return "begin: " + e.err.Error() }
func (e *beginError) Unwrap() []error { return []error{ErrBegin, e.err} }

// LockKey is an advisory lock key: FNV-1a of kind, ":" and name, so a
// task's keys and the pull requests' never share a namespace. Two names
// sharing a key only take turns.
func LockKey(kind, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{':'})
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// Backup writes a consistent copy of the store to dest, while other
// handles — `gilf serve` — keep writing (SQLite; PostgreSQL's server
// backs its databases up: ErrBackupPostgres).
func (d *DB) Backup(ctx context.Context, dest string) (BackupResult, error) {
	return d.drv.Backup(ctx, dest)
}

// BackupResult is what Backup copied.
type BackupResult struct {
	Path       string // the copied database
	Deliveries int    // delivery rows in the copy
}

// Listen wakes: it sends on wake (without blocking: one pending wake-up is
// enough) whenever any replica's intake queued a job, until ctx ends. On
// SQLite it returns at once: there is no other process to hear from, and
// intake wakes its own workers.
func (d *DB) Listen(ctx context.Context, wake chan<- struct{}) error { return d.drv.Listen(ctx, wake) }

// Exclusive runs fn unless another replica is running the task named
// name, and reports whether fn ran: the periodic tasks every replica
// schedules (the redelivery sweep, retention) then run on one replica at
// a time. On SQLite one process owns the store: fn runs.
func (d *DB) Exclusive(ctx context.Context, name string, fn func(context.Context) error) (ran bool, err error) {
	return d.drv.Exclusive(ctx, name, fn)
}

// Engine says which database the store runs on.
func (d *DB) Engine() Engine { return d.drv.Engine() }

func (d *DB) retryable(err error) bool { return d.drv.Retryable(err) }
