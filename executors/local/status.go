package local

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

// Why the executor stopped a step before it ended by itself; the cause of
// the step's context.
var (
	errStepTimeout   = errors.New("step timeout")
	errOutputCeiling = errors.New("output ceiling")
	errRunCancelled  = errors.New("run cancelled")
)

// observation is what the host saw of one finished step.
type observation struct {
	// stopped is why the executor stopped the step (errStepTimeout,
	// errOutputCeiling, errRunCancelled), nil when it ended by itself.
	stopped error
	state   *os.ProcessState
	// oomKills and pidsHits come from the step cgroup (zero without one).
	oomKills int64
	pidsHits int64
	limits   Limits
	timeout  time.Duration
	// maxStream is the output ceiling in force.
	maxStream int64
	// sandboxed says the process waited for is bwrap, not the step's own
	// command (tier none): nothing inside the sandbox can signal it.
	sandboxed bool
}

// verdict is how a step ended, for its StepResult.
type verdict struct {
	status   validation.Status
	exitCode *int
	signal   string
	reason   string
	// external says bwrap itself was killed by a signal that no limit
	// of gilf's sent (not the timeout, the output ceiling, cancellation
	// or the memory cgroup): someone outside the sandbox killed it. That
	// is gilf's infrastructure failure, never the pull request's.
	external bool
}

// classify turns what the host saw into a step status. The host's wait
// status is the authority: nothing the step printed is consulted. bwrap
// reports a command killed by signal N as exit code 128+N, so a signal is
// named only when the host saw it itself or the cgroup says the kernel's
// OOM killer acted.
func classify(o observation) verdict {
	var v verdict
	if o.state != nil {
		if ws, ok := o.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			v.signal = unix.SignalName(ws.Signal())
		} else {
			code := o.state.ExitCode()
			v.exitCode = &code
		}
	}
	switch {
	case errors.Is(o.stopped, errStepTimeout):
		v.status = validation.StatusTimedOut
		v.reason = fmt.Sprintf("exceeded the step timeout of %s; every process of the step was killed", o.timeout)
	case errors.Is(o.stopped, errOutputCeiling):
		v.status = validation.StatusKilled
		v.reason = fmt.Sprintf("printed more than the output ceiling of %d bytes; the step was killed", o.maxStream)
	case errors.Is(o.stopped, errRunCancelled):
		v.status = validation.StatusKilled
		v.reason = "the run was cancelled; every process of the step was killed"
	case o.oomKills > 0 && (v.exitCode == nil || *v.exitCode != 0):
		v.status = validation.StatusKilled
		if v.signal == "" {
			v.signal = "SIGKILL"
		}
		v.reason = fmt.Sprintf("killed by the memory limit of %d bytes (%d OOM kill(s) in the step's cgroup)", o.limits.MemoryBytes, o.oomKills)
	case v.signal != "":
		v.status = validation.StatusKilled
		v.external = o.sandboxed
	case v.exitCode != nil && *v.exitCode == 0:
		v.status = validation.StatusPassed
		if o.oomKills > 0 {
			v.reason = fmt.Sprintf("exited 0, but %d process(es) were killed by the memory limit of %d bytes", o.oomKills, o.limits.MemoryBytes)
		}
	default:
		v.status = validation.StatusFailed
		if v.exitCode == nil {
			// No wait status at all: never a pass.
			v.reason = "no exit status was observed"
		}
	}
	if o.pidsHits > 0 && v.status != validation.StatusPassed {
		r := fmt.Sprintf("the pids limit of %d refused %d fork(s)", o.limits.Pids, o.pidsHits)
		if v.reason == "" {
			v.reason = r
		} else {
			v.reason += "; " + r
		}
	}
	return v
}
