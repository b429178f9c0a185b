package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// segments lists the body log's segment files of the database at path.
func segments(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(path+".bodies", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recordAlone opens a handle, records one delivery in its own segment and
// closes it.
func recordAlone(t *testing.T, path string, c *clock, id string, at time.Time) {
	t.Helper()
	db, err := store.Open(context.Background(), path, testLogger(t), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	record(t, db, delivery(id, []byte(`{"id":"`+id+`"}`), at), nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPruneDeliveryBodiesAtTheCutoff(t *testing.T) {
	c := newClock()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gilf.db")
	cutoff := c.Now().Add(-30 * 24 * time.Hour)
	recordAlone(t, path, c, "old", cutoff.Add(-time.Millisecond))
	recordAlone(t, path, c, "at-cutoff", cutoff)
	recordAlone(t, path, c, "old-with-new", cutoff.Add(-time.Hour))
	// The last segment also holds a delivery after the cutoff.
	mixed, err := store.Open(ctx, path, testLogger(t), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	record(t, mixed, delivery("old-2", []byte(`{}`), cutoff.Add(-time.Hour)), nil)
	record(t, mixed, delivery("new", []byte(`{}`), c.Now()), nil)
	if err := mixed.Close(); err != nil {
		t.Fatal(err)
	}
	// A live handle (serve) whose segment holds only old deliveries.
	serve := openAt(t, path, store.Options{Now: c.Now})
	record(t, serve, delivery("old-live", []byte(`{"live":true}`), cutoff.Add(-time.Hour)), nil)
	ops := openAt(t, path, store.Options{Now: c.Now})
	before := len(segments(t, path))
	res, err := ops.Prune(ctx, cutoff)
	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	// Dropped: the segments of "old" and of "old-with-new". Kept: the
	// one of "at-cutoff", the one that also holds "new", and the live
	// ones of serve and of ops itself.
	if res.Segments != 2 || res.Bodies != 2 || res.LiveSegments != 2 || res.SegmentBytes <= 0 {
		t.Errorf("prune = %+v; want 2 segments and 2 bodies dropped, 2 live segments kept", res)
	}
	if got := len(segments(t, path)); got != before-2 {
		t.Errorf("%d segments left of %d; want 2 fewer", got, before)
	}
	for id, pruned := range map[string]bool{"old": true, "old-with-new": true, "at-cutoff": false,
		"old-2": false, "new": false, "old-live": false} {
		d, err := ops.Delivery(ctx, id)
		if err != nil {
			t.Errorf("delivery %s: %v", id, err)
			continue
		}
		if pruned != !d.BodyPrunedAt.IsZero() || pruned != (d.Body == nil) {
			t.Errorf("delivery %s: pruned at %v, body %q; want pruned %v", id, d.BodyPrunedAt, d.Body, pruned)
		}
		if pruned && !d.BodyPrunedAt.Equal(c.Now()) {
			t.Errorf("delivery %s pruned at %v; want %v", id, d.BodyPrunedAt, c.Now())
		}
	}
	if n, err := ops.CountDeliveries(ctx); err != nil || n != 6 {
		t.Errorf("deliveries = %d, %v; want all 6 rows kept", n, err)
	}

	// Again: nothing more to do while serve runs.
	if res, err := ops.Prune(ctx, cutoff); err != nil || res.Segments != 0 || res.Bodies != 0 {
		t.Errorf("second prune = %+v, %v; want nothing", res, err)
	}
	// GitHub redelivering a pruned delivery restores its body.
	if res := record(t, serve, delivery("old", []byte(`{"again":1}`), c.Now()), nil); !res.Duplicate {
		t.Errorf("redelivery = %+v; want a duplicate", res)
	}
	if d, err := ops.Delivery(ctx, "old"); err != nil || string(d.Body) != `{"again":1}` || !d.BodyPrunedAt.IsZero() {
		t.Errorf("redelivered delivery = %+v, %v", d, err)
	}
}

// A body kept in its row (from before the body log) is emptied too.
func TestPruneBodyInRow(t *testing.T) {
	c := newClock()
	db, path := openTest(t, c)
	cutoff := c.Now().Add(-time.Hour)
	raw := rawDB(t, path)
	for _, r := range []struct {
		id string
		at time.Time
	}{{"row-old", cutoff.Add(-time.Millisecond)}, {"row-at", cutoff}} {
		if _, err := raw.Exec(`INSERT INTO deliveries (id, event, received_at, status, body) VALUES (?, 'ping', ?, 'ignored', ?)`,
			r.id, r.at.UnixMilli(), []byte(`{"zen":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := db.Prune(context.Background(), cutoff)
	if err != nil || res.Bodies != 1 {
		t.Fatalf("prune = %+v, %v; want 1 body", res, err)
	}
	if d, err := db.Delivery(context.Background(), "row-old"); err != nil || d.Body != nil || d.BodyPrunedAt.IsZero() {
		t.Errorf("row-old = %+v, %v; want pruned", d, err)
	}
	if d, err := db.Delivery(context.Background(), "row-at"); err != nil || string(d.Body) != `{"zen":"x"}` {
		t.Errorf("row-at = %+v, %v; want kept", d, err)
	}
}

func TestPruneRunOutput(t *testing.T) {
	c := newClock()
	db, path := openTest(t, c)
	ctx := context.Background()
	cutoff := c.Now().Add(-time.Hour)
	usd := 0.01
	run := func(pr int, finished time.Time) int64 {
		t.Helper()
		sp := spec(sha(pr), c.Now())
		sp.PR = pr
		id := record(t, db, delivery("d"+sha(pr)[36:], []byte(`{}`), c.Now()), sp).JobID
		j, ok := claim(t, db, "w", time.Minute)
		if !ok || j.ID != id {
			t.Fatalf("claim = %+v %v", j, ok)
		}
		rec := validation.Record{Outcome: validation.OutcomeFailed, Started: finished.Add(-time.Minute), Finished: finished,
			Steps: []validation.StepResult{{Name: "test", Status: validation.StatusFailed,
				Output: validation.Output{Head: "HEAD-OUTPUT", Tail: "TAIL-OUTPUT", Bytes: 9000, Truncated: true}}},
			Findings: []validation.Finding{{Severity: validation.SeverityHigh, Title: "test failed", Body: "kept"}}}
		if _, err := db.Finish(ctx, j.Lease, store.RunRecord{Record: rec,
			Spans:  []store.CostSpan{{Lane: store.LanePrimary, Executor: "local", Started: rec.Started, Finished: finished, USD: &usd}},
			Shadow: &store.ShadowTelemetry{Executor: "managed-e2b", Record: &rec}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	old := run(10, cutoff.Add(-time.Millisecond))
	at := run(11, cutoff)
	res, err := db.Prune(ctx, cutoff)
	if err != nil || res.Runs != 1 {
		t.Fatalf("prune = %+v, %v; want 1 run", res, err)
	}
	raw := rawDB(t, path)
	for job, stripped := range map[int64]bool{old: true, at: false} {
		var record, detail string
		var findings, spans, steps int
		if err := raw.QueryRow(`SELECT r.record, s.detail,
			(SELECT COUNT(*) FROM findings f WHERE f.run_id = r.id AND f.body = 'kept'),
			(SELECT COUNT(*) FROM cost_spans c WHERE c.run_id = r.id AND c.usd = 0.01),
			(SELECT COUNT(*) FROM steps st WHERE st.run_id = r.id AND st.output_bytes = 9000)
			FROM runs r JOIN shadow_telemetry s ON s.run_id = r.id WHERE r.job_id = ?`, job).Scan(&record, &detail, &findings, &spans, &steps); err != nil {
			t.Fatal(err)
		}
		for what, doc := range map[string]string{"record": record, "shadow detail": detail} {
			has := strings.Contains(doc, "HEAD-OUTPUT") || strings.Contains(doc, "TAIL-OUTPUT")
			if has == stripped {
				t.Errorf("job %d %s holds step output: %v, want %v:\n%s", job, what, has, !stripped, doc)
			}
			if !strings.Contains(doc, `"outputBytes":9000`) || !strings.Contains(doc, `"test failed"`) {
				t.Errorf("job %d %s lost more than the output:\n%s", job, what, doc)
			}
		}
		if findings != 1 || spans != 1 || steps != 1 {
			t.Errorf("job %d: findings %d, cost spans %d, steps %d; want 1 each kept", job, findings, spans, steps)
		}
	}
	if res, err := db.Prune(ctx, cutoff); err != nil || res.Runs != 0 {
		t.Errorf("second prune = %+v, %v; want nothing", res, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// A live handle rotates its segment out once it is full, so retention
// drops its old bodies while it keeps running.
func TestPruneRotatedSegmentsOfALiveHandle(t *testing.T) {
	c := newClock()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gilf.db")
	// Each segment holds one body: the next one rotates it out.
	serve := openAt(t, path, store.Options{Now: c.Now, BodySegmentMaxBytes: 1})
	cutoff := c.Now().Add(-24 * time.Hour)
	for i, at := range []time.Time{cutoff.Add(-2 * time.Hour), cutoff.Add(-time.Hour), c.Now()} {
		record(t, serve, delivery(fmt.Sprintf("d%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), at), nil)
	}
	if n := len(segments(t, path)); n != 3 {
		t.Fatalf("%d segments; want 3, one per body", n)
	}
	for i := range 3 {
		if d, err := serve.Delivery(ctx, fmt.Sprintf("d%d", i)); err != nil || string(d.Body) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("d%d = %+v, %v", i, d, err)
		}
	}
	// A rotated-out segment is closed once the batch after the one that
	// rotated it is written: d3's answer means d1's segment is closed.
	record(t, serve, delivery("d3", []byte(`{"n":3}`), c.Now()), nil)
	res, err := serve.Prune(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 2 || res.Bodies != 2 || res.LiveSegments < 1 {
		t.Errorf("prune = %+v; want the two old rotated segments dropped, the current one kept", res)
	}
	for i, pruned := range []bool{true, true, false, false} {
		d, err := serve.Delivery(ctx, fmt.Sprintf("d%d", i))
		if err != nil || pruned != !d.BodyPrunedAt.IsZero() {
			t.Errorf("d%d = %+v, %v; want pruned %v", i, d, err, pruned)
		}
	}
}
