package cmdrun

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

// StopReason says why the host stopped the command, if it did.
type StopReason int

const (
	StopNone        StopReason = iota // the command ended on its own
	StopCancel                        // the caller's ctx ended
	StopTimeout                       // the command outlived its whole budget
	StopStepTimeout                   // a step outlived its timeout plus the step grace
)

// Spec is one run of the command as a process group.
type Spec struct {
	Argv           []string
	Env            []string
	Dir            string
	Stdout, Stderr io.Writer
	// Timeout bounds the whole run; KillGrace is the time between SIGTERM
	// and SIGKILL, and the wait for the output pipes after the leader
	// exited; StepGrace is how long past a step's timeout the host waits
	// for its END marker.
	Timeout   time.Duration
	KillGrace time.Duration
	StepGrace time.Duration
	Plan      validation.Plan
	// Events are the observer's marker events (Observer.Events).
	Events   <-chan MarkerEvent
	Progress func(step string, started time.Time)
}

// Result is how the process group ended.
type Result struct {
	StartErr error
	WaitErr  error
	Stop     StopReason
	StopStep int // plan index of the step that timed out (StopStepTimeout)
	KillErr  error
}

// Run runs spec.Argv in its own process group and returns when the
// leader has been reaped and the group killed. It owns one goroutine (the
// Wait), which has returned by the time Run returns, in every
// outcome, a panic in spec.Progress included.
//
// Stopping is a tree kill: SIGTERM to the group, spec.KillGrace, then
// SIGKILL to the group. cmd.WaitDelay bounds the wait for the output
// pipes, so a grandchild that left the group while holding them cannot
// hang Wait. After the leader exits the group is SIGKILLed regardless: a
// backgrounded process does not outlive the run.
func Run(ctx context.Context, spec Spec) (res Result) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = spec.KillGrace
	if err := cmd.Start(); err != nil {
		res.StartErr = err
		return res
	}
	pgid := cmd.Process.Pid
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited { // a panic in progress: stop everything before unwinding
			res.KillErr = errors.Join(res.KillErr, killGroup(pgid, syscall.SIGKILL))
			<-waitDone
		}
		res.KillErr = errors.Join(res.KillErr, killGroup(pgid, syscall.SIGKILL))
	}()

	deadline := time.NewTimer(spec.Timeout)
	defer deadline.Stop()
	stepTimer := time.NewTimer(time.Hour)
	stepTimer.Stop()
	defer stepTimer.Stop()
	var hardKill <-chan time.Time
	timedStep := -1
	ctxDone := ctx.Done()
	stop := func(why StopReason) {
		if res.Stop != StopNone {
			return
		}
		res.Stop = why
		res.KillErr = errors.Join(res.KillErr, killGroup(pgid, syscall.SIGTERM))
		hardKill = time.After(spec.KillGrace)
		ctxDone = nil // a done ctx would otherwise be selected forever
	}
	for {
		select {
		case ev := <-spec.Events:
			if res.Stop != StopNone {
				continue
			}
			st := spec.Plan.Steps[ev.Step]
			if ev.Start {
				if spec.Progress != nil {
					spec.Progress(st.Name, ev.At)
				}
				if st.Timeout > 0 {
					timedStep = ev.Step
					stepTimer.Reset(st.Timeout + spec.StepGrace)
				}
			} else if ev.Step == timedStep {
				stepTimer.Stop()
				timedStep = -1
			}
		case <-stepTimer.C:
			if timedStep >= 0 && res.Stop == StopNone {
				res.StopStep = timedStep
				stop(StopStepTimeout)
			}
		case <-deadline.C:
			stop(StopTimeout)
		case <-ctxDone:
			stop(StopCancel)
		case <-hardKill:
			hardKill = nil
			res.KillErr = errors.Join(res.KillErr, killGroup(pgid, syscall.SIGKILL))
		case err := <-waitDone:
			waited = true
			res.WaitErr = err
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

// ExitStatus describes how the leader ended: its exit code, or -1 and
// the signal that killed it.
func ExitStatus(waitErr error) (code int, signal string, ok bool) {
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
