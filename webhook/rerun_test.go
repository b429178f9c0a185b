package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// The head, repository and installation of the real pull_request payloads.
const (
	realHead = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	realRepo = "Codertocat/Hello-World"
)

// gilfApp is the App id the tests configure as gilf's own.
const gilfApp = 29310

// openJob queues a job for PR number at the real head through the handler
// and runs it to done with the given outcome.
func (e *env) openJob(t *testing.T, number int, outcome validation.Outcome) int64 {
	t.Helper()
	body := derive(t, "pull_request", "opened", func(m map[string]any) {
		m["number"] = number
		pr(m)["number"] = number
	})
	a := e.send(t, "pull_request", e.nextID(), body, nil)
	if a.code != http.StatusAccepted || a.body.Job == 0 {
		t.Fatalf("opened: %d %+v", a.code, a.body)
	}
	e.finish(t, a.body.Job, 0, outcome)
	return a.body.Job
}

// finish claims the next job, which must be id at re-run rerun, and ends
// it done with a run of outcome.
func (e *env) finish(t *testing.T, id int64, rerun int, outcome validation.Outcome) {
	t.Helper()
	ctx := context.Background()
	j, ok, err := e.db.Claim(ctx, "w", time.Minute)
	if err != nil || !ok || j.ID != id || j.Rerun != rerun {
		t.Fatalf("claim = %+v, %v, %v; want job %d at re-run %d", j, ok, err, id, rerun)
	}
	if _, err := e.db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: outcome}}); err != nil {
		t.Fatal(err)
	}
}

// checkRun is the real check_run payload of action, made a check run of
// app for externalID at the real head and repository.
func checkRun(action string, app int64, externalID string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		return derive(t, "check_run", "rerequested", func(m map[string]any) {
			m["action"] = action
			cr := m["check_run"].(map[string]any)
			cr["external_id"], cr["head_sha"] = externalID, realHead
			cr["app"].(map[string]any)["id"] = app
			m["repository"].(map[string]any)["full_name"] = realRepo
		})
	}
}

