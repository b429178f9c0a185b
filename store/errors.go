package store

import "errors"

var (
	// ErrLeaseLost means the caller no longer holds the job: its lease was
	// rescued by another worker (a higher fencing token), or the job was
	// superseded or cancelled meanwhile. The caller must stop and must not
	// post anything for the job.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotFound means no row has the asked-for key.
	ErrNotFound = errors.New("not found")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrBackupPostgres: gilf backup copies the SQLite file; a PostgreSQL
	// database is the server's to back up.
	// ErrNotDurable means an fsync of the database's log failed. The
	// commits since the last good sync may not be on disk, and after a
	// failed fsync the kernel may have dropped the dirty pages, so a later
	// good sync proves nothing: the store refuses every later write until
	// it is opened again.
	ErrNotDurable     = errors.New("store: WAL fsync failed; writes refused until the store is reopened")
	ErrBackupPostgres = errors.New("the store is PostgreSQL: back it up with pg_dump or the server's own backups, not gilf backup")
)

// MaxSerializationRetries is how often a write transaction that lost a
// serialization conflict to another replica (PostgreSQL: SQLSTATE 40001,
// 40P01) is run again before its error is returned.
const MaxSerializationRetries = 20
