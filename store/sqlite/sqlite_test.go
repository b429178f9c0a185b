package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/store/storetest"
)

// TestConformance runs the store's conformance suite on SQLite: a file
// in the test's temp dir.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Engine{Name: "sqlite", Open: sqlite.Open,
		NewLocation: func(t testing.TB) string { return filepath.Join(t.TempDir(), "gilf.db") }})
}
