package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// bwrapChildren lists this process's children that run bwrap.
func bwrapChildren(t *testing.T, bwrap string) []int {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var out []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != self {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", en.Name(), "exe")); err == nil && exe == bwrap {
			out = append(out, pid)
		}
	}
	return out
}

// A bwrap killed from outside (not by the step timeout, the output
// ceiling, the memory cgroup or cancellation) is gilf's infrastructure
// failure: Run returns an error, so the job is retried, and no step is
// reported as the pull request's "killed".
func TestBwrapKilledFromOutsideIsAnError(t *testing.T) {
	e := newExec(t, Options{NoGitWorkTree: true})
	dir := repo(t, map[string]string{"package.json": "{}"})
	started := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type ran struct {
		res executors.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := e.Run(ctx, executors.Request{Dir: dir, Plan: validation.Plan{Steps: []validation.Step{
			shStep("test", "echo > started-marker; exec sleep 600", time.Hour),
		}}, Progress: func(step string, _ time.Time) {
			if step == "test" {
				started <- struct{}{}
			}
		}})
		done <- ran{res, err}
	}()
	<-started
	uid := e.opts.SandboxUID
	waitUntil(t, "the step runs", func() bool { return running(t, uid, "sleep", "600") })
	pids := bwrapChildren(t, e.opts.BwrapPath)
	if len(pids) != 1 {
		t.Fatalf("bwrap processes of this test: %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	var ref *validation.Refusal
	if r.err == nil || errors.As(r.err, &ref) || errors.Is(r.err, context.Canceled) {
		t.Fatalf("Run = %+v, %v; want an infrastructure error", r.res.Steps, r.err)
	}
	if !strings.Contains(r.err.Error(), "bwrap was killed by SIGKILL from outside the sandbox") {
		t.Errorf("error %q does not say who killed what", r.err)
	}
}
