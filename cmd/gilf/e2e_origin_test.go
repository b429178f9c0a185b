package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
)

// The base sha of the GitHub stand-in's pull request (the real example's).
const exampleBaseSHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

// originProject is a package whose tests fail as files says.
func originProject(t *testing.T, top string, tests map[string]string) []byte {
	t.Helper()
	files := map[string]string{
		"package.json":      `{"name":"origin","version":"1.0.0","scripts":{"test":"node --test"}}` + "\n",
		"package-lock.json": emptyLock("origin"),
	}
	for k, v := range tests {
		files[k] = v
	}
	return tarball(t, top, files)
}

// originGitHub is the stand-in serving the payload's pull request, with
// tests as the head's and the base's failing tests and config as the base
// branch's .github/gilf.yml.
func originGitHub(t *testing.T, key appKey, payload prPayload, tests map[string]string, config string) *githubtest.Server {
	t.Helper()
	return githubtest.New(t, githubtest.Options{
		AppID: serveAppID, PublicKey: &key.key.PublicKey, InstallationID: payload.installationID,
		Owner: payload.owner, Repo: payload.repo, Number: payload.number, HeadSHA: payload.headSHA, BaseRef: payload.baseRef,
		Tarball:     originProject(t, payload.owner+"-"+payload.repo+"-"+payload.headSHA[:7], tests),
		BaseTarball: originProject(t, payload.owner+"-"+payload.repo+"-"+exampleBaseSHA[:7], tests),
		BaseFiles:   map[string][]byte{".github/gilf.yml": []byte(config)},
	})
}

