package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/gilf-review/gilf/internal/logtail"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// TestPostgresBatchMatchesOneByOne: one group commit on PostgreSQL ends
// exactly as the same deliveries recorded one by one on SQLite: the same
// answers and the same jobs (batchCases).
func TestPostgresBatchMatchesOneByOne(t *testing.T) {
	for _, c := range batchCases {
		t.Run(c.name, func(t *testing.T) { compareBatch(t, batchBefore, c.batch, c.deliveries, true) })
	}
}

// TestSQLiteBatchMatchesOneByOne: one group commit on SQLite ends exactly
// as the same deliveries recorded one by one (batchCases).
func TestSQLiteBatchMatchesOneByOne(t *testing.T) {
	for _, c := range batchCases {
		t.Run(c.name, func(t *testing.T) { compareBatch(t, batchBefore, c.batch, c.deliveries, false) })
	}
}

// batchBefore is recorded one by one before each of batchCases.
var batchBefore = []batchItem{
	{"p1", 3, 31, 10, 0}, // pull request 3's newest head
	{"p2", 4, 40, 0, 0},  // pull request 4: head 40, then 41 supersedes it
	{"p3", 4, 41, 1, 1},
}

// batchCases are group commits after batchBefore. The first holds new
// heads of several pull requests, two heads and a force-push back on one
// of them, a duplicate id, a second trigger for a recorded head, a stale
// head, a delivery without a job (twice), and a superseded head asked for
// again. The others hold only new deliveries asking for jobs — heads of
// several pull requests, four heads of one with the same update time, a
// pull request whose update time goes back, new heads of a pull request
// with a queued job, new heads older than a pull request's newest, a head
// asked for twice.
var batchCases = []struct {
	name       string
	batch      []batchItem
	deliveries int // stored after the batch
}{
	{"follow-ups", []batchItem{
		{"d1", 1, 10, 1, 2},
		{"d2", 2, 20, 1, 2},
		{"d3", 1, 11, 2, 3},  // supersedes head 10
		{"d2", 2, 20, 1, 2},  // the same delivery again: a duplicate
		{"d5", 3, 30, 5, 3},  // older than head 31: born superseded
		{"d6", 2, 20, 3, 4},  // head 20 again, another delivery: attaches
		{"d7", 0, 0, 0, 4},   // no job
		{"d8", 4, 40, 20, 5}, // head 40 asked for again: queued again, supersedes 41
		{"d9", 1, 10, 3, 6},  // pull request 1 back to head 10: queued again, supersedes 11
		{"d7", 0, 0, 0, 4},   // no job, again
		{"d10", 5, 50, 1, 6},
	}, 3 + 11 - 2},
	{"several pull requests", []batchItem{
		{"e1", 1, 10, 1, 2},
		{"e2", 1, 11, 2, 2}, // supersedes head 10
		{"e3", 2, 20, 1, 2},
		{"e4", 1, 12, 3, 3}, // supersedes head 11
		{"e5", 3, 30, 5, 3}, // older than head 31: born superseded
		{"e6", 4, 42, 9, 3}, // supersedes head 41
		{"e7", 2, 21, 2, 4}, // supersedes head 20
	}, 3 + 7},
	{"one pull request, the same update time", []batchItem{
		{"f1", 1, 10, 1, 2}, {"f2", 1, 11, 1, 2}, {"f3", 1, 12, 1, 2}, {"f4", 1, 13, 1, 3},
	}, 3 + 4},
	{"a pull request going back in time", []batchItem{ // h3 is born superseded
		{"h1", 1, 10, 5, 2}, {"h2", 2, 20, 1, 2}, {"h3", 1, 11, 4, 2}, {"h4", 1, 12, 6, 3},
	}, 3 + 4},
	{"a chain over unfinished jobs", []batchItem{ // pull request 4's head 41 is queued
		{"g1", 4, 42, 0, 2}, // older than head 41: born superseded
		{"g2", 4, 43, 2, 2}, // supersedes head 41
		{"g3", 4, 44, 2, 2}, // the same update time: supersedes head 43
		{"g4", 4, 45, 1, 2}, // born superseded
		{"g5", 4, 46, 3, 3}, // supersedes head 44
		{"g6", 6, 60, 1, 3}, // another pull request: a round
	}, 3 + 6},
	{"a chain older than its pull request", []batchItem{ // head 31 of pull request 3 stays queued
		{"x1", 3, 32, 5, 2}, {"x2", 3, 33, 6, 2}, {"x3", 3, 34, 9, 3},
	}, 3 + 3},
	{"a head twice", []batchItem{ // the second attaches
		{"k1", 1, 10, 1, 2}, {"k2", 1, 11, 2, 2}, {"k3", 1, 10, 3, 3},
	}, 3 + 3},
}

// batchItem is a delivery of batchCases.
type batchItem struct {
	id       string
	pr       int
	head     int // 0: no job
	updated  int // seconds after the clock's start
	received int
}

