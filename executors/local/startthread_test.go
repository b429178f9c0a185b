package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/ownthread/threadtest"
	"github.com/gilf-review/gilf/validation"
)

// A sandboxed step outlives the thread its start ran on. Its bwrap has a
// parent-death signal, which fires when the thread that forked it ends,
// not the worker; a tier-none step's start ends its thread on purpose,
// and the runtime may have handed it the very thread a sandboxed step was
// forked from. Started from a thread of its own, the step runs on to its
// end; forked from the caller's, it would be killed as the thread ends
// (and the run would fail: bwrap killed from outside the sandbox).
func TestStepOutlivesTheStartingThread(t *testing.T) {
	e := newExec(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pr, err := e.probe.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pr.tier == validation.TierNone {
		t.Fatalf("this host gives no bwrap sandbox: %v", pr.notes)
	}
	dirs, _, err := makeRunDirs(e.opts.WorkRoot, "", int(e.opts.SandboxUID), int(e.opts.SandboxGID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dirs.remove(); err != nil {
			t.Error(err)
		}
	})
	sb := &sandbox{opts: e.opts, log: e.log, dirs: dirs, cg: pr.cg, name: cgroupName("thread-test")}
	if err := sb.openCgroup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.closeCgroup(context.Background()); err != nil {
			t.Error(err)
		}
	})

	// The step waits (bounded) for a file the test writes once the
	// starting thread is gone.
	script := `i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; [ -e go ] && echo went`
	p := sb.newStep(stepRun{step: shStep(validation.StepTest, script, time.Minute), timeout: time.Minute, maxOutput: 1 << 10})
	t.Cleanup(func() {
		if err := p.cleanup(ctx); err != nil {
			t.Error(err)
		}
	})
	if err := p.prepare(); err != nil {
		t.Fatal(err)
	}
	stepCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	threadtest.StartOnEndingThread(t, func() error { return p.start(stop) })
	if err := os.WriteFile(filepath.Join(dirs.Workspace, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = p.collect(ctx, stepCtx, p.wait(stepCtx))
	if err != nil {
		t.Fatalf("the step failed once the thread that started it ended: %v", err)
	}
	wantStatus(t, p.res, validation.StatusPassed)
	if !strings.Contains(p.res.Output.Head, "went") {
		t.Fatalf("output %q", p.res.Output.Head)
	}
}