// TestRerunTable: which check_run and check_suite deliveries re-run a job,
// which are ignored, and which are refused (they are all recorded).
func TestRerunTable(t *testing.T) {
	type want struct {
		code   int
		status validation.DeliveryStatus
		rerun  bool
		reason string // substring
	}
	rerun := func(reason string) want { return want{202, validation.DeliveryQueued, true, reason} }
	ignored := func(reason string) want { return want{202, validation.DeliveryIgnored, false, reason} }
	refused := func(reason string) want { return want{400, validation.DeliveryInvalid, false, reason} }
	ours := func(id int64) string { return validation.PublicationID(id, 0) }
	tests := []struct {
		name  string
		event string
		app   int64 // Config.AppID
		body  func(t *testing.T, job int64) []byte
		want  want
	}{
		{"check run of ours", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return checkRun("rerequested", gilfApp, ours(job))(t)
		}, rerun("re-run of job")},
		{"check run of an earlier re-run of ours", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return checkRun("rerequested", gilfApp, validation.PublicationID(job, 3))(t)
		}, rerun("re-run of job")},
		{"check run of ours without installation", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return deriveBytes(t, checkRun("rerequested", gilfApp, ours(job))(t), func(m map[string]any) { delete(m, "installation") })
		}, rerun("re-run of job")},
		{"check run of another App", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return checkRun("rerequested", 2, ours(job))(t)
		}, ignored("another App (app id 2)")},
		{"App id not configured", "check_run", 0, func(t *testing.T, job int64) []byte {
			return checkRun("rerequested", gilfApp, ours(job))(t)
		}, ignored("App id is not configured")},
		{"real check run of another App", "check_run", gilfApp, func(t *testing.T, _ int64) []byte {
			return realPayload(t, "check_run", "rerequested")
		}, ignored("another App")},
		{"real check run with organization", "check_run", 2, func(t *testing.T, _ int64) []byte {
			return realPayload(t, "check_run", "rerequested.with-organization") // external_id ""
		}, ignored("names no gilf job")},
		{"external id not ours", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return checkRun("rerequested", gilfApp, "ci-"+ours(job))(t)
		}, ignored("names no gilf job")},
		{"requested_action", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return checkRun("requested_action", gilfApp, ours(job))(t)
		}, ignored(`check_run action "requested_action" is not acted on`)},
		{"real requested_action", "check_run", 25811, func(t *testing.T, _ int64) []byte {
			return realPayload(t, "check_run", "requested_action")
		}, ignored("not acted on")},
		{"real created", "check_run", gilfApp, func(t *testing.T, _ int64) []byte { return realPayload(t, "check_run", "created") },
			ignored("not acted on")},
		{"real completed", "check_run", gilfApp, func(t *testing.T, _ int64) []byte { return realPayload(t, "check_run", "completed") },
			ignored("not acted on")},
		{"malformed head sha", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return deriveBytes(t, checkRun("rerequested", gilfApp, ours(job))(t), func(m map[string]any) {
				m["check_run"].(map[string]any)["head_sha"] = "HEAD; rm -rf /"
			})
		}, refused("head sha")},
		{"malformed repository", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return deriveBytes(t, checkRun("rerequested", gilfApp, ours(job))(t), func(m map[string]any) {
				m["repository"].(map[string]any)["full_name"] = "../../etc"
			})
		}, refused("full_name")},
		{"check run missing", "check_run", gilfApp, func(t *testing.T, _ int64) []byte {
			return []byte(`{"action":"rerequested","repository":{"full_name":"o/r"}}`)
		}, refused("check_run object missing")},
		{"check run not JSON", "check_run", gilfApp, func(t *testing.T, _ int64) []byte { return []byte(`{"action":"rerequested",`) },
			refused("payload")},
		{"check run app of the wrong type", "check_run", gilfApp, func(t *testing.T, job int64) []byte {
			return deriveBytes(t, checkRun("rerequested", gilfApp, ours(job))(t), func(m map[string]any) { m["check_run"].(map[string]any)["app"] = "gilf" })
		}, refused("payload")},
		{"check suite of ours", "check_suite", gilfApp, func(t *testing.T, _ int64) []byte {
			return realPayload(t, "check_suite", "rerequested") // app 29310, head ec26…, PR 2
		}, rerun("re-run of head " + realHead)},
		{"check suite of another App", "check_suite", 2, func(t *testing.T, _ int64) []byte {
			return realPayload(t, "check_suite", "rerequested")
		}, ignored("another App (app id 29310)")},
		{"check suite with a malformed head", "check_suite", gilfApp, func(t *testing.T, _ int64) []byte {
			return derive(t, "check_suite", "rerequested", func(m map[string]any) { m["check_suite"].(map[string]any)["head_sha"] = "main" })
		}, refused("head sha")},
		{"check suite requested", "check_suite", gilfApp, func(t *testing.T, _ int64) []byte {
			return derive(t, "check_suite", "rerequested", func(m map[string]any) { m["action"] = "requested" })
		}, ignored(`check_suite action "requested" is not acted on`)},
		{"real check suite completed", "check_suite", gilfApp, func(t *testing.T, _ int64) []byte {
			return realPayload(t, "check_suite", "completed")
		}, ignored("not acted on")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, webhook.Config{AppID: tt.app}, store.Options{})
			job := e.openJob(t, 2, validation.OutcomePassed)
			body := tt.body(t, job)
			id := e.nextID()
			a := e.send(t, tt.event, id, body, nil)
			if a.code != tt.want.code {
				t.Fatalf("answer %d %+v, want %d", a.code, a.body, tt.want.code)
			}
			d, err := e.db.Delivery(context.Background(), id)
			if err != nil {
				t.Fatalf("delivery not recorded: %v", err)
			}
			if d.Status != tt.want.status || !strings.Contains(d.Reason, tt.want.reason) {
				t.Fatalf("recorded %q %q, want %q with %q", d.Status, d.Reason, tt.want.status, tt.want.reason)
			}
			st := e.jobState(t, job)
			if !tt.want.rerun {
				if st.State != store.StateDone || st.Reruns != 0 {
					t.Fatalf("job after an ignored delivery: %+v", st)
				}
				return
			}
			if a.body.Status != "queued" || a.body.Job != job || a.body.JobState != "queued" || a.body.Rerun != 1 {
				t.Fatalf("answer %+v, want job %d queued again", a.body, job)
			}
			if st.State != store.StateQueued || st.Reruns != 1 || st.Reason != store.DefaultRerunReason {
				t.Fatalf("job after the re-run: %+v", st)
			}
			e.finish(t, job, 1, validation.OutcomePassed)
			// The redelivery does nothing twice.
			again := e.send(t, tt.event, id, body, nil)
			if again.code != http.StatusOK || again.body.Status != "duplicate" {
				t.Fatalf("redelivery: %d %+v", again.code, again.body)
			}
			if st := e.jobState(t, job); st.State != store.StateDone || st.Reruns != 1 {
				t.Fatalf("job after the redelivery: %+v", st)
			}
		})
	}
}

