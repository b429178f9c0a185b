package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// TestReopenedForADoneJobSaysSo: a reopened delivery for a head whose job
// is done attaches to it and queues nothing; the answer says so, with the
// job and its state, instead of "queued".
func TestReopenedForADoneJobSaysSo(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	opened := e.send(t, "pull_request", e.nextID(), realPayload(t, "pull_request", "opened"), nil)
	if opened.code != http.StatusAccepted || opened.body.Status != "queued" {
		t.Fatalf("opened: %d %+v", opened.code, opened.body)
	}
	ctx := context.Background()
	j, ok, err := e.db.Claim(ctx, "w", time.Minute)
	if err != nil || !ok || j.ID != opened.body.Job {
		t.Fatalf("claim: %+v %v %v", j, ok, err)
	}
	if _, err := e.db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}}); err != nil {
		t.Fatal(err)
	}
	got := e.send(t, "pull_request", e.nextID(), realPayload(t, "pull_request", "reopened"), nil)
	if got.code != http.StatusAccepted || got.body.Status != "recorded" || got.body.Job != j.ID || got.body.JobState != "done" ||
		!strings.Contains(got.body.Reason, "already done, so nothing was queued") {
		t.Fatalf("reopened for a done job: %d %+v; want 202 recorded saying the job is done", got.code, got.body)
	}
	if st := e.jobState(t, j.ID); st.State != store.StateDone {
		t.Errorf("job is %s, want still done", st.State)
	}
}

// TestRerunOfAStoreNamedCheckRun: a check run whose external_id names a
// store and a job (validation.MarkerID) re-runs that job; the store is
// handed on with the re-run for the inbox to check.
func TestRerunOfAStoreNamedCheckRun(t *testing.T) {
	e := newEnv(t, webhook.Config{AppID: gilfApp}, store.Options{})
	job := e.openJob(t, 2, validation.OutcomePassed)
	a := e.send(t, "check_run", e.nextID(), checkRun("rerequested", gilfApp, validation.MarkerID("0123456789abcdef", job, 0))(t), nil)
	if a.code != http.StatusAccepted || a.body.Status != "queued" || a.body.Job != job || a.body.Rerun != 1 {
		t.Fatalf("re-run of a store-named check run: %d %+v", a.code, a.body)
	}
	bad := e.send(t, "check_run", e.nextID(), checkRun("rerequested", gilfApp, "0123456789ABCDEF-1")(t), nil)
	if bad.body.Status != "ignored" || !strings.Contains(bad.body.Reason, "names no gilf job") {
		t.Errorf("a malformed store id: %d %+v, want ignored", bad.code, bad.body)
	}
}
