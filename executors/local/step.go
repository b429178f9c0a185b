package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors/internal/descriptors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/ownthread"
	"github.com/gilf-review/gilf/validation"
)

// sandbox is what the steps of one run share.
type sandbox struct {
	opts Options
	log  *slog.Logger
	dirs runDirs
	// direct runs steps without bwrap (tier none: process hardening only).
	direct bool
	// cg is where the run's cgroup is made; version cgroupNone for none.
	cg cgroupHost
	// cgroup is the run's cgroup (nil without cgroups): the steps run in
	// it one after another, and it is empty between steps.
	cgroup  *stepCgroup
	secrets []validation.Secret
	// name names the run's cgroup.
	name string
	// denyDirs and denyFiles split Options.DenyRead (see Paths).
	denyDirs  []string
	denyFiles []string
	// tool is the host directory of the plan's package manager ("" for
	// none: the worker's own).
	tool string
	// manager is the plan's package manager ("" for none), whose own
	// cache an install step is seeded for.
	manager validation.PackageManager
	// ca says the run's etc holds the CA bundle.
	ca bool
	// env are the run's own additions to the step environment, with
	// sandbox paths; caPath marks values that name SandboxCAFile.
	env map[string]string
	// repoEnv is the plan's Env (Paths.RepoEnv).
	repoEnv map[string]string
	// up is the executor's shared pool of registry connections.
	up *egress.Upstreams
}

// stepRun is one execution of one step.
type stepRun struct {
	step      validation.Step
	timeout   time.Duration
	maxOutput int
}

// runStep runs one step to its end and returns its result. An error is an
// infrastructure failure (the sandbox could not be set up or cleaned up);
// the step's own failures are in the result. Every process of the step is
// dead when runStep returns, in every outcome.
//
// A step goes through five phases, each a method of stepProc: prepare
// (its proxy, the output pipe, the process and the descriptors it is
// handed), start (the process started, placed in its cgroup, its output
// read), wait (until it ends, or its timeout, output ceiling or the run's
// cancellation stops it), collect (its output, status and proofs) and
// clean up (its process group and cgroup killed, its proxy stopped), which
// runs in every outcome.
func (s *sandbox) runStep(ctx context.Context, sr stepRun) (res validation.StepResult, err error) {
	p := s.newStep(sr)
	defer func() {
		err = errors.Join(err, p.cleanup(ctx))
		res = p.res
	}()
	if err := p.prepare(); err != nil {
		return p.res, err
	}
	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stepCtx, cancelTimeout := context.WithTimeoutCause(stepCtx, sr.timeout, errStepTimeout)
	defer cancelTimeout()
	if err := p.start(cancel); err != nil {
		return p.res, err
	}
	waitErr := p.wait(stepCtx)
	return p.res, p.collect(ctx, stepCtx, waitErr)
}

// stepProc is one step's process through its phases (see runStep).
type stepProc struct {
	s   *sandbox
	sr  stepRun
	res validation.StepResult
	// proxy is the install step's proxy, nil for any other step.
	proxy *stepProxy
	// cg is the run's cgroup (nil without); oom0 and pids0 its counters
	// before the step, whose own are the deltas.
	cg          *stepCgroup
	oom0, pids0 int64
	outR, outW  *os.File
	cmd         *exec.Cmd
	hs          *handshake
	// waited receives cmd.Wait's result from the thread that started
	// cmd; nil before the start and once received.
	waited  <-chan error
	started time.Time
	// innerPid is the pid placed in the cgroup (the sandbox's init, or
	// the direct-mode shim); 0 without placement.
	innerPid int
	stream   chan streamed
	ready    <-chan []byte
}

