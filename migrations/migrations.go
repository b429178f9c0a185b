// Package migrations holds gilf's numbered schema changes, NNNN_name.sql,
// applied in order by the store at start, one per transaction: SQLite's
// at the top, PostgreSQL's under postgres/ (numbered on their own).
package migrations

import (
	"embed"
	"io/fs"
)

// FS holds every SQLite migration file.
//
//go:embed *.sql
var FS embed.FS

//go:embed postgres/*.sql
var postgres embed.FS

// Postgres holds every PostgreSQL migration file, at its root.
var Postgres = must(fs.Sub(postgres, "postgres"))

func must(f fs.FS, err error) fs.FS {
	if err != nil {
		panic(err) // the pattern is a constant: cannot fail
	}
	return f
}
