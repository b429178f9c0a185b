// Package migrations holds gilf's numbered schema changes, NNNN_name.sql,
// applied in order by the store at start, one per transaction.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