// compareBatch records before one by one on SQLite and on the engine
// under test (PostgreSQL, or SQLite), then batch one by one on SQLite and
// as one group commit on the other, and compares the answers and the
// jobs.
func compareBatch(t *testing.T, before, batch []batchItem, deliveries int, postgres bool) {
	t.Helper()
	c := newClock()
	t0 := c.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	mk := func(it batchItem) (validation.Delivery, *validation.JobSpec) {
		d := delivery(it.id, []byte(`{"n":"`+it.id+`"}`), at(it.received))
		if it.head == 0 {
			d.Status, d.Event, d.Action, d.PR, d.HeadSHA = validation.DeliveryIgnored, "issues", "opened", 0, ""
			return d, nil
		}
		j := spec(sha(it.head), at(it.updated))
		j.PR, d.PR, d.HeadSHA = it.pr, it.pr, j.HeadSHA
		return d, j
	}
	ctx := context.Background()
	prepare := func(db *store.DB) {
		for _, it := range before {
			d, j := mk(it)
			record(t, db, d, j)
		}
	}

	one := openAt(t, newLocationOn(t, false), store.Options{Now: c.Now})
	prepare(one)
	var want []validation.RecordResult
	for _, it := range batch {
		d, j := mk(it)
		want = append(want, record(t, one, d, j))
	}

	// The batch commits as one: no delivery of it fails the group commit
	// (which would record them one by one and hide the failure).
	eng, logged := lite, logtail.New(1<<20)
	if postgres {
		eng = pgEngine
	}
	pdb, err := eng.Open(ctx, newLocationOn(t, postgres), slog.New(slog.NewTextHandler(logged, nil)), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pdb.Close() })
	prepare(pdb)
	var dels []validation.Delivery
	var jobs []*validation.JobSpec
	for _, it := range batch {
		d, j := mk(it)
		dels, jobs = append(dels, d), append(jobs, j)
	}
	got, errs, err := store.RecordBatch(ctx, pdb, dels, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("delivery %d (%s): %v", i, batch[i].id, err)
		}
	}
	// Compared by the head each job names, not by job ids.
	wantJobs, gotJobs := allJobs(t, one), allJobs(t, pdb)
	wantHeads, gotHeads := heads(wantJobs), heads(gotJobs)
	if diff := cmp.Diff(byHead(want, wantHeads), byHead(got, gotHeads)); diff != "" {
		t.Errorf("answers: one by one on SQLite (-) and in one batch (+):\n%s", diff)
	}
	if diff := cmp.Diff(jobTable(wantJobs, wantHeads), jobTable(gotJobs, gotHeads)); diff != "" {
		t.Errorf("jobs: one by one on SQLite (-) and in one batch (+):\n%s", diff)
	}
	if n, err := pdb.CountDeliveries(ctx); err != nil || n != deliveries {
		t.Errorf("deliveries = %d, %v; want %d", n, err, deliveries)
	}
	if l := string(logged.Bytes()); strings.Contains(l, "group commit failed") {
		t.Errorf("the batch did not commit as one:\n%s", l)
	}
}

// newLocationOn is a fresh store's location on PostgreSQL or SQLite,
// whatever the test's name.
func newLocationOn(t *testing.T, postgres bool) string {
	t.Helper()
	if postgres {
		return pg.NewDatabase(t)
	}
	return t.TempDir() + "/gilf.db"
}

