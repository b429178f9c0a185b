package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/migrations"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// TestMigrateOnePerTransaction: a failing migration leaves the earlier
// ones applied and recorded and itself neither applied nor recorded; a
// rerun is a no-op; a database newer than the binary is refused.
func TestMigrateOnePerTransaction(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	path := filepath.Join(t.TempDir(), "m.db")
	w, err := sql.Open("sqlite", dsn(path, store.Options{}.WithDefaults(), false))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	fsys := fstest.MapFS{
		"0001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)},
		"0002_b.sql": {Data: []byte(`CREATE TABLE b (x INTEGER); CREATE TABLE a (y INTEGER);`)}, // fails: a exists
	}
	if err := store.Migrate(ctx, w, sqliteMigrationsTable, fsys, time.Now, log); err == nil || !strings.Contains(err.Error(), "0002_b") {
		t.Fatalf("err = %v, want migration 0002 to fail", err)
	}
	versions := func() []int {
		var out []int
		rows, err := w.Query(`SELECT version FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	if diff := cmp.Diff([]int{1}, versions()); diff != "" {
		t.Fatalf("recorded (-want +got):\n%s", diff)
	}
	var n int
	if err := w.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE name = 'b'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("half-applied migration left table b: %d %v", n, err)
	}
	fsys["0002_b.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE b (x INTEGER);`)}
	for range 2 {
		if err := store.Migrate(ctx, w, sqliteMigrationsTable, fsys, time.Now, log); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]int{1, 2}, versions()); diff != "" {
		t.Fatalf("recorded (-want +got):\n%s", diff)
	}
	delete(fsys, "0002_b.sql")
	if err := store.Migrate(ctx, w, sqliteMigrationsTable, fsys, time.Now, log); err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("older binary on a newer database: %v", err)
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name string
		path string
		log  *slog.Logger
		opts store.Options
	}{
		{"empty path", "", log, store.Options{}},
		{"query in path", filepath.Join(t.TempDir(), "x.db?mode=ro"), log, store.Options{}},
		{"nil logger", filepath.Join(t.TempDir(), "x.db"), nil, store.Options{}},
		{"bad synchronous", filepath.Join(t.TempDir(), "x.db"), log, store.Options{Synchronous: "OFF"}},
		{"missing directory", filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"), log, store.Options{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(context.Background(), tt.path, tt.log, tt.opts)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestOpenSetsPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	db, err := Open(context.Background(), path, slog.New(slog.NewTextHandler(io.Discard, nil)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Connections as Open makes its writer (w) and readers (r).
	pool := func(readOnly bool) *sql.DB {
		p, err := sql.Open("sqlite", dsn(path, store.Options{}.WithDefaults(), readOnly))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	w, r := pool(false), pool(true)
	for _, tt := range []struct {
		pool *sql.DB
		q    string
		want string
	}{
		{w, "PRAGMA journal_mode", "wal"},
		{w, "PRAGMA busy_timeout", "5000"},
		{w, "PRAGMA foreign_keys", "1"},
		{w, "PRAGMA synchronous", "1"}, // NORMAL: the store fsyncs the WAL itself (walsync.go)
		// A WAL that starts over is cut back to the size past which the
		// writer checkpoints it, so the file's size tells the writer.
		{w, "PRAGMA journal_size_limit", strconv.Itoa(store.DefaultBusyCheckpointBytes)},
		{r, "PRAGMA query_only", "1"},
		{r, "PRAGMA busy_timeout", "5000"},
	} {
		var got string
		if err := tt.pool.QueryRow(tt.q).Scan(&got); err != nil || got != tt.want {
			t.Errorf("%s = %q, %v; want %q", tt.q, got, err, tt.want)
		}
	}
	// Foreign keys are enforced: a delivery naming a missing job is refused.
	if _, err := conn(t, path).Exec(`INSERT INTO deliveries (id, event, received_at, status, job_id, body) VALUES ('x', 'e', 1, 's', 42, x'')`); err == nil {
		t.Fatal("foreign key not enforced")
	}
}

// TestMigration0002KeepsDeliveries: deliveries recorded under schema 1
// (body in the row, job_id link) read back the same after migration 0002
// moved them to the lean table: the body from its column, the job through
// the job key the row now carries.
func TestMigration0002KeepsDeliveries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	w, err := sql.Open("sqlite", dsn(path, store.Options{}.WithDefaults(), false))
	if err != nil {
		t.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	first, err := fs.ReadFile(migrations.FS, "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, w, sqliteMigrationsTable, fstest.MapFS{"0001_init.sql": {Data: first}}, time.Now, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"action":"opened","number":7}`)
	for _, q := range []string{
		`INSERT INTO jobs (id, repo, pr, head_sha, base_ref, delivery_id, trigger_action, state, next_attempt_at, created_at, updated_at)
			VALUES (5, 'o/r', 7, 'abc', 'main', 'd-job', 'opened', 'queued', 1, 1, 1)`,
		`INSERT INTO deliveries (id, event, action, repo, pr, head_sha, received_at, status, job_id, body)
			VALUES ('d-job', 'pull_request', 'opened', 'o/r', 7, 'abc', 1000, 'queued', 5, CAST('` + string(body) + `' AS BLOB))`,
		`INSERT INTO deliveries (id, event, received_at, status, body) VALUES ('d-ping', 'ping', 2000, 'recorded', x'7b7d')`,
	} {
		if _, err := w.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db := upgrade(t, w, path)
	got, err := db.Delivery(ctx, "d-job")
	if err != nil || !bytes.Equal(got.Body, body) || got.JobID != 5 || got.HeadSHA != "abc" || got.PR != 7 {
		t.Fatalf("d-job after 0002: %+v (body %q), %v", got, got.Body, err)
	}
	ping, err := db.Delivery(ctx, "d-ping")
	if err != nil || string(ping.Body) != "{}" || ping.JobID != 0 {
		t.Fatalf("d-ping after 0002: %+v, %v", ping, err)
	}
	// A redelivery of the old one is still a duplicate of its job.
	res, err := db.RecordDelivery(ctx, validation.Delivery{ID: "d-job", Event: "pull_request", Status: validation.DeliveryQueued,
		Body: body, ReceivedAt: time.Now()}, nil)
	if err != nil || !res.Duplicate || res.JobID != 5 {
		t.Fatalf("redelivery after 0002 = %+v, %v", res, err)
	}
}

// TestMigration0003AddsReruns: a job queued under schema 2 is claimed
// after migration 0003 as a first run (Rerun 0), and can be re-run.
func TestMigration0003AddsReruns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	w := openAt(t, path, "0001_init.sql", "0002_delivery_body_log.sql")
	if _, err := w.Exec(`INSERT INTO jobs (id, repo, pr, head_sha, base_ref, delivery_id, trigger_action, state, next_attempt_at, created_at, updated_at)
		VALUES (5, 'o/r', 7, 'abc', 'main', 'd-job', 'opened', 'queued', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	db := upgrade(t, w, path)
	if v, err := db.SchemaVersion(ctx); err != nil || v < 3 {
		t.Fatalf("schema version %d, %v; want 3 or later", v, err)
	}
	j, ok, err := db.Claim(ctx, "w", time.Minute)
	if err != nil || !ok || j.ID != 5 || j.Rerun != 0 {
		t.Fatalf("claim after 0003 = %+v, %v, %v", j, ok, err)
	}
}

// upgrade closes w, the writer of an older database (openAt), and opens
// the store on it, which applies the migrations it lacks.
func upgrade(t *testing.T, w *sql.DB, path string) *store.DB {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(context.Background(), path, slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openAt makes a database at path with only the embedded migrations
// named (in order), as an older binary left it, and returns its writer.
func openAt(t *testing.T, path string, names ...string) *sql.DB {
	t.Helper()
	w, err := sql.Open("sqlite", dsn(path, store.Options{}.WithDefaults(), false))
	if err != nil {
		t.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	old := fstest.MapFS{}
	for _, name := range names {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		old[name] = &fstest.MapFile{Data: b}
	}
	if err := store.Migrate(context.Background(), w, sqliteMigrationsTable, old, time.Now, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestMigration0005AddsSemanticSpans: cost spans written under schema 4
// read back the same after migration 0005 rebuilt the table (tokens
// NULL), its indexes and its checks stand, and a semantic span with its
// tokens is recorded after it.
func TestMigration0005AddsSemanticSpans(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	w := openAt(t, path, "0001_init.sql", "0002_delivery_body_log.sql", "0003_job_reruns.sql", "0004_retention.sql")
	for _, q := range []string{
		`INSERT INTO jobs (id, repo, pr, head_sha, base_ref, delivery_id, trigger_action, state, next_attempt_at, created_at, updated_at)
			VALUES (5, 'o/r', 7, 'abc', 'main', 'd-5', 'opened', 'done', 1, 1, 1)`,
		`INSERT INTO jobs (id, repo, pr, head_sha, base_ref, delivery_id, trigger_action, state, next_attempt_at, created_at, updated_at)
			VALUES (6, 'o/r', 8, 'def', 'main', 'd-6', 'opened', 'queued', 1, 1, 1)`,
		`INSERT INTO runs (id, job_id, lease_gen, outcome, record, started_at, finished_at) VALUES (9, 5, 1, 'passed', '{}', 1000, 4000)`,
		`INSERT INTO cost_spans (id, job_id, run_id, lane, executor, started_at, finished_at, vcpu, memory_gib, usd, method)
			VALUES (1, 5, 9, 'primary', 'managed-e2b', 1000, 4000, 2.0, 4.0, 0.25, 'estimate:wall-clock')`,
		`INSERT INTO cost_spans (id, job_id, run_id, lane, executor, started_at, finished_at, method)
			VALUES (2, 5, 9, 'shadow', 'self-host', 1000, 6000, 'estimate:wall-clock')`,
		`INSERT INTO cost_spans (id, job_id, lane, executor, started_at, finished_at) VALUES (3, 5, 'primary', 'local', 1000, 1000)`,
	} {
		if _, err := w.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := w.Exec(`INSERT INTO cost_spans (job_id, lane, executor, started_at, finished_at) VALUES (5, 'semantic', 'model:m', 1, 1)`); err == nil {
		t.Fatal("schema 4 accepted a semantic span")
	}
	dump := func(db *sql.DB) []string {
		t.Helper()
		rows, err := db.Query(`SELECT id, job_id, run_id, lane, executor, started_at, finished_at, vcpu, memory_gib, usd, method
			FROM cost_spans ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c [11]any
			ptrs := make([]any, len(c))
			for i := range c {
				ptrs[i] = &c[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(c))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := dump(w)
	db := upgrade(t, w, path)
	if v, err := db.SchemaVersion(ctx); err != nil || v < 5 {
		t.Fatalf("schema version %d, %v; want 5 or later", v, err)
	}
	if d := cmp.Diff(before, dump(conn(t, path))); d != "" {
		t.Fatalf("spans after 0005 (-before +after):\n%s", d)
	}
	var untokened, indexes int
	if err := conn(t, path).QueryRow(`SELECT COUNT(*) FROM cost_spans WHERE input_tokens IS NULL AND output_tokens IS NULL`).Scan(&untokened); err != nil || untokened != 3 {
		t.Fatalf("old spans with no tokens = %d, %v; want 3", untokened, err)
	}
	if err := conn(t, path).QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'cost_spans'
		AND name IN ('cost_spans_executor', 'cost_spans_started')`).Scan(&indexes); err != nil || indexes != 2 {
		t.Fatalf("cost_spans indexes = %d, %v; want both", indexes, err)
	}
	for _, bad := range []string{
		`INSERT INTO cost_spans (job_id, lane, executor, started_at, finished_at) VALUES (5, 'bogus', 'x', 1, 1)`,                          // the lane CHECK
		`INSERT INTO cost_spans (job_id, lane, executor, started_at, finished_at) VALUES (42, 'primary', 'x', 1, 1)`,                       // the job's foreign key
		`INSERT INTO cost_spans (job_id, lane, executor, started_at, finished_at, input_tokens) VALUES (5, 'semantic', 'x', 1, 1, 'many')`, // STRICT
	} {
		if _, err := conn(t, path).Exec(bad); err == nil {
			t.Errorf("accepted after 0005: %s", bad)
		}
	}
	j, ok, err := db.Claim(ctx, "w", time.Minute)
	if err != nil || !ok || j.ID != 6 {
		t.Fatalf("claim after 0005 = %+v, %v, %v", j, ok, err)
	}
	in, out, usd := int64(1200), int64(80), 0.001
	start := time.UnixMilli(10_000)
	if _, err := db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}, Spans: []store.CostSpan{{
		Lane: store.LaneSemantic, Executor: "model:m", Started: start, Finished: start.Add(time.Second),
		InputTokens: &in, OutputTokens: &out, USD: &usd, Method: "estimate:tokens",
	}}}); err != nil {
		t.Fatalf("finish with a semantic span after 0005: %v", err)
	}
	days, err := db.CostsByDay(ctx, time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(days, func(d store.CostDay) bool {
		return d.Lane == store.LaneSemantic && d.Executor == "model:m" && d.InputTokens == 1200 && d.OutputTokens == 80
	}) {
		t.Fatalf("CostsByDay after 0005 = %+v, want the semantic span with its tokens", days)
	}
}

// bytecode is the opcodes SQLite compiles q to on conn (EXPLAIN).
func bytecode(t *testing.T, conn *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query("EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ops []string
	for rows.Next() {
		var addr, p1, p2, p3, p5 int
		var op string
		var p4, comment any
		if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ops) == 0 {
		t.Fatalf("no bytecode for %s", q)
	}
	return ops
}

// TestMigration0006KeepsTheStateRule: migration 0006 rewrites the CHECK
// on jobs.state in place. A database from schema 5 keeps its jobs; the
// rule still refuses an unknown state, on the connection that migrated
// and on a connection open before the migration; every state it allowed
// is still allowed; and the database passes SQLite's integrity check.
func TestMigration0006KeepsTheStateRule(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	w := openAt(t, path, "0001_init.sql", "0002_delivery_body_log.sql", "0003_job_reruns.sql", "0004_retention.sql", "0005_semantic_spans.sql")
	if _, err := w.Exec(`INSERT INTO jobs (id, repo, pr, head_sha, base_ref, delivery_id, trigger_action, state, next_attempt_at, created_at, updated_at)
		VALUES (5, 'o/r', 7, 'abc', 'main', 'd-job', 'opened', 'queued', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	// A reader open across the migration, with schema 5 parsed.
	before, err := sql.Open("sqlite", dsn(path, store.Options{}.WithDefaults(), false))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	before.SetMaxOpenConns(1)
	var n int
	if err := before.QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("jobs before 0006 = %d, %v", n, err)
	}
	db := upgrade(t, w, path)
	var table string
	if err := conn(t, path).QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'jobs'`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(table, "state IN") || !strings.Contains(table, "state = 'cancelled'") {
		t.Fatalf("jobs after 0006:\n%s", table)
	}
	after := conn(t, path)
	for name, conn := range map[string]*sql.DB{"connection opened after": after, "connection open before": before} {
		for _, bad := range []string{
			`INSERT INTO jobs (repo, pr, head_sha, delivery_id, trigger_action, state, next_attempt_at, created_at, updated_at)
				VALUES ('o/r', 8, 'def', 'd', 'opened', 'bogus', 1, 1, 1)`,
			`UPDATE jobs SET state = 'Queued' WHERE id = 5`,
		} {
			if _, err := conn.Exec(bad); err == nil || !strings.Contains(err.Error(), "CHECK") {
				t.Errorf("%s after 0006: %s = %v; want a CHECK failure", name, bad, err)
			}
		}
		// Each reads the new rule: its updates build no temporary b-tree.
		if ops := bytecode(t, conn, `UPDATE jobs SET state = CASE WHEN ?1 THEN 'queued' ELSE state END, updated_at = ?2 WHERE id = ?3`, true, 1, 5); slices.Contains(ops, "OpenEphemeral") {
			t.Errorf("%s after 0006 still checks the state with a temporary b-tree: %v", name, ops)
		}
	}
	for _, s := range []store.State{store.StateRunning, store.StateDone, store.StateFailed, store.StateDead, store.StateSuperseded, store.StateCancelled, store.StateQueued} {
		if _, err := conn(t, path).Exec(`UPDATE jobs SET state = ? WHERE id = 5`, string(s)); err != nil {
			t.Errorf("state %s refused after 0006: %v", s, err)
		}
	}
	var check string
	if err := conn(t, path).QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check after 0006 = %q, %v", check, err)
	}
	j, ok, err := db.Claim(ctx, "w", time.Minute)
	if err != nil || !ok || j.ID != 5 {
		t.Fatalf("claim after 0006 = %+v, %v, %v", j, ok, err)
	}
}

// conn is a writer connection on the database at path, as Open makes.
func conn(t *testing.T, path string) *sql.DB {
	t.Helper()
	c, err := sql.Open("sqlite", dsn(path, store.Options{}.WithDefaults(), false))
	if err != nil {
		t.Fatal(err)
	}
	c.SetMaxOpenConns(1)
	t.Cleanup(func() { c.Close() })
	return c
}
