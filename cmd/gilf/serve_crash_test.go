package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
)

// crashMarker makes the crash test's sleep findable in /proc and unlike
// any other process on the machine.
const crashMarker = "6.4242"

// sandboxGoneBound bounds the wait for the sandbox to die after the
// server was killed.
const sandboxGoneBound = 15 * time.Second

// TestServeCrash kills `gilf serve` with SIGKILL while a job's step
// sleeps in the sandbox. No sandbox process may survive its server. A
// second server, with a short lease, must rescue the job once the lease
// expired, run it to the end once, and post exactly one review.
func TestServeCrash(t *testing.T) {
	payload := openedPayload(t)
	top := payload.owner + "-" + payload.repo + "-" + payload.headSHA[:7]
	slow := tarball(t, top, map[string]string{
		"package.json": `{
  "name": "slow",
  "version": "1.0.0",
  "scripts": {
    "test": "sh slow-test.sh"
  }
}
`,
		"package-lock.json": emptyLock("slow"),
		"slow-test.sh":      "#!/bin/sh\necho slow test started\nsleep " + crashMarker + "\necho slow test finished\n",
	})
	key := newAppKey(t)
	srv := fakeGitHub(t, key, payload, slow)
	dataDir := t.TempDir()
	env := serveEnv(t, srv, key, dataDir, "GILF_JOB_LEASE_MS=3000")

	first := startServe(t, env)
	db := openTestStore(t, dataDir)
	code, rep := deliver(t, first.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v, want 202 with a job", code, rep)
	}
	waitJob(t, db, first, rep.Job, "running", func(s store.JobStatus) bool { return s.State == store.StateRunning })
	var sandbox []procID
	for deadline := time.Now().Add(serveJobBound); ; {
		sandbox = descendants(first.cmd.Process.Pid)
		if hasCmdline(sandbox, "sleep "+crashMarker) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sleeping step never started under gilf serve:\n%s", first.stderr.String())
		}
		time.Sleep(servePoll)
	}
	for _, p := range sandbox {
		if p.cmdline == "sleep "+crashMarker && p.uid == 0 {
			t.Errorf("the step runs as root (pid %d): the sandbox must use its own uid", p.pid)
		}
	}
	before, err := db.JobState(t.Context(), rep.Job)
	if err != nil {
		t.Fatal(err)
	}

	pids := make([]int, 0, len(sandbox))
	for _, p := range sandbox {
		pids = append(pids, p.pid)
	}
	t.Logf("%d sandbox processes under gilf serve (pid %d) before SIGKILL: %v", len(sandbox), first.cmd.Process.Pid, pids)
	if err := first.stop(t, syscall.SIGKILL); err == nil {
		t.Fatal("gilf serve exited 0 after SIGKILL")
	}
	killed := time.Now()
	for deadline := killed.Add(sandboxGoneBound); ; {
		left := alive(sandbox)
		left = append(left, pidsWithCmdline("sleep "+crashMarker)...)
		if len(left) == 0 {
			t.Logf("every sandbox process was gone %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes outlived their killed server by %v: %v", sandboxGoneBound, left)
		}
		time.Sleep(servePoll)
	}
	if st, err := db.JobState(t.Context(), rep.Job); err != nil || st.State != store.StateRunning || st.LeaseOwner != before.LeaseOwner {
		t.Fatalf("after the crash the job is %+v, %v; want still running under the dead owner %q", st, err, before.LeaseOwner)
	}

	second := startServe(t, env)
	st := waitJob(t, db, second, rep.Job, "finished", func(s store.JobStatus) bool {
		return s.State != store.StateQueued && s.State != store.StateRunning
	})
	if st.State != store.StateDone || st.Attempts != 2 || st.LeaseGen != before.LeaseGen+1 {
		t.Errorf("rescued job ended %s after %d attempts at lease gen %d (last error %q); want done after 2 at gen %d",
			st.State, st.Attempts, st.LeaseGen, st.LastError, before.LeaseGen+1)
	}
	if n := srv.Count(githubtest.CreateReview); n != 1 || len(srv.Reviews()) != 1 {
		t.Errorf("%d review posts, %d reviews; want exactly 1", n, len(srv.Reviews()))
	}
	if checks := srv.CheckRuns(); len(checks) != 1 || checks[0]["conclusion"] != "success" {
		t.Errorf("check runs %v; want one success", checks)
	}
	if body, _ := srv.Reviews()[0]["body"].(string); !strings.Contains(body, "slow test finished") && !strings.Contains(body, "passed") {
		t.Errorf("the review does not show the run that finished:\n%s", body)
	}
	waitMetrics(t, second.url, `gilf_jobs_claimed_total 1`, `gilf_runs_total{outcome="passed"} 1`)
	if err := second.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("second gilf serve exited with %v after SIGTERM:\n%s", err, second.stderr.String())
	}
}

