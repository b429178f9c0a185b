package crabbox

// This file mirrors executors/selfhost/process.go: both executors run one
// marker shell through a local process (edge packages do not import each
// other). Keep them in step.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// stopReason says why the host stopped the command, if it did.
type stopReason int

const (
	stopNone        stopReason = iota
	stopCancel                 // the caller's ctx ended
	stopTimeout                // the command outlived its whole budget
	stopStepTimeout            // a step outlived its timeout plus the step grace
)

// procSpec is one run of the command as a process group.
type procSpec struct {
	argv           []string
	env            []string
	dir            string
	stdout, stderr io.Writer
	timeout        time.Duration
	killGrace      time.Duration
	stepGrace      time.Duration
	plan           validation.Plan
	events         <-chan markerEvent
	progress       func(step string, started time.Time)
}

// procResult is how the process group ended.
type procResult struct {
	startErr error
	waitErr  error
	stop     stopReason
	stopStep int // plan index of the step that timed out (stopStepTimeout)
	killErr  error
}

// runProcess runs spec.argv in its own process group and returns when the
// leader has been reaped and the group killed. It owns one goroutine (the
// Wait), which has returned by the time runProcess returns, in every
// outcome, a panic in spec.progress included.
//
// Stopping is a tree kill: SIGTERM to the group, spec.killGrace, then
// SIGKILL to the group. cmd.WaitDelay bounds the wait for the output
// pipes, so a grandchild that left the group while holding them cannot
// hang Wait. After the leader exits the group is SIGKILLed regardless: a
// backgrounded process does not outlive the run.
func runProcess(ctx context.Context, spec procSpec) (res procResult) {
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = spec.stdout, spec.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = spec.killGrace
	if err := cmd.Start(); err != nil {
		res.startErr = err
		return res
	}
	pgid := cmd.Process.Pid
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited { // a panic in progress: stop everything before unwinding
			res.killErr = errors.Join(res.killErr, killGroup(pgid, syscall.SIGKILL))
			<-waitDone
		}
		res.killErr = errors.Join(res.killErr, killGroup(pgid, syscall.SIGKILL))
	}()

	deadline := time.NewTimer(spec.timeout)
	defer deadline.Stop()
	stepTimer := time.NewTimer(time.Hour)
	stepTimer.Stop()
	defer stepTimer.Stop()
	var hardKill <-chan time.Time
	timedStep := -1
	ctxDone := ctx.Done()
	stop := func(why stopReason) {
		if res.stop != stopNone {
			return
		}
		res.stop = why
		res.killErr = errors.Join(res.killErr, killGroup(pgid, syscall.SIGTERM))
		hardKill = time.After(spec.killGrace)
		ctxDone = nil // a done ctx would otherwise be selected forever
	}
	for {
		select {
		case ev := <-spec.events:
			if res.stop != stopNone {
				continue
			}
			st := spec.plan.Steps[ev.step]
			if ev.start {
				if spec.progress != nil {
					spec.progress(st.Name, ev.at)
				}
				if st.Timeout > 0 {
					timedStep = ev.step
					stepTimer.Reset(st.Timeout + spec.stepGrace)
				}
			} else if ev.step == timedStep {
				stepTimer.Stop()
				timedStep = -1
			}
		case <-stepTimer.C:
			if timedStep >= 0 && res.stop == stopNone {
				res.stopStep = timedStep
				stop(stopStepTimeout)
			}
		case <-deadline.C:
			stop(stopTimeout)
		case <-ctxDone:
			stop(stopCancel)
		case <-hardKill:
			hardKill = nil
			res.killErr = errors.Join(res.killErr, killGroup(pgid, syscall.SIGKILL))
		case err := <-waitDone:
			waited = true
			res.waitErr = err
			return res
		}
	}
}

// killGroup signals the process group pgid; a group that is already gone
// is not an error.
func killGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d with %s: %w", pgid, sig, err)
	}
	return nil
}

// exitStatus describes how the leader ended: its exit code, or -1 and
// the signal that killed it.
func exitStatus(waitErr error) (code int, signal string, ok bool) {
	if waitErr == nil || errors.Is(waitErr, exec.ErrWaitDelay) {
		// ErrWaitDelay: the leader exited 0 but something kept its
		// output open past the grace; the caller notes it.
		return 0, "", true
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		return 0, "", false
	}
	if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS && ws.Signaled() {
		return -1, ws.Signal().String(), true
	}
	return ee.ExitCode(), "", true
}
