package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/pgtest"
	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// openAt opens a store at loc — a SQLite file path, or a postgres:// URL
// (newLocation) — and closes it at the end of the test.
func openAt(t testing.TB, loc string, opts store.Options) *store.DB {
	t.Helper()
	open := store.Open
	if store.IsPostgresURL(loc) {
		open = store.OpenPostgres
	}
	db, err := open(context.Background(), loc, testLogger(t), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return db
}

// engine is one engine under the conformance suite (conformance_test.go):
// newLocation is where a fresh, empty store of it lives for one test.
type engine struct {
	name        string
	newLocation func(t testing.TB) string
}

// pg is the package's PostgreSQL server (TestMain).
var pg *pgtest.Server

var (
	// lite is SQLite: a file in the test's temp dir. The tests of one
	// engine's machinery outside the conformance suite run on it.
	lite = engine{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "gilf.db") }}
	// postgres is a new database on the package's PostgreSQL server.
	postgres = engine{"postgres", func(t testing.TB) string { return pg.NewDatabase(t) }}
	// engines are what the conformance suite runs on.
	engines = []engine{lite, postgres}
)

// openTest opens a fresh store of e and returns it with its location.
func (e engine) openTest(t testing.TB, c *clock) (*store.DB, string) {
	t.Helper()
	loc := e.newLocation(t)
	return openAt(t, loc, store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }}), loc
}

// payload is a real pull_request delivery body.
func payload(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(shared.Data(t, "webhooks", "pull_request", "opened.json"))
	if err != nil {
		t.Fatalf("read payload: %v", err)
	}
	return b
}

func delivery(id string, body []byte, at time.Time) validation.Delivery {
	return validation.Delivery{
		ID: id, Event: "pull_request", Action: "opened", InstallationID: 1,
		Repo: "Codertocat/Hello-World", PR: 2, HeadSHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
		ReceivedAt: at, Status: validation.DeliveryQueued, Body: body,
	}
}

func spec(head string, updated time.Time) *validation.JobSpec {
	return &validation.JobSpec{
		Repo: "Codertocat/Hello-World", PR: 2, HeadSHA: head, HeadRepo: "Codertocat/Hello-World",
		BaseRef: "master", InstallationID: 1, Trigger: "opened", PRUpdatedAt: updated,
	}
}

func sha(n int) string { return fmt.Sprintf("%040x", n) }

func record(t testing.TB, db *store.DB, d validation.Delivery, j *validation.JobSpec) validation.RecordResult {
	t.Helper()
	res, err := db.RecordDelivery(context.Background(), d, j)
	if err != nil {
		t.Fatalf("record delivery %s: %v", d.ID, err)
	}
	return res
}

func state(t testing.TB, db *store.DB, id int64) store.JobStatus {
	t.Helper()
	st, err := db.JobState(context.Background(), id)
	if err != nil {
		t.Fatalf("job state %d: %v", id, err)
	}
	return st
}

func claim(t testing.TB, db *store.DB, owner string, ttl time.Duration) (store.Job, bool) {
	t.Helper()
	j, ok, err := db.Claim(context.Background(), owner, ttl)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return j, ok
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
