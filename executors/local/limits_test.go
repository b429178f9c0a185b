package local

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

// MaxOutputBytes: a stream of exactly that size is kept whole; one more
// byte and head and tail are kept around the cut.
func TestMaxOutputBoundary(t *testing.T) {
	const keep = 1000
	e := newExec(t, Options{MaxOutputBytes: keep})
	res := runPlan(t, e, repo(t, nil),
		shStep("at", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", keep), 10*time.Second),
		shStep("over", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", keep+1), 10*time.Second),
	)
	at, over := res.Steps[0].Output, res.Steps[1].Output
	if at.Truncated || len(at.Head) != keep || at.Bytes != keep {
		t.Errorf("at the limit: truncated %v, kept %d, bytes %d", at.Truncated, len(at.Head), at.Bytes)
	}
	if !over.Truncated || len(over.Head)+len(over.Tail) != keep || over.Bytes != keep+1 {
		t.Errorf("over the limit: truncated %v, kept %d, bytes %d", over.Truncated, len(over.Head)+len(over.Tail), over.Bytes)
	}
}

// KillGrace: SIGTERM comes first and a step that cleans up within the
// grace gets to.
func TestKillGraceLetsCleanupRun(t *testing.T) {
	e := newExec(t, Options{KillGrace: 3 * time.Second})
	start := time.Now()
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", `trap 'echo cleaned up; exit 0' TERM; sleep 1000 & wait`, time.Second)))
	wantStatus(t, s, validation.StatusTimedOut)
	if !strings.Contains(s.Output.Head, "cleaned up") {
		t.Errorf("the step did not get SIGTERM before SIGKILL: %q", s.Output.Head)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s: the step ended at SIGTERM and the grace need not run out", d)
	}
}

// The CPU quota holds a busy loop to its share.
func TestCPUQuota(t *testing.T) {
	e := newExec(t, Options{Limits: Limits{CPUs: 0.2}})
	busy := validation.Step{Name: "test", Timeout: 30 * time.Second, Argv: []string{"node", "-e",
		`const u0 = process.cpuUsage(); const end = Date.now() + 1500; while (Date.now() < end) {} const u = process.cpuUsage(u0); console.log((u.user + u.system) / 1e6)`}}
	s := step0(t, runPlan(t, e, repo(t, nil), busy))
	wantStatus(t, s, validation.StatusPassed)
	used, err := strconv.ParseFloat(strings.TrimSpace(s.Output.Head), 64)
	if err != nil {
		t.Fatalf("output %q: %v", s.Output.Head, err)
	}
	// 1.5 s of wall time at 0.2 CPU is 0.3 s of CPU; unlimited it is 1.5 s.
	// Only the loop's own CPU is counted: node's start-up, slow on a
	// loaded machine, runs under the quota too but outside the 1.5 s.
	if used > 0.75 {
		t.Errorf("a 0.2-CPU step used %.2f s of CPU in 1.5 s", used)
	}
}

// OutputDrainTimeout: in tier none (no pid namespace, no cgroup) a daemon
// that left the process group survives and keeps the output pipe, which
// is why that tier is the weakest; it still cannot hold Run open.
func TestDrainTimeoutTierNone(t *testing.T) {
	e := newExec(t, Options{
		BwrapPath:  filepath.Join(t.TempDir(), "no-bwrap"),
		CgroupRoot: t.TempDir(),
		MinTier:    validation.TierNone,
	})
	start := time.Now()
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", `(setsid sleep 30 &); sleep 0.3; echo parent done`, 10*time.Second)))
	d := time.Since(start)
	wantStatus(t, s, validation.StatusPassed)
	if !strings.Contains(s.Reason, "output was still open") || !strings.Contains(s.Output.Head, "parent done") {
		t.Errorf("reason %q output %q", s.Reason, s.Output.Head)
	}
	if d < OutputDrainTimeout || d > OutputDrainTimeout+5*time.Second {
		t.Errorf("Run took %s, want just over %s", d, OutputDrainTimeout)
	}
	left := sandboxProcesses(t, e.opts.SandboxUID)
	if len(left) == 0 {
		t.Error("the daemon is gone: tier none is stronger than it says")
	}
	for _, p := range left {
		pid, err := strconv.Atoi(strings.Fields(p)[0])
		if err == nil {
			if err := unix.Kill(pid, unix.SIGKILL); err != nil {
				t.Logf("kill %d: %v", pid, err)
			}
		}
	}
}

// Tier none on a host with cgroups: a forking daemon in its own session
// escapes the process group, not the cgroup, whose kill (frozen when it
// must be) leaves nothing behind.
func TestTierNoneCgroupKillsForkingDaemon(t *testing.T) {
	e := newExec(t, Options{
		BwrapPath: filepath.Join(t.TempDir(), "no-bwrap"),
		MinTier:   validation.TierNone,
		Limits:    Limits{Pids: 64},
	})
	start := time.Now()
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", `setsid sh -c 'while :; do sleep 100 & done' >/dev/null 2>&1 & sleep 0.5; echo leaving`, 10*time.Second)))
	wantStatus(t, s, validation.StatusPassed)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	if left := sandboxProcesses(t, e.opts.SandboxUID); len(left) != 0 {
		t.Errorf("left after the run: %d processes, e.g. %v", len(left), left[0])
	}
}