// newStep is a step not yet prepared, its result what is known before it
// runs.
func (s *sandbox) newStep(sr stepRun) *stepProc {
	net := stepNetwork(sr.step)
	if s.direct {
		net = validation.NetworkHost // no network namespace in tier none
	}
	res := validation.StepResult{
		Name:      sr.step.Name,
		Argv:      slices.Clone(sr.step.Argv),
		Cwd:       SandboxWorkspace,
		TimeoutMs: sr.timeout.Milliseconds(),
		Network:   net,
	}
	switch net {
	case validation.NetworkHost:
		res.Cwd = s.dirs.Workspace
		res.Egress = hostNetwork()
	case validation.NetworkNone:
		res.Egress = noNetwork()
	}
	return &stepProc{s: s, sr: sr, res: res, cg: s.cgroup}
}

// prepare starts the install step's proxy (it serves before the sandbox
// exists), notes the cgroup's counters (the run's cgroup exists before
// any process does; its counters are cumulative) and builds the step's
// process with its output pipe.
func (p *stepProc) prepare() error {
	if len(p.sr.step.Argv) == 0 {
		return errors.New("step has no command")
	}
	if p.res.Network == validation.NetworkRegistry {
		proxy, err := p.s.startProxy(p.s.log)
		if err != nil {
			return fmt.Errorf("step %s: %w", p.sr.step.Name, err)
		}
		p.proxy = proxy
	}
	if p.cg != nil {
		p.oom0, p.pids0 = p.cg.oomKills(), p.cg.pidsMaxHits()
	}
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return fmt.Errorf("output pipe: %w", err)
	}
	p.cmd, p.hs, err = p.s.command(p.sr, p.cg, p.outW, p.proxy)
	return err
}

// start starts the step's process from a thread of its own, reads its
// output and places it in its cgroup. The process's parent-death signal
// is its forking thread's end: forked from whichever thread the caller
// ran on, it would die mid-step once the runtime handed that thread to a
// goroutine that ends it (a tier-none step's start does, on purpose).
// stopStep ends the step early (its output ceiling).
func (p *stepProc) start(stopStep context.CancelCauseFunc) error {
	if err := cloexecInherited(); err != nil {
		return err
	}
	p.started = time.Now()
	var setup func() error
	if p.s.direct {
		setup = setNoNewPrivs // bwrap sets it for sandboxed steps
	}
	waited, err := ownthread.StartWith(p.cmd, setup)
	if err != nil {
		return fmt.Errorf("start step %s: %w", p.sr.step.Name, err)
	}
	p.waited = waited
	p.outW.Close()
	p.outW = nil
	p.hs.closeChildEnds()
	p.stream = make(chan streamed, 1)
	go func() {
		p.stream <- readStream(p.outR, p.sr.maxOutput, p.s.opts.MaxStreamBytes, p.s.secrets, func() { stopStep(errOutputCeiling) })
	}()
	p.ready = p.hs.watchReady()
	p.hs.watchProof()
	if !p.hs.active() {
		return nil
	}
	if p.innerPid, err = p.hs.place(p.cg, p.cmd.Process.Pid); err != nil {
		// The step never ran anything: an infrastructure failure.
		killGroup(p.cmd.Process.Pid, p.cg, unix.SIGKILL)
		werr := <-p.waited
		p.waited = nil
		out := collect(p.outR, p.stream)
		return &SetupError{Step: p.sr.step.Name, Cause: fmt.Errorf("%w (exit: %v; output: %q)", err, werr, firstLine(out.Head))}
	}
	return nil
}

// setNoNewPrivs sets no_new_privs on the calling thread, and so on what
// it forks (tier none: no setuid or file-capability binary gives the step
// more than the sandbox uid has). The thread must run nothing else after:
// ownthread ends it once the step has exited.
func setNoNewPrivs() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// wait waits until the step's process has exited, and stops it when
// stepCtx ends first: SIGTERM, then after KillGrace SIGKILL. It returns
// cmd.Wait's result.
func (p *stepProc) wait(stepCtx context.Context) error {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-done:
			return
		case <-stepCtx.Done():
		}
		p.terminate()
		select {
		case <-done:
		case <-time.After(p.s.opts.KillGrace):
			killGroup(p.cmd.Process.Pid, p.cg, unix.SIGKILL)
		}
	}()
	waitErr := <-p.waited
	p.waited = nil
	p.res.Duration = time.Since(p.started)
	p.res.DurationMs = p.res.Duration.Milliseconds()
	close(done)
	<-stopped
	return waitErr
}