// runJob delivers body and waits for its job to be done.
func runJob(t *testing.T, p *serveProc, db *store.DB, event string, body []byte) int64 {
	t.Helper()
	code, rep := deliver(t, p.url, newGUID(t), event, body, signature(serveSecret, body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v, want 202 with a job", code, rep)
	}
	st := waitJob(t, db, p, rep.Job, "done", func(s store.JobStatus) bool {
		return s.State != store.StateQueued && s.State != store.StateRunning
	})
	if st.State != store.StateDone {
		t.Fatalf("job ended %s (last error %q), want done", st.State, st.LastError)
	}
	return rep.Job
}

// lastCheck is the newest completed check run's conclusion, title and
// summary.
func lastCheck(t *testing.T, srv *githubtest.Server) (conclusion, title, summary string) {
	t.Helper()
	runs := srv.CheckRuns()
	if len(runs) == 0 {
		t.Fatal("no check run")
	}
	r := runs[len(runs)-1]
	out, _ := r["output"].(map[string]any)
	conclusion, _ = r["conclusion"].(string)
	title, _ = out["title"].(string)
	summary, _ = out["summary"].(string)
	return conclusion, title, summary
}

// TestServeFailureOrigin runs gilf serve with the local executor against
// the GitHub stand-in, which serves the base's archive at the base sha. A
// head that fails only as its base does is neutral, with the reason in
// its summary, and the base ran once (one download of its archive, cost
// spans of the base and retry lanes). A second head on the same base
// that adds a failing test is failure, and reuses the stored base: no
// second download, no base span. Run with the retry on and off: with it
// off, the reuse shows in the second head's wall time too.
func TestServeFailureOrigin(t *testing.T) {
	for _, retry := range []bool{true, false} {
		t.Run(fmt.Sprintf("retryFlaky %v", retry), func(t *testing.T) {
			retries := 0
			if retry {
				retries = 1
			}
			payload := openedPayload(t)
			old := map[string]string{"test/old.test.js": oldFailingTest}
			withNew := map[string]string{"test/old.test.js": oldFailingTest, "test/new.test.js": newFailingTest}
			key := newAppKey(t)
			srv := originGitHub(t, key, payload, old, fmt.Sprintf("validation:\n  retryFlaky: %v\n", retry))
			dataDir := t.TempDir()
			p := startServe(t, serveEnv(t, srv, key, dataDir))
			db := openTestStore(t, dataDir)

			first := time.Now()
			runJob(t, p, db, "pull_request", payload.body)
			firstWall := time.Since(first)
			conclusion, title, summary := lastCheck(t, srv)
			if conclusion != "neutral" || !strings.Contains(title, "failed, but not because of this pull request") ||
				!strings.Contains(summary, "Every failure was already failing on `"+payload.baseRef+"` (`6dcb09b`)") {
				t.Errorf("check run %s %q:\n%s", conclusion, title, summary)
			}
			body := srv.ReviewBodies()[0]
			if !strings.Contains(body, "<summary>Already failing on "+payload.baseRef+" (6dcb09b) (1)</summary>") || strings.Contains(body, "### Introduced") {
				t.Errorf("review body:\n%s", body)
			}
			if n := srv.TarballRequests(exampleBaseSHA); n != 1 {
				t.Errorf("%d downloads of the base, want 1", n)
			}
			// The old test's annotation is a notice: not the author's.
			if d := cmp.Diff(map[string]string{"test: old failing test": "notice"}, lastAnnotations(t, srv)); d != "" {
				t.Errorf("annotations (-want +got):\n%s", d)
			}
			// While the base ran, the check run said so.
			comparing := false
			for _, r := range srv.Requests() {
				out, _ := r.Body["output"].(map[string]any)
				s, _ := out["summary"].(string)
				comparing = comparing || r.Endpoint == githubtest.UpdateCheckRun && r.Body["status"] == "in_progress" &&
					strings.Contains(s, "comparing with `"+payload.baseRef+"`")
			}
			if !comparing {
				t.Error("no progress update said the base was being compared")
			}
			lanes := costLanes(t, db)
			if lanes["primary"] != 1 || lanes["retry"] != retries || lanes["base"] != 1 {
				t.Errorf("cost spans by lane %v, want one primary, %d retry, one base", lanes, retries)
			}

			// A second head on the same base: the base's result is reused.
			const second = "abcdefabcdefabcdefabcdefabcdefabcdefabcd"
			srv.SetHeadSHA(second)
			srv.SetTarball(originProject(t, payload.owner+"-"+payload.repo+"-"+second[:7], withNew))
			start := time.Now()
			runJob(t, p, db, "pull_request", syncPayload(t, payload, second, 1))
			// A measurement for bench/failure-origin, not an assertion.
			t.Logf("job wall time (retryFlaky %v): first head (base validated) %v, second head (base reused) %v, ratio %.2f", retry,
				firstWall.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), float64(time.Since(start))/float64(firstWall))
			conclusion, title, summary = lastCheck(t, srv)
			if conclusion != "failure" || !strings.Contains(summary, "whose result gilf had from an earlier run") ||
				!strings.Contains(summary, "**First failure:**") {
				t.Errorf("second head's check run %s %q:\n%s", conclusion, title, summary)
			}
			bodies := srv.ReviewBodies()
			if b := bodies[len(bodies)-1]; !strings.Contains(b, "❌ `new failing test`") || !strings.Contains(b, "⏮️ `old failing test`") {
				t.Errorf("second review body:\n%s", b)
			}
			// gilf costs shows the lanes.
			if r := gilf(t, []string{"GILF_DATA_DIR=" + dataDir}, "costs", "--json", "--since", "24h"); r.code != exitOK ||
				!strings.Contains(r.stdout, `"lane": "base"`) || retry != strings.Contains(r.stdout, `"lane": "retry"`) {
				t.Errorf("gilf costs exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if path := os.Getenv("GILF_TEST_KEEP_ORIGIN_REVIEW"); path != "" && retry {
				// For a person to render and look at (bench/render-review).
				if err := os.WriteFile(path, []byte(bodies[len(bodies)-1]), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.TarballRequests(exampleBaseSHA); n != 1 {
				t.Errorf("%d downloads of the base after a second head, want still 1", n)
			}
			want := map[string]string{"test: old failing test": "notice", "test: new failing test": "failure"}
			if d := cmp.Diff(want, lastAnnotations(t, srv)); d != "" {
				t.Errorf("second head's annotations (-want +got):\n%s", d)
			}
			lanes = costLanes(t, db)
			if lanes["primary"] != 2 || lanes["retry"] != 2*retries || lanes["base"] != 1 {
				t.Errorf("cost spans by lane %v, want two primary, %d retry, one base", lanes, 2*retries)
			}
		})
	}
}

// TestServePreexistingFailure: validation.preexisting: failure in the
// base branch's .github/gilf.yml keeps a head with only the base's
// failures failing; validation.compareBase: false leaves them unknown,
// failing too.
func TestServePreexistingFailure(t *testing.T) {
	for _, tc := range []struct {
		name, config, summaryHas string
		baseDownloads            int
	}{
		{"preexisting failure", "validation:\n  preexisting: failure\n", "Every failure was already failing", 1},
		{"compareBase false", "validation:\n  compareBase: false\n  retryFlaky: false\n", "validation.compareBase is false", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := openedPayload(t)
			old := map[string]string{"test/old.test.js": oldFailingTest}
			key := newAppKey(t)
			srv := originGitHub(t, key, payload, old, tc.config)
			dataDir := t.TempDir()
			p := startServe(t, serveEnv(t, srv, key, dataDir))
			db := openTestStore(t, dataDir)
			runJob(t, p, db, "pull_request", payload.body)
			conclusion, title, summary := lastCheck(t, srv)
			if conclusion != "failure" || !strings.Contains(summary, tc.summaryHas) {
				t.Errorf("check run %s %q:\n%s", conclusion, title, summary)
			}
			if n := srv.TarballRequests(exampleBaseSHA); n != tc.baseDownloads {
				t.Errorf("%d downloads of the base, want %d", n, tc.baseDownloads)
			}
		})
	}
}

// lastAnnotations are the newest check run's annotations, by level and
// title.
func lastAnnotations(t *testing.T, srv *githubtest.Server) map[string]string {
	t.Helper()
	runs := srv.CheckRuns()
	id, ok := runs[len(runs)-1]["id"].(int64)
	if !ok {
		t.Fatalf("check run id %v", runs[len(runs)-1]["id"])
	}
	out := map[string]string{}
	for _, a := range srv.Annotations(id) {
		title, _ := a["title"].(string)
		level, _ := a["annotation_level"].(string)
		out[title] = level
	}
	return out
}

// costLanes counts the recorded cost spans by lane.
func costLanes(t *testing.T, db *store.DB) map[string]int {
	t.Helper()
	days, err := db.CostsByDay(t.Context(), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range days {
		out[string(d.Lane)] += d.Spans
	}
	return out
}