// allJobs lists every job of db.
func allJobs(t *testing.T, db *store.DB) []store.JobSummary {
	t.Helper()
	list, err := db.ListJobs(context.Background(), store.JobFilter{Limit: store.MaxListJobs})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// heads names each job by its pull request and head.
func heads(list []store.JobSummary) map[int64]string {
	m := make(map[int64]string, len(list))
	for _, j := range list {
		m[j.ID] = fmt.Sprintf("#%d@%s", j.PR, j.HeadSHA[len(j.HeadSHA)-2:])
	}
	return m
}

var jobRef = regexp.MustCompile(`\(job (\d+)\)`)

// byHead is res with each job id replaced by the head it names.
func byHead(res []validation.RecordResult, names map[int64]string) []string {
	var out []string
	for _, r := range res {
		name := names[r.JobID]
		r.JobID = 0
		out = append(out, fmt.Sprintf("%s %+v", name, r))
	}
	return out
}

// jobTable is every job, named by head, with the ids in its reason named
// by head too.
func jobTable(list []store.JobSummary, names map[int64]string) map[string]string {
	out := make(map[string]string, len(list))
	for _, j := range list {
		reason := jobRef.ReplaceAllStringFunc(j.Reason, func(m string) string {
			id, _ := strconv.ParseInt(jobRef.FindStringSubmatch(m)[1], 10, 64)
			return "(job " + names[id] + ")"
		})
		out[names[j.ID]] = fmt.Sprintf("%s triggers=%d reruns=%d attempts=%d %q", j.State, j.Triggers, j.Reruns, j.Attempts, reason)
	}
	return out
}

// TestPostgresQueryPlans: on a database whose one pull request has
// thousands of jobs (and others a few), intake's and the claims'
// statements read indexes, never the whole jobs table — under generic
// plans (what a prepared statement settles on) and custom ones; an index
// scan without an Index Cond
// reads the whole table too. A newer head's check once planned a
// sequential scan on PostgreSQL: EXISTS looks cheap when the planner
// expects an early hit, and the newest head, which has none, read every
// job.
func TestPostgresQueryPlans(t *testing.T) {
	db := openAt(t, pg.NewDatabase(t), store.Options{})
	const busy, others, each = 3000, 50, 5
	recordHeads(t, db, busy+others*each, func(n int) int {
		if n >= busy {
			return 2 + (n-busy)%others
		}
		return 1
	})
	plans, err := store.PostgresPlans(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	noTableReads(t, plans, "jobs")
}

// recordHeads records n new heads of repository o/r from 32 goroutines,
// the n-th (from 0, a millisecond newer than the one before) of pull
// request prOf(n).
func recordHeads(t *testing.T, db *store.DB, n int, prOf func(n int) int) {
	t.Helper()
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Go(func() {
			for k := w; k < n; k += 32 {
				j := spec(sha(k), now.Add(time.Duration(k)*time.Millisecond))
				j.Repo, j.PR = "o/r", prOf(k)
				d := delivery(fmt.Sprintf("d-%d", k), []byte(`{}`), now)
				d.Repo, d.PR, d.HeadSHA = j.Repo, j.PR, j.HeadSHA
				if _, err := db.RecordDelivery(context.Background(), d, j); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// noTableReads fails t for every plan that reads one of tables whole.
func noTableReads(t *testing.T, plans map[string]string, tables ...string) {
	t.Helper()
	if len(plans) == 0 {
		t.Fatal("no plans")
	}
	for name, plan := range plans {
		for _, table := range tables {
			for _, scan := range wholeReads(plan, table) {
				t.Errorf("%s reads the whole %s table (%s):\n%s", name, table, scan, plan)
			}
		}
	}
}

// scanNode is an EXPLAIN line of a scan of a table: its kind, the index it
// uses, the table.
var scanNode = regexp.MustCompile(`^(?:-> +)?(Seq Scan|Index Scan|Index Only Scan)(?: Backward)?(?: using (\S+))? on (\S+)`)

// wholeReads are the scans in plan (EXPLAIN's text) that read all of
// table: a sequential scan, or an index scan without an Index Cond (every
// entry of the index, filtered after).
func wholeReads(plan, table string) []string {
	lines := strings.Split(plan, "\n")
	var out []string
	for i, line := range lines {
		m := scanNode.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[3] != table {
			continue
		}
		if m[1] == "Seq Scan" {
			out = append(out, m[0])
			continue
		}
		bounded := false
		for _, detail := range lines[i+1:] { // the node's details, until the next node
			d := strings.TrimSpace(detail)
			if d == "" || strings.HasPrefix(d, "->") || strings.HasPrefix(d, "CTE ") ||
				strings.HasPrefix(d, "InitPlan") || strings.HasPrefix(d, "SubPlan") {
				break
			}
			bounded = bounded || strings.HasPrefix(d, "Index Cond:")
		}
		if !bounded {
			out = append(out, m[0])
		}
	}
	return out
}

// TestPostgresBadDeliveryFailsAlone: a delivery the database refuses
// inside a pipelined batch (a trigger here, a constraint in life) fails
// alone: the batch is rolled back and committed one by one, and every
// other delivery and job is stored.
func TestPostgresBadDeliveryFailsAlone(t *testing.T) {
	dsn := pg.NewDatabase(t)
	db := openAt(t, dsn, store.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN IF NEW.id = 'poison' THEN RAISE EXCEPTION 'poisoned delivery'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER poison BEFORE INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION poison()`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var dels []validation.Delivery
	var jobs []*validation.JobSpec
	for i, id := range []string{"a", "b", "poison", "c", "d"} {
		j := spec(sha(i), now.Add(time.Duration(i)*time.Second))
		j.PR = 1 + i%2 // two pull requests, so several rounds: the pipeline
		d := delivery(id, []byte(`{}`), now)
		d.PR, d.HeadSHA = j.PR, j.HeadSHA
		dels, jobs = append(dels, d), append(jobs, j)
	}
	_, errs, err := store.RecordBatch(ctx, db, dels, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if bad := dels[i].ID == "poison"; bad != (err != nil) || bad && !strings.Contains(err.Error(), "poisoned delivery") {
			t.Errorf("delivery %s: err = %v", dels[i].ID, err)
		}
	}
	if n, err := db.CountDeliveries(ctx); err != nil || n != 4 {
		t.Errorf("deliveries = %d, %v; want 4", n, err)
	}
	if list := allJobs(t, db); len(list) != 4 {
		t.Errorf("jobs = %d, want 4 (the poisoned delivery's job rolled back)", len(list))
	}
}