// terminate sends a stopped step SIGTERM: to its own processes when the
// cgroup lists them (bwrap itself would take the whole namespace down at
// once), else to bwrap's process group.
func (p *stepProc) terminate() {
	pid := p.cmd.Process.Pid
	if p.cg == nil {
		killGroup(pid, nil, unix.SIGTERM)
		return
	}
	// Not bwrap, nor the sandbox's init (on cgroup v2 found as bwrap's
	// child): either one dying ends the namespace.
	skip := append([]int{pid, p.innerPid}, childrenOf(pid)...)
	if err := p.cg.signal(unix.SIGTERM, skip...); err != nil {
		killGroup(pid, nil, unix.SIGTERM)
	}
}

// collect reads the rest of the step's output and fills its result:
// status from the host's wait status and gilf's own counters, output, and
// the checks that it ran where it should have (the bridge listened, the
// proof holds). An error is gilf's failure, never the step's.
func (p *stepProc) collect(ctx, stepCtx context.Context, waitErr error) (err error) {
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		err = fmt.Errorf("wait step %s: %w", p.sr.step.Name, waitErr)
	}
	// Everything left (a daemon that left the process group) is killed
	// now, so the output pipe can reach its end; the end of the output
	// is when the last of them died. cleanup's cg.kill then finds the
	// cgroup empty, or waits until it is.
	killGroup(p.cmd.Process.Pid, p.cg, unix.SIGKILL)
	out := collect(p.outR, p.stream)
	o := p.observe(ctx, stepCtx)
	v := classify(o)
	p.res.Status, p.res.ExitCode, p.res.Signal, p.res.Reason = v.status, v.exitCode, v.signal, v.reason
	if v.external {
		err = errors.Join(err, fmt.Errorf("step %s: bwrap was killed by %s from outside the sandbox, not by a limit gilf set", p.sr.step.Name, v.signal))
	}
	p.res.Output = out.Output
	if out.err != nil {
		err = errors.Join(err, fmt.Errorf("read output of step %s: %w", p.sr.step.Name, out.err))
	}
	if p.ready != nil && !bridgeReady(p.ready) && o.stopped == nil {
		// The bridge never listened, so the step never ran: gilf's own
		// failure, never the pull request's.
		err = errors.Join(err, &SetupError{Step: p.sr.step.Name, Cause: fmt.Errorf("the egress bridge did not start (exit: %v; output: %q)",
			waitErr, firstLine(out.Head))})
	}
	if p.hs.proof != nil && !errors.Is(o.stopped, errRunCancelled) {
		// Whatever the exit status: a step that did not prove it ran
		// in its sandbox did not run there.
		if perr := p.hs.proof.check(); perr != nil {
			err = errors.Join(err, &SetupError{Step: p.sr.step.Name, Cause: fmt.Errorf("%w (exit: %v; output: %q)", perr, waitErr, firstLine(out.Head))})
		}
	}
	if out.drainCut {
		p.res.Reason = joinReason(p.res.Reason, fmt.Sprintf("output was still open %s after the step ended and was cut", OutputDrainTimeout))
	}
	return err
}

// observe is what classify judges the ended step by.
func (p *stepProc) observe(ctx, stepCtx context.Context) observation {
	o := observation{
		state:     p.cmd.ProcessState,
		limits:    p.s.opts.Limits,
		timeout:   p.sr.timeout,
		maxStream: p.s.opts.MaxStreamBytes,
		sandboxed: !p.s.direct,
	}
	if c := context.Cause(stepCtx); c != nil && stepCtx.Err() != nil {
		switch {
		case errors.Is(c, errStepTimeout), errors.Is(c, errOutputCeiling):
			o.stopped = c
		case ctx.Err() != nil:
			o.stopped = errRunCancelled
		}
	}
	if p.cg != nil {
		o.oomKills = p.cg.oomKills() - p.oom0
		o.pidsHits = p.cg.pidsMaxHits() - p.pids0
	}
	return o
}