// TestRerunScope: a check run names a job of its own repository only; a
// check suite re-runs the newest job of every pull request at its head.
func TestRerunScope(t *testing.T) {
	e := newEnv(t, webhook.Config{AppID: gilfApp}, store.Options{})
	pr2 := e.openJob(t, 2, validation.OutcomePassed)
	pr3 := e.openJob(t, 3, validation.OutcomeFailed)
	// A check run of another repository naming our job: nothing.
	other := deriveBytes(t, checkRun("rerequested", gilfApp, validation.PublicationID(pr2, 0))(t), func(m map[string]any) {
		m["repository"].(map[string]any)["full_name"] = "someone/else"
	})
	a := e.send(t, "check_run", e.nextID(), other, nil)
	if a.code != http.StatusAccepted || a.body.Job != 0 || a.body.Rerun != 0 {
		t.Fatalf("foreign repository: %d %+v", a.code, a.body)
	}
	// The check suite of the head: both pull requests run again.
	a = e.send(t, "check_suite", e.nextID(), realPayload(t, "check_suite", "rerequested"), nil)
	if a.code != http.StatusAccepted || a.body.Rerun != 2 || a.body.Job != min(pr2, pr3) || a.body.JobState != "queued" {
		t.Fatalf("check suite: %d %+v, want 2 jobs re-run", a.code, a.body)
	}
	for _, id := range []int64{pr2, pr3} {
		if st := e.jobState(t, id); st.State != store.StateQueued || st.Reruns != 1 {
			t.Fatalf("job %d: %+v", id, st)
		}
	}
	// While they wait, the Re-run of one check run changes nothing.
	a = e.send(t, "check_run", e.nextID(), checkRun("rerequested", gilfApp, validation.PublicationID(pr2, 1))(t), nil)
	if a.code != http.StatusAccepted || a.body.Job != pr2 || a.body.JobState != "queued" || a.body.Rerun != 0 {
		t.Fatalf("re-run of a queued job: %d %+v", a.code, a.body)
	}
	// A newer head of PR 2: its old head's job is not revived.
	e.finish(t, pr2, 1, validation.OutcomePassed)
	newer := derive(t, "pull_request", "synchronize", withHead(fmt.Sprintf("%040x", 5), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	if a := e.send(t, "pull_request", e.nextID(), newer, nil); a.code != http.StatusAccepted {
		t.Fatalf("synchronize: %d %+v", a.code, a.body)
	}
	a = e.send(t, "check_run", e.nextID(), checkRun("rerequested", gilfApp, validation.PublicationID(pr2, 1))(t), nil)
	if a.code != http.StatusAccepted || a.body.Rerun != 0 || a.body.JobState != "done" {
		t.Fatalf("re-run of an older head: %d %+v", a.code, a.body)
	}
}

// TestLabelsReevaluateSkippedRun: labeled after a skipped run runs the job
// again as a re-run; after a run that was not skipped it only attaches.
func TestLabelsReevaluateSkippedRun(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	job := e.openJob(t, 2, validation.OutcomeSkipped)
	a := e.send(t, "pull_request", e.nextID(), realPayload(t, "pull_request", "labeled"), nil)
	if a.code != http.StatusAccepted || a.body.Job != job || a.body.JobState != "queued" || a.body.Rerun != 1 {
		t.Fatalf("labeled after a skipped run: %d %+v", a.code, a.body)
	}
	e.finish(t, job, 1, validation.OutcomePassed)
	a = e.send(t, "pull_request", e.nextID(), realPayload(t, "pull_request", "unlabeled"), nil)
	if a.code != http.StatusAccepted || a.body.Job != job || a.body.JobState != "done" || a.body.Rerun != 0 {
		t.Fatalf("unlabeled after a passed run: %d %+v", a.code, a.body)
	}
	if st := e.jobState(t, job); st.Triggers != 3 || st.Reruns != 1 {
		t.Fatalf("job: %+v, want 3 triggers and 1 re-run", st)
	}
}

// TestDraftIsQueued: a draft is queued like any pull request; the
// pipeline decides from the repository's config. Ready for review after
// the skipped draft run runs it again.
func TestDraftIsQueued(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	draft := derive(t, "pull_request", "opened", func(m map[string]any) { pr(m)["draft"] = true })
	a := e.send(t, "pull_request", e.nextID(), draft, nil)
	if a.code != http.StatusAccepted || a.body.Status != "queued" || a.body.Job == 0 {
		t.Fatalf("draft: %d %+v", a.code, a.body)
	}
	e.finish(t, a.body.Job, 0, validation.OutcomeSkipped)
	ready := derive(t, "pull_request", "opened", func(m map[string]any) { m["action"] = "ready_for_review" })
	r := e.send(t, "pull_request", e.nextID(), ready, nil)
	if r.code != http.StatusAccepted || r.body.Job != a.body.Job || r.body.JobState != "queued" || r.body.Rerun != 1 {
		t.Fatalf("ready_for_review after the skipped draft: %d %+v", r.code, r.body)
	}
}

// deriveBytes edits a JSON body.
func deriveBytes(t testing.TB, body []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRerunOutsideAllowlist: a re-run of an installation outside the
// allowlist is recorded and ignored like its pull requests would be.
func TestRerunOutsideAllowlist(t *testing.T) {
	e := newEnv(t, webhook.Config{AppID: gilfApp, Allow: webhook.Allowlist{Installations: []int64{1}}}, store.Options{})
	job := e.openJob(t, 2, validation.OutcomePassed)                                             // installation 1
	a := e.send(t, "check_suite", e.nextID(), realPayload(t, "check_suite", "rerequested"), nil) // installation 957387
	if a.code != http.StatusAccepted || a.body.Status != "ignored" || !strings.Contains(a.body.Reason, "allowlist") || a.body.Rerun != 0 {
		t.Fatalf("re-run outside the allowlist: %d %+v", a.code, a.body)
	}
	if st := e.jobState(t, job); st.State != store.StateDone || st.Reruns != 0 {
		t.Fatalf("job: %+v", st)
	}
	a = e.send(t, "check_run", e.nextID(), deriveBytes(t, checkRun("rerequested", gilfApp, validation.PublicationID(job, 0))(t),
		func(m map[string]any) { m["installation"] = map[string]any{"id": 1} }), nil)
	if a.code != http.StatusAccepted || a.body.Status != "queued" || a.body.Rerun != 1 {
		t.Fatalf("re-run inside the allowlist: %d %+v", a.code, a.body)
	}
}
