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
	ErrBackupPostgres = errors.New("the store is PostgreSQL: back it up with pg_dump or the server's own backups, not gilf backup")
)
