package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// stopMarker is the slow step's sleep, to find its processes.
const stopMarker = "41.4711"

// TestServeStoppedJobStopsWithinSeconds: with the default two-minute
// lease (a heartbeat every 40 s), a running validation whose job is
// superseded by a newer head, or cancelled by the operator, is stopped
// within seconds, and its check run completes neutral saying so.
func TestServeStoppedJobStopsWithinSeconds(t *testing.T) {
	s := startSlowJob(t, "slow", "#!/bin/sh\necho slow test started\nsleep "+stopMarker+"\necho slow test finished\n")
	payload, srv, dataDir, p, db := s.payload, s.srv, s.dataDir, s.p, s.db
	old := waitSleep(t, p, nil)

	// A push: a newer head supersedes the running job.
	newHead := strings.Repeat("b", 40)
	srv.SetHeadSHA(newHead)
	sync := derivePayload(t, payload.body, func(m map[string]any) {
		m["action"] = "synchronize"
		pr := m["pull_request"].(map[string]any)
		pr["head"].(map[string]any)["sha"] = newHead
		pr["updated_at"] = "2019-05-15T15:25:00Z"
	})
	code, second := deliver(t, p.url, newGUID(t), "pull_request", sync, signature(serveSecret, sync))
	if code != 202 || second.Job == 0 || second.Job == s.job {
		t.Fatalf("synchronize answered %d %+v", code, second)
	}
	pushed := time.Now()
	waitGone(t, p, old, "superseded")
	t.Logf("the superseded job's step was gone %v after the push", time.Since(pushed).Round(time.Millisecond))
	if st, err := db.JobState(t.Context(), s.job); err != nil || st.State != store.StateSuperseded {
		t.Fatalf("first job: %+v, %v; want superseded", st, err)
	}
	waitCheck(t, p, srv.CheckRuns, payload.headSHA, "superseded")

	// The operator cancels the newer head's job while it runs.
	cur := waitSleep(t, p, old)
	var out bytes.Buffer
	if code := run(t.Context(), dataDirEnv(&out, dataDir, nil), []string{"jobs", "cancel", strconv.FormatInt(second.Job, 10)}); code != exitOK {
		t.Fatalf("gilf jobs cancel exited %d: %s", code, out.String())
	}
	cancelled := time.Now()
	waitGone(t, p, cur, "cancelled")
	t.Logf("the cancelled job's step was gone %v after the cancel", time.Since(cancelled).Round(time.Millisecond))
	waitCheck(t, p, srv.CheckRuns, newHead, "cancelled")
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("gilf serve exited with %v:\n%s", err, p.stderr.String())
	}
}

// waitSleep waits for a slow step (a sleep process) other than those in
// before, and returns the pids running it.
func waitSleep(t *testing.T, p *serveProc, before []int) []int {
	t.Helper()
	for deadline := time.Now().Add(serveJobBound); ; {
		var fresh []int
		for _, pid := range pidsWithCmdline("sleep " + stopMarker) {
			if !slices.Contains(before, pid) {
				fresh = append(fresh, pid)
			}
		}
		if len(fresh) > 0 {
			return fresh
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow step never started:\n%s", p.stderr.String())
		}
		time.Sleep(servePoll)
	}
}

// waitGone waits, at most sandboxGoneBound, for pids to end.
func waitGone(t *testing.T, p *serveProc, pids []int, what string) {
	t.Helper()
	for deadline := time.Now().Add(sandboxGoneBound); ; {
		alive := slices.ContainsFunc(pidsWithCmdline("sleep "+stopMarker), func(pid int) bool { return slices.Contains(pids, pid) })
		if !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s job's step still runs after %v:\n%s", what, sandboxGoneBound, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
}

// waitCheck waits for head's check run to complete neutral, its title
// saying why.
func waitCheck(t *testing.T, p *serveProc, checkRuns func() []map[string]any, head, why string) {
	t.Helper()
	for deadline := time.Now().Add(serveJobBound); ; {
		for _, cr := range checkRuns() {
			title, _ := cr["output"].(map[string]any)["title"].(string)
			if cr["head_sha"] == head && cr["status"] == "completed" {
				if cr["conclusion"] != "neutral" || !strings.Contains(title, why) {
					t.Fatalf("check run of %s: %v %q, want neutral, %s", head, cr["conclusion"], title, why)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed check run on %s:\n%s", head, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
}

// derivePayload is body with change applied to its JSON.
func derivePayload(t *testing.T, body []byte, change func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
