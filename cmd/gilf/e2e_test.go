package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/store"
)

// TestServeE2E runs the whole `gilf serve` as a subprocess on 127.0.0.1:0
// with a temp data dir, against the fake GitHub API (real examples, App
// JWT verified with a key generated here), with the local executor
// (bubblewrap; root, as in CI). It posts the real pull_request opened
// payload, signed here, waits for the job row to be done and compares
// what was posted to GitHub with golden files. Then: a redelivery of the
// same GUID is answered 200 and makes no second job, a bad signature is
// answered 401 and stores nothing, /healthz and /metrics answer, and
// SIGTERM stops the server cleanly.
func TestServeE2E(t *testing.T) {
	payload := openedPayload(t)
	realTarball, err := os.ReadFile(shared.Data(t, "repos", "util-deprecate.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	top := payload.owner + "-" + payload.repo + "-" + payload.headSHA[:7]
	failing := tarball(t, top, map[string]string{
		"package.json": `{
  "name": "hello-world",
  "version": "1.0.0",
  "scripts": {
    "test": "node test.js"
  }
}
`,
		"package-lock.json": emptyLock("hello-world"),
		"index.js":          "module.exports = (a, b) => a + b + 1;\n",
		"test.js": `const add = require('./index.js');
const got = add(1, 2);
if (got !== 3) {
  console.error('AssertionError: expected add(1, 2) to equal 3, got ' + got);
  process.exit(1);
}
`,
	})
	tests := []struct {
		name       string
		tarball    []byte
		conclusion string
		outcome    string
		golden     string
		bodyHas    []string
		env        []string
	}{
		{
			// npm's default test script is inconclusive before it runs:
			// nothing is proven, the check is neutral.
			name: "util-deprecate npm default test script", tarball: realTarball,
			conclusion: "neutral", outcome: "inconclusive", golden: "util-deprecate.txt",
			bodyHas: []string{"no test specified"},
		},
		{
			name: "test script fails", tarball: failing,
			// With evidence on (the filesystem store under the data dir),
			// the failing step's output is stored and referenced by key.
			conclusion: "failure", outcome: "failed", golden: "failing-test.txt",
			bodyHas: []string{"AssertionError: expected add(1, 2) to equal 3, got 4", "review-artifacts/"},
			env:     []string{"GILF_EVIDENCE_ARTIFACTS=1"},
		},
	}
	key := newAppKey(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeGitHub(t, key, payload, tt.tarball)
			dataDir := t.TempDir()
			p := startServe(t, serveEnv(t, srv, key, dataDir, tt.env...))
			db := openTestStore(t, dataDir)

			guid := newGUID(t)
			code, rep := deliver(t, p.url, guid, "pull_request", payload.body, signature(serveSecret, payload.body))
			if code != 202 || rep.Status != "queued" || rep.Job == 0 {
				t.Fatalf("delivery answered %d %+v, want 202 queued with a job", code, rep)
			}
			st := waitJob(t, db, p, rep.Job, "done", func(s store.JobStatus) bool {
				return s.State != store.StateQueued && s.State != store.StateRunning
			})
			if st.State != store.StateDone || st.Attempts != 1 {
				t.Fatalf("job ended %s after %d attempts (last error %q), want done after 1", st.State, st.Attempts, st.LastError)
			}

			reviews, checks := srv.Reviews(), srv.CheckRuns()
			if len(reviews) != 1 || len(checks) != 1 {
				t.Fatalf("posted %d reviews and %d check runs, want 1 and 1", len(reviews), len(checks))
			}
			if got := checks[0]["conclusion"]; got != tt.conclusion {
				t.Errorf("check run conclusion %v, want %s", got, tt.conclusion)
			}
			body, _ := reviews[0]["body"].(string)
			for _, s := range tt.bodyHas {
				if !strings.Contains(body, s) {
					t.Errorf("review body lacks %q:\n%s", s, body)
				}
			}
			checkGolden(t, tt.golden, postedView(t, srv))
			// The run's executor time is recorded; local has no rate card,
			// so its cost is unknown, not zero.
			// A failed run retries its failed step once (the retry lane);
			// the stand-in has no archive of the base, so no base ran.
			days, err := db.CostsByDay(t.Context(), time.Now().Add(-time.Hour))
			wantLanes := map[store.Lane]bool{store.LanePrimary: true}
			if tt.outcome == "failed" {
				wantLanes[store.LaneRetry] = true
			}
			if err != nil || len(days) != len(wantLanes) {
				t.Errorf("cost spans by day: %+v, %v; want one local span per lane of %v with an unknown cost", days, err, wantLanes)
			}
			for _, d := range days {
				if !wantLanes[d.Lane] || d.Executor != "local" || d.Spans != 1 || d.USD != nil {
					t.Errorf("cost spans by day: %+v; want one local span per lane of %v with an unknown cost", d, wantLanes)
				}
			}
			posted, ok, err := db.PostedReview(t.Context(), rep.Job)
			if err != nil || !ok {
				t.Fatalf("posted review of job %d: %v, %v", rep.Job, ok, err)
			}
			if want := reviews[0]["id"]; float64(posted.ReviewID) != toFloat(want) || posted.CheckRunID == 0 {
				t.Errorf("store recorded review %d / check run %d, GitHub has review %v", posted.ReviewID, posted.CheckRunID, want)
			}

			// A redelivery of the same GUID does nothing twice.
			code, dup := deliver(t, p.url, guid, "pull_request", payload.body, signature(serveSecret, payload.body))
			if code != 200 || dup.Status != "duplicate" || dup.Job != rep.Job {
				t.Errorf("redelivery answered %d %+v, want 200 duplicate of job %d", code, dup, rep.Job)
			}
			// A bad or missing signature is refused before anything is stored.
			if code, r := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature("not-the-secret", payload.body)); code != 401 {
				t.Errorf("bad signature answered %d %+v, want 401", code, r)
			}
			if code, r := deliver(t, p.url, newGUID(t), "pull_request", payload.body, ""); code != 401 {
				t.Errorf("missing signature answered %d %+v, want 401", code, r)
			}
			if n, err := db.CountDeliveries(t.Context()); err != nil || n != 1 {
				t.Errorf("stored deliveries: %d, %v; want 1", n, err)
			}
			if st, err := db.JobState(t.Context(), rep.Job); err != nil || st.Triggers != 1 || st.Attempts != 1 {
				t.Errorf("job after redelivery: %+v, %v; want 1 trigger, 1 attempt", st, err)
			}
			if n := len(srv.Reviews()); n != 1 {
				t.Errorf("%d reviews after the redelivery, want 1", n)
			}

			if code, b := httpGet(t, p.url, "/healthz"); code != 200 || b != "ok\n" {
				t.Errorf("/healthz answered %d %q", code, b)
			}
			waitMetrics(t, p.url,
				`gilf_runs_total{outcome="`+tt.outcome+`"} 1`,
				`gilf_webhook_deliveries_total{status="queued"} 1`,
				`gilf_webhook_deliveries_total{status="duplicate"} 1`,
				`gilf_jobs_claimed_total 1`,
				`gilf_job_attempts_finished_total{result="done"} 1`,
				`gilf_jobs_running 0`,
				`gilf_deliveries_stored 1`,
			)

			if err := p.stop(t, syscall.SIGTERM); err != nil {
				t.Errorf("gilf serve exited with %v after SIGTERM, want 0:\n%s", err, p.stderr.String())
			}
			logs := p.stderr.String()
			for _, s := range []string{`"msg":"intake stopped"`, `"msg":"workers stopped"`} {
				if !strings.Contains(logs, s) {
					t.Errorf("shutdown log lacks %s", s)
				}
			}
			// Nothing of the worker's leaks: not the webhook secret, the
			// App key or an installation token.
			secrets := append([]string{serveSecret, pemBody(t, key.path)}, srv.Tokens()...)
			for _, s := range secrets {
				if strings.Contains(logs, s) || strings.Contains(body, s) {
					t.Errorf("a secret (%d bytes) reached the logs or the review", len(s))
				}
			}
		})
	}
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int64:
		return float64(n)
	case int:
		return float64(n)
	}
	return -1
}

// pemBody is one line from the middle of the key file: enough to find a
// leak, without the PEM armour every key shares.
func pemBody(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	return lines[len(lines)/2]
}
