package local

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// realState runs a real shell and returns its wait status.
func realState(t *testing.T, script string) *os.ProcessState {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{}
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %q: %v", script, err)
	}
	return cmd.ProcessState
}

func TestClassify(t *testing.T) {
	exit0 := realState(t, "exit 0")
	exit1 := realState(t, "exit 1")
	exit137 := realState(t, "exit 137")
	killed := realState(t, "kill -KILL $$")
	termed := realState(t, "kill -TERM $$")
	lim := Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1}
	code := func(n int) *int { return &n }
	tests := []struct {
		name string
		obs  observation
		want verdict
		// reason is a substring the reason must hold ("" means empty).
		reason string
	}{
		{"exit 0", observation{state: exit0}, verdict{status: validation.StatusPassed, exitCode: code(0)}, ""},
		{"exit 1", observation{state: exit1}, verdict{status: validation.StatusFailed, exitCode: code(1)}, ""},
		{"exit 137 without OOM is a failure, not a kill", observation{state: exit137}, verdict{status: validation.StatusFailed, exitCode: code(137)}, ""},
		// Tier none: the step's own command was signalled (by itself);
		// the signal says it all, the reason says nothing more.
		{"host saw SIGKILL, no sandbox", observation{state: killed}, verdict{status: validation.StatusKilled, signal: "SIGKILL"}, ""},
		{"host saw SIGTERM, no sandbox", observation{state: termed}, verdict{status: validation.StatusKilled, signal: "SIGTERM"}, ""},
		// bwrap itself signalled with no limit of gilf's at work: someone
		// outside killed it, gilf's failure.
		{"bwrap killed from outside", observation{state: killed, sandboxed: true}, verdict{status: validation.StatusKilled, signal: "SIGKILL", external: true}, ""},
		{"bwrap killed by the timeout", observation{state: killed, sandboxed: true, stopped: errStepTimeout, timeout: time.Second}, verdict{status: validation.StatusTimedOut, signal: "SIGKILL"}, "timeout"},
		{"bwrap killed by the OOM killer", observation{state: killed, sandboxed: true, oomKills: 1, limits: lim}, verdict{status: validation.StatusKilled, signal: "SIGKILL"}, "memory limit"},
		{"bwrap killed on cancel", observation{state: killed, sandboxed: true, stopped: errRunCancelled}, verdict{status: validation.StatusKilled, signal: "SIGKILL"}, "cancelled"},
		{"timeout", observation{state: termed, stopped: errStepTimeout, timeout: 3 * time.Second}, verdict{status: validation.StatusTimedOut, signal: "SIGTERM"}, "step timeout of 3s"},
		{"timeout although exit 0", observation{state: exit0, stopped: errStepTimeout, timeout: time.Second}, verdict{status: validation.StatusTimedOut, exitCode: code(0)}, "timeout"},
		{"output ceiling", observation{state: killed, stopped: errOutputCeiling, maxStream: 1024}, verdict{status: validation.StatusKilled, signal: "SIGKILL"}, "output ceiling of 1024 bytes"},
		{"cancelled", observation{state: killed, stopped: errRunCancelled}, verdict{status: validation.StatusKilled, signal: "SIGKILL"}, "cancelled"},
		{"OOM kill", observation{state: exit137, oomKills: 1, limits: lim}, verdict{status: validation.StatusKilled, exitCode: code(137), signal: "SIGKILL"}, "memory limit of 268435456 bytes"},
		{"OOM kill of a child, step passed", observation{state: exit0, oomKills: 2, limits: lim}, verdict{status: validation.StatusPassed, exitCode: code(0)}, "memory limit"},
		{"pids limit", observation{state: exit1, pidsHits: 7, limits: lim}, verdict{status: validation.StatusFailed, exitCode: code(1)}, "pids limit of 64 refused 7 fork(s)"},
		{"pids limit with timeout", observation{state: killed, stopped: errStepTimeout, pidsHits: 1, limits: lim, timeout: time.Second}, verdict{status: validation.StatusTimedOut, signal: "SIGKILL"}, "pids limit"},
		{"no wait status", observation{}, verdict{status: validation.StatusFailed}, "no exit status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.obs)
			reason := got.reason
			got.reason = ""
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(verdict{})); diff != "" {
				t.Errorf("classify (-want +got):\n%s", diff)
			}
			if tt.reason == "" && reason != "" || !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q, want it to hold %q", reason, tt.reason)
			}
		})
	}
}

// The guard in front of a cgroup v1 step runs it only after the worker's
// go-ahead: at EOF (the worker died before placing the sandbox) it exits
// 125 and runs nothing; with the go-ahead it execs the step's argv as is.
func TestGuardShim(t *testing.T) {
	run := func(t *testing.T, goAhead bool) (string, int) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		argv := guardArgv(3, []string{"/bin/sh", "-c", `echo ran "$1" > marker`, "x", "it's"})
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.ExtraFiles, cmd.Env = dir, []*os.File{r}, []string{}
		if goAhead {
			if _, err := w.Write([]byte("\n")); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		err = cmd.Run()
		r.Close()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "marker"))
		return string(b), cmd.ProcessState.ExitCode()
	}
	if marker, code := run(t, false); marker != "" || code != 125 {
		t.Errorf("at EOF: marker %q, exit %d; want nothing run and 125", marker, code)
	}
	if marker, code := run(t, true); marker != "ran it's\n" || code != 0 {
		t.Errorf("with the go-ahead: marker %q, exit %d; want the step run with its argv", marker, code)
	}
}
