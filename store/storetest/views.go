package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/google/go-cmp/cmp"
)

// finishRun records a delivery for repo's pull request pr at head, claims
// its job and finishes it with run.
func finishRun(t *testing.T, db *store.DB, c *Clock, id, repo string, pr int, head string, run store.RunRecord) (int64, int64) {
	t.Helper()
	d := Delivery(id, []byte(`{}`), c.Now())
	d.Repo, d.PR, d.HeadSHA = repo, pr, head
	j := Spec(head, c.Now())
	j.Repo, j.PR, j.HeadRepo = repo, pr, repo
	r := Record(t, db, d, j)
	job, ok := Claim(t, db, "w", time.Minute)
	if !ok || job.ID != r.JobID {
		t.Fatalf("claim: %v %d, want job %d", ok, job.ID, r.JobID)
	}
	runID, err := db.Finish(context.Background(), job.Lease, run)
	if err != nil {
		t.Fatal(err)
	}
	return r.JobID, runID
}

func testDashboardViews(t *testing.T, e Engine) {
	c := NewClock()
	db := e.OpenAt(t, e.NewLocation(t),
		store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }, MaxAttempts: 1})
	ctx := context.Background()
	start := c.Now()
	failed := store.RunRecord{
		Record: validation.Record{Outcome: validation.OutcomeFailed, Executor: "managed-e2b", IsolationTier: validation.TierRemote,
			Steps: []validation.StepResult{
				{Name: "install", Status: validation.StatusPassed, ExitCode: Ptr(0), DurationMs: 900},
				{Name: "test", Status: validation.StatusFailed, ExitCode: Ptr(1), DurationMs: 1200},
			},
			Findings: []validation.Finding{{Severity: validation.SeverityHigh, Step: "test", Title: "test failed"}},
			Started:  start, Finished: start.Add(3 * time.Second)},
		Artifacts: []store.Artifact{{Key: "ev/1/out.txt", Kind: "test-output", Bytes: 4, Status: store.ArtifactPersisted, URL: "https://ev.example/1"}},
		Spans: []store.CostSpan{
			{Lane: store.LanePrimary, Executor: "managed-e2b", Started: start, Finished: start.Add(3 * time.Second), USD: Ptr(0.25)},
			{Lane: store.LaneShadow, Executor: "self-host", Started: start, Finished: start.Add(5 * time.Second)},
		},
		Shadow: &store.ShadowTelemetry{Executor: "self-host", Outcome: validation.OutcomeFailed, Wall: 5 * time.Second,
			Steps: []store.StepAgreement{{Step: "test", Primary: validation.StatusFailed, Shadow: validation.StatusFailed, Agree: true},
				{Step: "install", Primary: validation.StatusPassed, Shadow: validation.StatusFailed}}},
	}
	job1, run1 := finishRun(t, db, c, "d1", "o/a", 1, SHA(1), failed)
	c.Advance(time.Hour)
	refused := store.RunRecord{Record: validation.Record{Outcome: validation.OutcomeRefused, Executor: "local",
		Refusal: &validation.Refusal{Code: validation.CodeLocalNotAllowed, Msg: "no"}, Started: c.Now(), Finished: c.Now()}}
	_, run2 := finishRun(t, db, c, "d2", "o/b", 2, SHA(2), refused)
	c.Advance(time.Hour)
	_, run3 := finishRun(t, db, c, "d3", "o/b", 3, SHA(3), refused)

	t.Run("list", func(t *testing.T) {
		page, err := db.RunList(ctx, store.RunQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
		}
		if diff := cmp.Diff([]int64{run3, run2, run1}, ids); diff != "" || page.Next != 0 {
			t.Fatalf("ids (-want +got):\n%s next %d", diff, page.Next)
		}
		got := page.Runs[2]
		want := store.RunSummary{ID: run1, JobID: job1, Repo: "o/a", PR: 1, HeadSHA: SHA(1), Outcome: validation.OutcomeFailed,
			Executor: "managed-e2b", Tier: validation.TierRemote, Started: start, Finished: start.Add(3 * time.Second), Findings: 1, USD: Ptr(0.25)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("summary (-want +got):\n%s", diff)
		}
		if page.Runs[0].USD != nil || page.Runs[0].Refusal != validation.CodeLocalNotAllowed {
			t.Fatalf("refused run: usd %v refusal %q", page.Runs[0].USD, page.Runs[0].Refusal)
		}
		for name, tc := range map[string]struct {
			q    store.RunQuery
			want []int64
		}{
			"repo":     {store.RunQuery{Repo: "o/b"}, []int64{run3, run2}},
			"outcome":  {store.RunQuery{Outcome: validation.OutcomeFailed}, []int64{run1}},
			"executor": {store.RunQuery{Executor: "local"}, []int64{run3, run2}},
			"from":     {store.RunQuery{From: start.Add(30 * time.Minute)}, []int64{run3, run2}},
			"to":       {store.RunQuery{To: start.Add(30 * time.Minute)}, []int64{run1}},
			"before":   {store.RunQuery{Before: run3}, []int64{run2, run1}},
			"none":     {store.RunQuery{Repo: "o/<script>"}, nil},
		} {
			page, err := db.RunList(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, r := range page.Runs {
				ids = append(ids, r.ID)
			}
			if diff := cmp.Diff(tc.want, ids); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		}
		page, err = db.RunList(ctx, store.RunQuery{Limit: 2})
		if err != nil || len(page.Runs) != 2 || page.Next != run2 {
			t.Fatalf("page of 2: %v, %d runs, next %d", err, len(page.Runs), page.Next)
		}
		page, err = db.RunList(ctx, store.RunQuery{Limit: 2, Before: page.Next})
		if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != run1 || page.Next != 0 {
			t.Fatalf("second page: %v %+v", err, page)
		}
	})

	t.Run("view", func(t *testing.T) {
		v, err := db.RunView(ctx, run1)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Record.Steps) != 2 || v.Record.Steps[1].ExitCode == nil || *v.Record.Steps[1].ExitCode != 1 {
			t.Fatalf("record steps: %+v", v.Record.Steps)
		}
		if diff := cmp.Diff([]store.ArtifactView{{Key: "ev/1/out.txt", Kind: "test-output", Bytes: 4, Status: "persisted",
			URL: "https://ev.example/1"}}, v.Artifacts); diff != "" {
			t.Fatalf("artifacts (-want +got):\n%s", diff)
		}
		want := &store.ShadowView{Executor: "self-host", Outcome: validation.OutcomeFailed, StepsAgreed: 1, StepsTotal: 2,
			Wall: 5 * time.Second, Steps: []store.ShadowStep{
				{Step: "test", Primary: validation.StatusFailed, Shadow: validation.StatusFailed, Agree: true},
				{Step: "install", Primary: validation.StatusPassed, Shadow: validation.StatusFailed}}}
		if diff := cmp.Diff(want, v.Shadow); diff != "" {
			t.Fatalf("shadow (-want +got):\n%s", diff)
		}
		v, err = db.RunView(ctx, run2)
		if err != nil || v.Shadow != nil || len(v.Artifacts) != 0 {
			t.Fatalf("refused run: %v %+v", err, v)
		}
		if _, err := db.RunView(ctx, 999); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing run: %v", err)
		}
	})

	t.Run("stats", func(t *testing.T) {
		refusals, err := db.RefusalCounts(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]store.RefusalCount{{Code: validation.CodeLocalNotAllowed, Runs: 2, Last: start.Add(time.Hour)}}, refusals); diff != "" {
			t.Fatalf("refusals (-want +got):\n%s", diff)
		}
		pairs, err := db.ShadowPairs(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]store.ShadowPair{{Primary: "managed-e2b", Shadow: "self-host", Runs: 1, OutcomesAgreed: 1,
			StepsAgreed: 1, StepsTotal: 2}}, pairs); diff != "" {
			t.Fatalf("shadow pairs (-want +got):\n%s", diff)
		}
		days, err := db.CostsByDay(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]store.CostDay{
			{Day: "2026-03-01", Executor: "managed-e2b", Lane: "primary", Spans: 1, Priced: 1, USD: Ptr(0.25), Seconds: 3},
			{Day: "2026-03-01", Executor: "self-host", Lane: "shadow", Spans: 1, Seconds: 5},
		}, days); diff != "" {
			t.Fatalf("cost days (-want +got):\n%s", diff)
		}
	})

	t.Run("queue", func(t *testing.T) {
		// A job that ends dead (MaxAttempts 1) and one left queued.
		d := Delivery("d4", []byte(`{}`), c.Now())
		d.Repo, d.PR, d.HeadSHA = "o/c", 4, SHA(4)
		j := Spec(SHA(4), c.Now())
		j.Repo, j.PR = "o/c", 4
		dead := Record(t, db, d, j)
		job, _ := Claim(t, db, "w", time.Minute)
		if _, err := db.Retry(ctx, job.Lease, store.Failure{Err: fmt.Errorf("sandbox api: 503"), Transient: true}); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Minute)
		d = Delivery("d5", []byte(`{}`), c.Now())
		d.Repo, d.PR, d.HeadSHA = "o/c", 5, SHA(5)
		j = Spec(SHA(5), c.Now())
		j.Repo, j.PR = "o/c", 5
		queued := Record(t, db, d, j)

		jobs, err := db.JobList(ctx, store.JobQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 2 || jobs[0].ID != queued.JobID || jobs[0].State != "queued" || jobs[1].ID != dead.JobID ||
			jobs[1].State != "dead" || jobs[1].LastError != "sandbox api: 503 (attempt 1 of 1)" {
			t.Fatalf("jobs: %+v", jobs)
		}
		done, err := db.JobList(ctx, store.JobQuery{States: []string{"done"}, Limit: 1})
		if err != nil || len(done) != 1 || done[0].State != "done" {
			t.Fatalf("done jobs: %v %+v", err, done)
		}

		state, ok, err := db.RerunJob(ctx, dead.JobID, "")
		if err != nil || !ok || state != "queued" {
			t.Fatalf("re-run dead job: %q %v %v", state, ok, err)
		}
		st, err := db.JobState(ctx, dead.JobID)
		if err != nil || st.Reruns != 1 || st.Attempts != 0 || st.Reason != store.DefaultRerunReason {
			t.Fatalf("re-run job: %v %+v", err, st)
		}
		state, ok, err = db.RerunJob(ctx, queued.JobID, "")
		if err != nil || ok || state != "queued" {
			t.Fatalf("re-run queued job: %q %v %v", state, ok, err)
		}
		if _, _, err := db.RerunJob(ctx, 999, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("re-run missing job: %v", err)
		}
	})
}