// cleanup ends what prepare and start made, in every outcome and in
// reverse: the process group killed (and reaped), the descriptors closed,
// the cgroup emptied, the proxy stopped with every tunnel it holds (its
// report is the step's egress record).
func (p *stepProc) cleanup(ctx context.Context) (err error) {
	name := p.sr.step.Name
	if p.cmd != nil && p.cmd.Process != nil {
		// ESRCH: the group is already gone.
		if kerr := unix.Kill(-p.cmd.Process.Pid, unix.SIGKILL); kerr != nil && !errors.Is(kerr, unix.ESRCH) {
			err = fmt.Errorf("kill step %s: %w", name, kerr)
		}
	}
	if p.hs != nil {
		p.hs.closeAll()
	}
	for _, f := range []*os.File{p.outW, p.outR} {
		if f != nil {
			f.Close()
		}
	}
	if p.cg != nil {
		// Whatever happened, the cgroup is empty when the step ends.
		if kerr := p.cg.kill(context.WithoutCancel(ctx), false); kerr != nil {
			err = errors.Join(err, fmt.Errorf("step %s cleanup: %w", name, kerr))
		}
	}
	if p.proxy != nil {
		rec, perr := p.proxy.stop()
		if rec != nil {
			p.res.Egress = rec
		}
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("step %s: %w", name, perr))
		}
	}
	return err
}

// openCgroup makes the run's cgroup, with the limits when the host allows
// them. The freezer is joined only in direct mode: in a sandbox, killing
// its init kills the whole pid namespace at once.
func (s *sandbox) openCgroup() error {
	if s.cg.version == cgroupNone {
		return nil
	}
	cg, err := s.cg.create(s.name, s.opts.Limits, s.direct)
	if err != nil {
		return fmt.Errorf("run cgroup: %w", err)
	}
	s.cgroup = cg
	return nil
}

// closeCgroup kills whatever is left in the run's cgroup and removes it.
func (s *sandbox) closeCgroup(ctx context.Context) error {
	if s.cgroup == nil {
		return nil
	}
	kerr := s.cgroup.kill(ctx, true)
	rerr := s.cgroup.remove()
	s.cgroup = nil
	if err := errors.Join(kerr, rerr); err != nil {
		return fmt.Errorf("run cgroup cleanup: %w", err)
	}
	return nil
}

// killGroup signals a step's process group and, for SIGKILL, its cgroup.
func killGroup(pgid int, cg *stepCgroup, sig syscall.Signal) {
	// Errors are ESRCH (already gone) or EPERM (not ours): neither
	// leaves one of the step's processes alive that the cgroup kill and
	// bwrap's pid namespace do not catch.
	if err := unix.Kill(-pgid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return
	}
	if cg != nil && sig == unix.SIGKILL {
		// Best effort here; runStep's final cg.kill reports failures.
		if err := cg.signal(unix.SIGKILL); err != nil {
			return
		}
	}
}

// growPipe asks for a PipeBufferBytes pipe buffer; where the host refuses,
// the default buffer still works, only slower. The reader calls it once a
// read fills the default buffer: most steps print little, and the larger
// buffer costs its allocation.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// The kernel caps the size at /proc/sys/fs/pipe-max-size for
	// unprivileged callers; a refusal is not an error worth failing on.
	if cerr := rc.Control(func(fd uintptr) {
		if _, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, PipeBufferBytes); err != nil {
			return
		}
	}); cerr != nil {
		return
	}
}

// lookPath finds prog in the colon-separated dirs of path (not the
// worker's PATH).
func lookPath(prog, path string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", prog, path)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// cloexecInherited marks every descriptor of the worker above stderr
// close-on-exec: bwrap hands every open descriptor on to the sandbox.
func cloexecInherited() error { return descriptors.CloseOnExecFrom(3) }

// childrenOf lists pid's children; empty when the kernel does not say.
func childrenOf(pid int) []int {
	p := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}
