package store_test

import (
	"context"
	"database/sql"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gilf-review/gilf/internal/pgtest"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/postgres"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/store/storetest"
)

// The conformance suite's helpers, under the names this package's tests
// use.
type clock = storetest.Clock

var (
	newClock   = storetest.NewClock
	testLogger = storetest.Logger
	payload    = storetest.Payload
	delivery   = storetest.Delivery
	spec       = storetest.Spec
	sha        = storetest.SHA
	record     = storetest.Record
	state      = storetest.State
	claim      = storetest.Claim
)

// openAt opens a store at loc — a SQLite file path, or a postgres:// URL
// (newLocation) — and closes it at the end of the test.
func openAt(t testing.TB, loc string, opts store.Options) *store.DB {
	t.Helper()
	if postgres.IsURL(loc) {
		return pgEngine.OpenAt(t, loc, opts)
	}
	return lite.OpenAt(t, loc, opts)
}

// pg is the package's PostgreSQL server (TestMain).
var pg *pgtest.Server

var (
	// lite is SQLite: a file in the test's temp dir. The tests of one
	// engine's machinery outside the conformance suite run on it.
	lite = storetest.Engine{Name: "sqlite", NewLocation: func(t testing.TB) string { return filepath.Join(t.TempDir(), "gilf.db") }, Open: sqlite.Open}
	// postgres is a new database on the package's PostgreSQL server.
	pgEngine = storetest.Engine{Name: "postgres", NewLocation: func(t testing.TB) string { return pg.NewDatabase(t) }, Open: postgres.Open}
)

// openTest opens a fresh SQLite store and returns it with its location.
func openTest(t testing.TB, c *clock) (*store.DB, string) {
	t.Helper()
	loc := lite.NewLocation(t)
	return openAt(t, loc, store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }}), loc
}

// rawDB opens the store's file with a plain connection, as another process
// (or an operator's sqlite3 shell) would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	t.Cleanup(func() {
		if err := raw.Close(); err != nil {
			t.Errorf("close raw db: %v", err)
		}
	})
	return raw
}

// startChild re-executes the test binary as a child that works on the
// database at path (TestMain dispatches on env) and returns its stdout.
func startChild(t *testing.T, ctx context.Context, env, path string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}