// procID names a process by pid and start time, so a reused pid is not
// mistaken for a survivor.
type procID struct {
	pid     int
	start   string
	uid     int
	cmdline string
}

// procStat reads ppid and start time from /proc/pid/stat. A zombie
// (dead, not yet reaped) is reported as gone.
func procStat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	// The command name is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	// After the name: state(0) ppid(1) … starttime(19).
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, "", false
	}
	return ppid, f[19], true
}

func procUID(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

func procCmdline(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func allPids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// descendants lists every process below root.
func descendants(root int) []procID {
	children := map[int][]procID{}
	for _, pid := range allPids() {
		ppid, start, ok := procStat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], procID{pid: pid, start: start})
	}
	var out []procID
	queue := []int{root}
	for len(queue) > 0 && len(out) < 10_000 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			c.uid, c.cmdline = procUID(c.pid), procCmdline(c.pid)
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

func hasCmdline(ps []procID, s string) bool {
	for _, p := range ps {
		if strings.Contains(p.cmdline, s) {
			return true
		}
	}
	return false
}

// alive lists the processes of ps that still run (same pid, same start).
func alive(ps []procID) []int {
	var out []int
	for _, p := range ps {
		if _, start, ok := procStat(p.pid); ok && start == p.start {
			out = append(out, p.pid)
		}
	}
	return out
}

func pidsWithCmdline(s string) []int {
	var out []int
	for _, pid := range allPids() {
		if strings.Contains(procCmdline(pid), s) {
			out = append(out, pid)
		}
	}
	return out
}

// TestServeGracefulDrain sends SIGTERM while a job's step sleeps: intake
// stops, the running job is let finish (it is well inside the drain
// period), its review is posted once, the store closes last and the
// process exits 0.
func TestServeGracefulDrain(t *testing.T) {
	const marker = "5.3131"
	s := startSlowJob(t, "drain", "#!/bin/sh\nsleep "+marker+"\necho drained\n")
	payload, srv, p, db := s.payload, s.srv, s.p, s.db
	waitStepStarted(t, p, "sleep "+marker)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// While the job holds the drain: not ready, and intake refuses.
	waitNotReady(t, p, "not ready: draining")
	if !hasCmdline(descendants(p.cmd.Process.Pid), "sleep "+marker) {
		t.Errorf("/readyz turned 503 only after the job's step ended; want it during the drain")
	}
	if code, r := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body)); code != http.StatusServiceUnavailable {
		t.Errorf("delivery while draining answered %d %+v, want 503", code, r)
	}
	select {
	case <-p.done:
	case <-time.After(serveStopBound):
		t.Fatalf("gilf serve did not exit within %v of SIGTERM:\n%s", serveStopBound, p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("gilf serve exited with %v after SIGTERM during a job, want 0:\n%s", p.err, p.stderr.String())
	}
	st, err := db.JobState(t.Context(), s.job)
	if err != nil || st.State != store.StateDone || st.Attempts != 1 {
		t.Errorf("job after a graceful stop: %+v, %v; want done after 1 attempt", st, err)
	}
	if n := srv.Count(githubtest.CreateReview); n != 1 {
		t.Errorf("%d review posts, want 1", n)
	}
	logs := p.stderr.String()
	intake, done, closed := strings.Index(logs, `"msg":"intake stopped"`), strings.Index(logs, `"msg":"job done"`), strings.Index(logs, `"msg":"workers stopped"`)
	if intake < 0 || done < 0 || closed < 0 || intake > done || done > closed {
		t.Errorf("shutdown order: intake stopped at %d, job done at %d, workers stopped at %d; want them in that order:\n%s", intake, done, closed, logs)
	}
}
