package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/storetest"
	"github.com/gilf-review/gilf/validation"
	"github.com/google/go-cmp/cmp"
)

func TestFinishRecordsEverything(t *testing.T) {
	c := newClock()
	db, path := openTest(t, c)
	ctx := context.Background()
	r := record(t, db, delivery("d1", []byte(`{}`), c.Now()), spec(sha(1), c.Now()))
	j, _ := claim(t, db, "w", time.Minute)
	start := c.Now()
	exit1 := 1
	rec := validation.Record{
		Outcome: validation.OutcomeFailed, Executor: "managed-e2b", IsolationTier: validation.TierRemote,
		Steps: []validation.StepResult{
			{Name: "install", Status: validation.StatusPassed, ExitCode: storetest.Ptr(0), DurationMs: 900},
			{Name: "test", Status: validation.StatusFailed, ExitCode: &exit1, DurationMs: 1200,
				Output: validation.Output{Head: "FAIL", Bytes: 4, SHA256: "ab", Redactions: 1}},
			{Name: "lint", Status: validation.StatusNotRun, Reason: "install failed"},
		},
		Findings: []validation.Finding{{Severity: validation.SeverityHigh, Step: "test", Title: "test failed", Body: "FAIL", ExecutionClaim: true}},
		Started:  start, Finished: start.Add(3 * time.Second),
	}
	run := store.RunRecord{
		Record: rec,
		Artifacts: []store.Artifact{
			{Key: "review-artifacts/o%2Fr/abc/evidence/1/test-output/out.txt", Kind: "test-output", Bytes: 4, SHA256: "ab", Status: store.ArtifactPersisted},
			{Key: "review-artifacts/o%2Fr/abc/evidence/1/log/log.txt", Kind: "log", Bytes: 9, Status: store.ArtifactFailed, Err: "s3: 503 SlowDown"},
		},
		Spans: []store.CostSpan{
			{Lane: store.LanePrimary, Executor: "managed-e2b", Started: start, Finished: start.Add(3 * time.Second), VCPU: storetest.Ptr(2.0), MemoryGiB: storetest.Ptr(4.0), USD: storetest.Ptr(0.25), Method: "estimate:wall-clock"},
			{Lane: store.LaneShadow, Executor: "self-host", Started: start, Finished: start.Add(5 * time.Second), Method: "estimate:wall-clock"},
			{Lane: store.LaneSemantic, Executor: "model:gpt-4.1-mini", Started: start.Add(3 * time.Second), Finished: start.Add(5 * time.Second),
				InputTokens: storetest.Ptr(int64(1234)), OutputTokens: storetest.Ptr(int64(567)), USD: storetest.Ptr(0.5), Method: "estimate:tokens"},
		},
		Shadow: &store.ShadowTelemetry{Executor: "self-host", Outcome: validation.OutcomeFailed, Wall: 5 * time.Second,
			Steps: []store.StepAgreement{{Step: "test", Primary: validation.StatusFailed, Shadow: validation.StatusFailed, Agree: true}, {Step: "lint", Primary: validation.StatusNotRun, Shadow: validation.StatusPassed}}},
	}
	runID, err := db.Finish(ctx, j.Lease, run)
	if err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := raw.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	for q, want := range map[string]int{
		`SELECT COUNT(*) FROM steps WHERE run_id = ?`:                                                      3,
		`SELECT COUNT(*) FROM steps WHERE run_id = ? AND exit_code IS NULL`:                                1,
		`SELECT COUNT(*) FROM findings WHERE run_id = ? AND execution_claim = 1`:                           1,
		`SELECT COUNT(*) FROM artifacts WHERE run_id = ? AND status = 'persisted'`:                         1,
		`SELECT COUNT(*) FROM artifacts WHERE run_id = ? AND error = 's3: 503 SlowDown'`:                   1,
		`SELECT COUNT(*) FROM cost_spans WHERE run_id = ? AND usd IS NULL`:                                 1,
		`SELECT COUNT(*) FROM cost_spans WHERE run_id = ? AND input_tokens IS NULL AND lane <> 'semantic'`: 2,
		`SELECT COUNT(*) FROM cost_spans WHERE run_id = ? AND lane = 'semantic' AND executor = 'model:gpt-4.1-mini'
			AND input_tokens = 1234 AND output_tokens = 567 AND usd = 0.5 AND method = 'estimate:tokens'`: 1,
		`SELECT COUNT(*) FROM shadow_telemetry WHERE run_id = ? AND steps_agreed = 1 AND steps_total = 2`: 1,
	} {
		if got := count(q, runID); got != want {
			t.Errorf("%s = %d, want %d", q, got, want)
		}
	}
	var stored string
	if err := raw.QueryRow(`SELECT record FROM runs WHERE id = ? AND job_id = ? AND lease_gen = ?`, runID, r.JobID, j.Lease.Gen).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var back validation.Record
	if err := json.Unmarshal([]byte(stored), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, back, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Fatalf("stored record (-want +got):\n%s", diff)
	}
	if st := state(t, db, r.JobID); st.State != store.StateDone {
		t.Fatalf("job: %s", st.State)
	}

	// Costs: the null span adds nothing and is counted as unpriced; the
	// model's span is its own, never the executor's (the e2b budget).
	spend, err := db.SpendSince(ctx, "managed-e2b", start)
	if err != nil || spend != 0.25 {
		t.Fatalf("SpendSince = %v, %v; want 0.25", spend, err)
	}
	if spend, err := db.SpendSince(ctx, "model:gpt-4.1-mini", start); err != nil || spend != 0.5 {
		t.Fatalf("SpendSince of the model = %v, %v; want 0.5", spend, err)
	}
	if spend, err := db.SpendSince(ctx, "managed-e2b", start.Add(time.Millisecond)); err != nil || spend != 0 {
		t.Fatalf("SpendSince after the span = %v, %v; want 0", spend, err)
	}
	days, err := db.CostsByDay(ctx, start.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []store.CostDay{
		{Day: "2026-03-01", Executor: "managed-e2b", Lane: store.LanePrimary, Spans: 1, Priced: 1, USD: storetest.Ptr(0.25), Seconds: 3},
		{Day: "2026-03-01", Executor: "model:gpt-4.1-mini", Lane: store.LaneSemantic, Spans: 1, Priced: 1, USD: storetest.Ptr(0.5), Seconds: 2,
			InputTokens: 1234, OutputTokens: 567},
		{Day: "2026-03-01", Executor: "self-host", Lane: store.LaneShadow, Spans: 1, Priced: 0, USD: nil, Seconds: 5},
	}
	if diff := cmp.Diff(want, days); diff != "" {
		t.Fatalf("CostsByDay (-want +got):\n%s", diff)
	}
}
