package local

import (
	"context"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// workRoot returns a fresh directory the sandbox uid can traverse.
func workRoot(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatalf("chmod %s: %v", p, err)
		}
	}
	return d
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newExec returns an Executor with opts and a private WorkRoot.
func newExec(t *testing.T, opts Options) *Executor {
	t.Helper()
	if opts.WorkRoot == "" {
		opts.WorkRoot = workRoot(t)
	}
	if opts.SandboxUID == 0 {
		// A uid of this test's own: other packages' tests may run
		// sandboxes at the same time, and the leftover check counts
		// processes by uid.
		opts.SandboxUID, opts.SandboxGID = testUID(t), testUID(t)
	}
	e, err := New(testLogger(t), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		assertNoSandboxProcesses(t, e.opts.SandboxUID)
		killSandboxProcesses(t, e.opts.SandboxUID)
		entries, err := os.ReadDir(opts.WorkRoot)
		if err != nil {
			t.Errorf("read work root: %v", err)
		}
		for _, en := range entries {
			t.Errorf("left behind in the work root: %s", en.Name())
		}
	})
	return e
}

// newToolExec is newExec for an Executor that prepares package managers:
// their mirror, kept in the work root for later runs, goes with the test.
func newToolExec(t *testing.T, opts Options) *Executor {
	t.Helper()
	if opts.WorkRoot == "" {
		opts.WorkRoot = workRoot(t)
	}
	e := newExec(t, opts)
	t.Cleanup(func() {
		if err := os.RemoveAll(filepath.Join(opts.WorkRoot, toolsDirName)); err != nil {
			t.Error(err)
		}
	})
	return e
}

// repo writes files into a fresh checkout directory.
func repo(t testing.TB, files map[string]string) string {
	t.Helper()
	d := t.TempDir()
	for name, body := range files {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func shStep(name, script string, timeout time.Duration) validation.Step {
	return validation.Step{Name: name, Argv: []string{"/bin/sh", "-c", script}, Network: validation.NetworkNone, Timeout: timeout}
}

func runPlan(t *testing.T, e *Executor, dir string, steps ...validation.Step) executors.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := e.Run(ctx, executors.Request{Plan: validation.Plan{PackageManager: validation.NPM, Steps: steps}, Dir: dir})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(res.Steps) != len(steps) {
		t.Fatalf("got %d step results, want %d", len(res.Steps), len(steps))
	}
	return res
}

// sandboxProcesses lists the live processes whose real or effective uid
// is uid. Zombies are dead and hold nothing: bwrap exits as soon as its
// sandbox reports the command's status, so the sandbox's own init is
// reaped by the host's init, which may take its time.
func sandboxProcesses(t *testing.T, uid uint32) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var out []string
	want := strconv.FormatUint(uint64(uid), 10)
	for _, en := range entries {
		if en.Name()[0] < '0' || en.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		mine, dead := false, false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 3 && f[0] == "Uid:":
				mine = f[1] == want || f[2] == want
			case len(f) >= 2 && f[0] == "State:":
				dead = f[1] == "Z" || f[1] == "X"
			}
		}
		if mine && !dead {
			out = append(out, en.Name()+" "+cmdline(en.Name()))
		}
	}
	return out
}

// running reports whether a process of uid runs exactly argv: the step's
// own process, not bwrap's, whose argv ends with the step's.
func running(t *testing.T, uid uint32, argv ...string) bool {
	t.Helper()
	for _, p := range sandboxProcesses(t, uid) {
		if f := strings.Fields(p); len(f) == len(argv)+1 && slices.Equal(f[1:], argv) {
			return true
		}
	}
	return false
}

func cmdline(pid string) string {
	b, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// assertNoSandboxProcesses fails when any process of the sandbox uid is
// left, after a short grace for the kernel to reap.
func assertNoSandboxProcesses(t *testing.T, uid uint32) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = sandboxProcesses(t, uid); len(left) == 0 {
			return
		}
	}
	t.Errorf("processes of the sandbox uid %d left: %v", uid, left)
}

// testUID derives a sandbox uid unique to the test (and its name) from
// the range no distribution hands out.
func testUID(t *testing.T) uint32 {
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	return 300000 + h.Sum32()%100000
}

// killSandboxProcesses stops and kills what a failed test left running as
// its own sandbox uid, so a runaway cannot outlive the test.
func killSandboxProcesses(t *testing.T, uid uint32) {
	t.Helper()
	for range 20 {
		left := sandboxProcesses(t, uid)
		if len(left) == 0 {
			return
		}
		for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
			for _, p := range left {
				if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
					syscall.Kill(pid, sig)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("processes of uid %d survive SIGKILL", uid)
}
