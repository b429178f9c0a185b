package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// recordAlone opens a handle, records one delivery and closes it.
func recordAlone(t *testing.T, path string, c *clock, id string, at time.Time) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, testLogger(t), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	record(t, db, delivery(id, []byte(`{"id":"`+id+`"}`), at), nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPruneDeliveryBodiesAtTheCutoff: bodies received before the cutoff
// are pruned, while another handle (serve) keeps the store open; one
// received exactly at it is kept; every row stays; GitHub redelivering a
// pruned delivery restores its body.
func TestPruneDeliveryBodiesAtTheCutoff(t *testing.T) {
	c := newClock()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gilf.db")
	cutoff := c.Now().Add(-30 * 24 * time.Hour)
	recordAlone(t, path, c, "old", cutoff.Add(-time.Millisecond))
	recordAlone(t, path, c, "at-cutoff", cutoff)
	serve := openAt(t, path, store.Options{Now: c.Now})
	record(t, serve, delivery("old-live", []byte(`{"live":true}`), cutoff.Add(-time.Hour)), nil)
	record(t, serve, delivery("new", []byte(`{}`), c.Now()), nil)
	ops := openAt(t, path, store.Options{Now: c.Now})
	res, err := ops.Prune(ctx, cutoff)
	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	if res.Bodies != 2 || !res.Before.Equal(cutoff.UTC()) {
		t.Errorf("prune = %+v; want 2 bodies dropped before %v", res, cutoff)
	}
	for id, pruned := range map[string]bool{"old": true, "old-live": true, "at-cutoff": false, "new": false} {
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
	if n, err := ops.CountDeliveries(ctx); err != nil || n != 4 {
		t.Errorf("deliveries = %d, %v; want all 4 rows kept", n, err)
	}
	var stored int
	if err := rawDB(t, path).QueryRow(`SELECT COALESCE(SUM(length(body)), 0) FROM deliveries WHERE body_pruned_at IS NOT NULL`).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("pruned rows still hold %d body bytes, %v", stored, err)
	}
	// Again: nothing more to do.
	if res, err := ops.Prune(ctx, cutoff); err != nil || res.Bodies != 0 {
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
