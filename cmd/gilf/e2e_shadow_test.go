package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// TestServeSlowShadowHoldsNothing: a shadow lane that does not end (a
// self-host command that waits for the test) does not hold the primary:
// the job ends done and its check run completes while the shadow still
// runs; the review does not wait for it. When the shadow ends, its
// telemetry is recorded on the run and shows on the run page.
func TestServeSlowShadowHoldsNothing(t *testing.T) {
	payload, key, srv := utilDeprecateGitHub(t)
	dir := t.TempDir()
	started, release := filepath.Join(dir, "shadow-started"), filepath.Join(dir, "shadow-release")
	script := filepath.Join(dir, "slow-shadow.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
: > %s
n=0
while [ ! -e %s ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done
echo "shadow done"
`, started, release)), 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	p := startServe(t, serveEnv(t, srv, key, dataDir,
		"GILF_SELF_HOST_COMMAND="+script,
		"GILF_VALIDATION_SHADOW_EXECUTOR=self-host",
		"GILF_VALIDATION_SHADOW_TIMEOUT_MS=600000"))
	db := openTestStore(t, dataDir)

	code, rep := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v", code, rep)
	}
	st := waitJob(t, db, p, rep.Job, "done", func(s store.JobStatus) bool {
		return s.State != store.StateQueued && s.State != store.StateRunning
	})
	if st.State != store.StateDone {
		t.Fatalf("job ended %s (%q)", st.State, st.LastError)
	}
	if _, err := os.Stat(started); err != nil {
		t.Fatalf("the shadow never started: %v", err)
	}
	if _, err := os.Stat(release); err == nil {
		t.Fatal("released before the check")
	}
	// The shadow still waits for its release; the primary's results are
	// all out.
	checks := srv.CheckRuns()
	if len(checks) != 1 || checks[0]["status"] != "completed" {
		t.Fatalf("check runs %v, want one completed while the shadow runs", checks)
	}
	if n := len(srv.Reviews()); n != 1 {
		t.Fatalf("%d reviews, want the summary posted while the shadow runs", n)
	}
	runID := onlyRun(t, db, rep.Job)
	view, err := db.RunView(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if view.Shadow == nil || !strings.HasPrefix(view.Shadow.Err, "running") {
		t.Fatalf("run page's shadow while it runs: %+v, want it shown running", view.Shadow)
	}

	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(serveJobBound)
	for {
		view, err = db.RunView(t.Context(), runID)
		if err != nil {
			t.Fatal(err)
		}
		if view.Shadow != nil && !strings.HasPrefix(view.Shadow.Err, "running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shadow telemetry not recorded after the release: %+v\n%s", view.Shadow, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
	if view.Shadow.Executor != "self-host" || view.Shadow.Wall <= 0 {
		t.Errorf("recorded shadow %+v, want self-host with its wall time", view.Shadow)
	}
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func onlyRun(t *testing.T, db *store.DB, job int64) int64 {
	t.Helper()
	page, err := db.RunList(t.Context(), store.RunQuery{Job: job})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("runs of job %d: %+v, %v; want one", job, page.Runs, err)
	}
	return page.Runs[0].ID
}
