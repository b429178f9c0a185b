package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors/internal/descriptors"
	"github.com/gilf-review/gilf/executors/local/egress"
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
func (s *sandbox) runStep(ctx context.Context, sr stepRun) (res validation.StepResult, err error) {
	net := stepNetwork(sr.step)
	if s.direct {
		net = validation.NetworkHost // no network namespace in tier none
	}
	res = validation.StepResult{
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
	if len(sr.step.Argv) == 0 {
		return res, errors.New("step has no command")
	}

	// The install step's proxy serves before the sandbox exists and is
	// stopped, with every tunnel it holds, once the step's processes are
	// gone; its report is the step's egress record.
	var proxy *stepProxy
	if net == validation.NetworkRegistry {
		proxy, err = s.startProxy(s.log)
		if err != nil {
			return res, fmt.Errorf("step %s: %w", sr.step.Name, err)
		}
		defer func() {
			rec, perr := proxy.stop()
			if rec != nil {
				res.Egress = rec
			}
			if perr != nil {
				err = errors.Join(err, fmt.Errorf("step %s: %w", sr.step.Name, perr))
			}
		}()
	}

	// The run's cgroup, when there is one, exists before any process
	// does; its counters are cumulative, so the step's are deltas.
	cg := s.cgroup
	var oom0, pids0 int64
	if cg != nil {
		oom0, pids0 = cg.oomKills(), cg.pidsMaxHits()
		// Whatever happens below, the cgroup is empty when the step
		// ends.
		defer func() {
			if kerr := cg.kill(context.WithoutCancel(ctx), false); kerr != nil {
				err = errors.Join(err, fmt.Errorf("step %s cleanup: %w", sr.step.Name, kerr))
			}
		}()
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("output pipe: %w", err)
	}
	defer outR.Close()

	cmd, handshake, err := s.command(sr, cg, outW, proxy)
	if err != nil {
		outW.Close()
		return res, err
	}
	defer handshake.closeAll()

	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stepCtx, cancelTimeout := context.WithTimeoutCause(stepCtx, sr.timeout, errStepTimeout)
	defer cancelTimeout()

	if err := cloexecInherited(); err != nil {
		outW.Close()
		return res, err
	}
	started := time.Now()
	start := cmd.Start
	if s.direct {
		start = func() error { return startNoNewPrivs(ctx, cmd) }
	}
	if err := start(); err != nil {
		outW.Close()
		return res, fmt.Errorf("start step %s: %w", sr.step.Name, err)
	}
	pgid := cmd.Process.Pid
	outW.Close()
	handshake.closeChildEnds()
	// From here on the whole process group and cgroup are killed in
	// every outcome, before the cgroup is removed (deferred above).
	defer func() {
		// ESRCH: the group is already gone.
		if kerr := unix.Kill(-pgid, unix.SIGKILL); kerr != nil && !errors.Is(kerr, unix.ESRCH) {
			err = errors.Join(err, fmt.Errorf("kill step %s: %w", sr.step.Name, kerr))
		}
	}()

	stream := make(chan streamed, 1)
	go func() {
		stream <- readStream(outR, sr.maxOutput, s.opts.MaxStreamBytes, s.secrets, func() { cancel(errOutputCeiling) })
	}()
	ready := handshake.watchReady()
	handshake.watchProof()

	var innerPid int
	if handshake.active() {
		innerPid, err = handshake.place(cg, cmd.Process.Pid)
		if err != nil {
			// The step never ran anything: an infrastructure failure.
			killGroup(pgid, cg, unix.SIGKILL)
			werr := cmd.Wait()
			out := collect(outR, stream)
			return res, &SetupError{Step: sr.step.Name, Cause: fmt.Errorf("%w (exit: %v; output: %q)", err, werr, firstLine(out.Head))}
		}
	}

	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-done:
			return
		case <-stepCtx.Done():
		}
		// SIGTERM first: to the step's own processes when the cgroup
		// lists them (bwrap itself would take the whole namespace
		// down at once), else to bwrap's process group.
		if cg != nil {
			// Not bwrap, nor the sandbox's init (on cgroup v2 found as
			// bwrap's child): either one dying ends the namespace.
			skip := append([]int{cmd.Process.Pid, innerPid}, childrenOf(cmd.Process.Pid)...)
			if serr := cg.signal(unix.SIGTERM, skip...); serr != nil {
				killGroup(pgid, nil, unix.SIGTERM)
			}
		} else {
			killGroup(pgid, nil, unix.SIGTERM)
		}
		select {
		case <-done:
		case <-time.After(s.opts.KillGrace):
			killGroup(pgid, cg, unix.SIGKILL)
		}
	}()

	waitErr := cmd.Wait()
	res.Duration = time.Since(started)
	res.DurationMs = res.Duration.Milliseconds()
	close(done)
	<-stopped
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		err = errors.Join(err, fmt.Errorf("wait step %s: %w", sr.step.Name, waitErr))
	}
	// Everything left (a daemon that left the process group) is killed
	// now, so the output pipe can reach its end; the end of the output
	// is when the last of them died. The deferred cg.kill then finds the
	// cgroup empty, or waits until it is.
	killGroup(pgid, cg, unix.SIGKILL)
	out := collect(outR, stream)

	o := observation{
		state:     cmd.ProcessState,
		limits:    s.opts.Limits,
		timeout:   sr.timeout,
		maxStream: s.opts.MaxStreamBytes,
		sandboxed: !s.direct,
	}
	if c := context.Cause(stepCtx); c != nil && stepCtx.Err() != nil {
		switch {
		case errors.Is(c, errStepTimeout), errors.Is(c, errOutputCeiling):
			o.stopped = c
		case ctx.Err() != nil:
			o.stopped = errRunCancelled
		}
	}
	if cg != nil {
		o.oomKills = cg.oomKills() - oom0
		o.pidsHits = cg.pidsMaxHits() - pids0
	}
	v := classify(o)
	res.Status, res.ExitCode, res.Signal, res.Reason = v.status, v.exitCode, v.signal, v.reason
	if v.external {
		err = errors.Join(err, fmt.Errorf("step %s: bwrap was killed by %s from outside the sandbox, not by a limit gilf set", sr.step.Name, v.signal))
	}
	res.Output = out.Output
	if out.err != nil {
		err = errors.Join(err, fmt.Errorf("read output of step %s: %w", sr.step.Name, out.err))
	}
	if ready != nil && !bridgeReady(ready) && o.stopped == nil {
		// The bridge never listened, so the step never ran: gilf's own
		// failure, never the pull request's.
		err = errors.Join(err, &SetupError{Step: sr.step.Name, Cause: fmt.Errorf("the egress bridge did not start (exit: %v; output: %q)",
			waitErr, firstLine(out.Head))})
	}
	if handshake.proof != nil && !errors.Is(o.stopped, errRunCancelled) {
		// Whatever the exit status: a step that did not prove it ran
		// in its sandbox did not run there.
		if perr := handshake.proof.check(); perr != nil {
			err = errors.Join(err, &SetupError{Step: sr.step.Name, Cause: fmt.Errorf("%w (exit: %v; output: %q)", perr, waitErr, firstLine(out.Head))})
		}
	}
	if out.drainCut {
		res.Reason = joinReason(res.Reason, fmt.Sprintf("output was still open %s after the step ended and was cut", OutputDrainTimeout))
	}
	return res, err
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

// command builds the process of one step: bwrap (with the seccomp
// filter), or in direct mode the step's own argv, as the sandbox uid, in
// its own process group, with nothing of the worker's environment.
func (s *sandbox) command(sr stepRun, cg *stepCgroup, out *os.File, proxy *stepProxy) (*exec.Cmd, *handshake, error) {
	hs := &handshake{}
	// ExtraFiles[i] is the child's descriptor 3+i.
	var extra []*os.File
	add := func(f *os.File) int {
		extra = append(extra, f)
		return 2 + len(extra)
	}
	attr := &syscall.SysProcAttr{
		Credential: &syscall.Credential{
			Uid:    s.opts.SandboxUID,
			Gid:    s.opts.SandboxGID,
			Groups: []uint32{},
		},
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	var argv []string
	var env []string
	dir := s.dirs.Workspace
	if s.direct {
		e := s.opts.stepEnv(s.repoEnv)
		e["HOME"], e["TMPDIR"] = s.dirs.Home, s.dirs.Tmp
		if s.tool != "" {
			e["PATH"] = s.tool + "/bin:" + e["PATH"]
		}
		maps.Copy(e, s.env)
		if s.ca {
			host := filepath.Join(s.dirs.Etc, caEtcName)
			maps.Copy(e, caEnv(host))
			for k, v := range e {
				if v == SandboxCAFile {
					e[k] = host
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(e)) {
			env = append(env, k+"="+e[k])
		}
		prog, err := lookPath(sr.step.Argv[0], e["PATH"])
		if err != nil {
			return nil, nil, fmt.Errorf("step %s: %w", sr.step.Name, err)
		}
		argv = append([]string{prog}, sr.step.Argv[1:]...)
		if cg != nil && cg.version == cgroupV1 {
			// Nothing holds a plain process before it runs: a fixed
			// shim waits on descriptor 3 until it is in the cgroup,
			// then execs the step's argv (never a shell string).
			if err := hs.open(false); err != nil {
				return nil, nil, err
			}
			add(hs.blockR)
			argv = append([]string{"/bin/sh", "-c", directShim, "gilf-shim"}, argv...)
		}
	} else {
		paths := Paths{
			Workspace: s.dirs.Workspace,
			Home:      s.dirs.Home,
			Tmp:       s.dirs.Tmp,
			Etc:       s.dirs.Etc,
			Shm:       s.dirs.Shm,
			DenyDirs:  s.denyDirs,
			DenyFiles: s.denyFiles,
			Tool:      s.tool,
			CA:        s.ca,
			Env:       s.env,
			RepoEnv:   s.repoEnv,
		}
		if cg != nil && cg.version == cgroupV1 {
			if err := hs.open(true); err != nil {
				return nil, nil, err
			}
			paths.InfoFD, paths.BlockFD = add(hs.infoW), add(hs.blockR)
			// bwrap goes on after EOF on --block-fd: a worker dying
			// before it placed the sandbox (or before bwrap's child set
			// its parent-death signal) would leave the step running
			// outside its cgroup. The guard runs the step only once the
			// worker says so, after placing it, and exits at EOF.
			if err := hs.openGuard(); err != nil {
				hs.closeAll()
				return nil, nil, err
			}
			paths.GuardFD = add(hs.guardR)
		}
		if hs.infoR == nil {
			// bwrap reports the sandbox it made: part of the proof.
			if err := hs.openInfo(); err != nil {
				hs.closeAll()
				return nil, nil, err
			}
			paths.InfoFD = add(hs.infoW)
		}
		hs.proof = &proof{}
		if err := hs.proof.open(); err != nil {
			hs.closeAll()
			return nil, nil, err
		}
		paths.TokenFD, paths.StartFD = add(hs.proof.tokenR), add(hs.proof.startW)
		if proxy != nil {
			if err := hs.openEgress(s.opts.Egress); err != nil {
				hs.closeAll()
				return nil, nil, err
			}
			bridge, err := os.Open(proxy.bridge)
			if err != nil {
				hs.closeAll()
				return nil, nil, fmt.Errorf("egress bridge binary: %w", err)
			}
			hs.bridge = bridge
			paths.Egress = &EgressPaths{SocketDir: proxy.dir, BridgeFD: add(bridge), ReadyFD: add(hs.readyW)}
		}
		// Every sandboxed step runs under the seccomp filter, or not
		// at all.
		f, err := seccompFile()
		if err != nil {
			hs.closeAll()
			return nil, nil, fmt.Errorf("step %s: %w", sr.step.Name, err)
		}
		hs.seccomp = f
		paths.SeccompFD = add(f)
		options, command := bwrapArgs(s.opts, sr.step, paths)
		af, err := argsFile(options)
		if err != nil {
			hs.closeAll()
			return nil, nil, err
		}
		hs.args = af
		argv = append([]string{s.opts.BwrapPath, "--args", strconv.Itoa(add(af)), "--"}, command...)
		env = []string{} // bwrap sets the step's environment itself
	}
	if cg != nil && cg.version == cgroupV2 {
		f, err := cg.fd()
		if err != nil {
			hs.closeAll()
			return nil, nil, err
		}
		hs.cgroupDir = f
		attr.UseCgroupFD = true
		attr.CgroupFD = int(f.Fd())
	}
	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         env,
		Dir:         dir,
		Stdout:      out,
		Stderr:      out,
		SysProcAttr: attr,
		WaitDelay:   s.opts.KillGrace,
		ExtraFiles:  extra,
	}
	return cmd, hs, nil
}

// startNoNewPrivs starts cmd with no_new_privs set (tier none: bwrap sets
// it for sandboxed steps): no setuid or file-capability binary gives the
// step more than the sandbox uid has. The flag is set on a thread of its
// own, locked, from which cmd is forked (a child inherits it from the
// thread that forks it); that thread is never given back: it waits until
// cmd has exited, then ends with its goroutine, so it is neither reused
// tainted nor gone while cmd runs (Pdeathsig is the forking thread's
// death). ctx's end lets it go too. (Were it the main thread, the runtime
// wedges it instead of ending it: it runs nothing again.)
func startNoNewPrivs(ctx context.Context, cmd *exec.Cmd) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			started <- fmt.Errorf("no_new_privs: %w", err)
			return
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitExited(ctx, cmd.Process.Pid)
	}()
	return <-started
}

// waitExited returns once pid has exited (a zombie or gone), or ctx ends;
// it does not reap it (cmd.Wait does).
func waitExited(ctx context.Context, pid int) {
	for ctx.Err() == nil {
		var info unix.Siginfo
		// WNOWAIT: look, leave the child for cmd.Wait.
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// directShim holds a direct-mode step until it is in its cgroup: it reads
// one line from descriptor 3, closes it and execs its arguments.
const directShim = `read -r _ <&3 || exit 126; exec 3<&-; exec "$@"`

// handshake holds the pipes with which a cgroup v1 step is placed in its
// cgroup before it runs anything: bwrap's --info-fd and --block-fd, or
// the block pipe of directShim; and the other descriptors one step's
// bwrap is handed (the bridge's ready pipe, the seccomp filter).
type handshake struct {
	infoR, infoW   *os.File
	blockR, blockW *os.File
	cgroupDir      *os.File
	// readyR/readyW are the pipe on which the bridge says it listens.
	// Install steps only.
	readyR, readyW *os.File
	// seccomp holds the filter bwrap reads (--seccomp); child only.
	seccomp *os.File
	// guardR/guardW are the pipe on which the worker lets a cgroup v1
	// step run once it is placed (startShim).
	guardR, guardW *os.File
	// args holds bwrap's options (--args); bridge is the bridge binary
	// bwrap copies into the sandbox. Child only.
	args, bridge *os.File
	// proof is the step's proof that it ran in its sandbox (bwrap
	// only).
	proof *proof
}

// openGuard opens the guard pipe.
func (h *handshake) openGuard() error {
	var err error
	if h.guardR, h.guardW, err = os.Pipe(); err != nil {
		return fmt.Errorf("guard pipe: %w", err)
	}
	return nil
}

// openEgress opens the ready pipe.
func (h *handshake) openEgress(EgressOptions) error {
	var err error
	if h.readyR, h.readyW, err = os.Pipe(); err != nil {
		return fmt.Errorf("egress ready pipe: %w", err)
	}
	return nil
}

// watchReady reads what the bridge says on the ready pipe, in the
// background; nil when the step has no bridge. The channel yields the
// bytes read up to EOF (the bridge closes its end before it starts the
// step, and nothing else holds it).
func (h *handshake) watchReady() <-chan []byte {
	if h.readyR == nil {
		return nil
	}
	return watchPipe(h.readyR, 64)
}

// bridgeReady reports whether the bridge said it listens.
func bridgeReady(ch <-chan []byte) bool { return string(drained(ch)) == "ready\n" }

// watchProof starts reading the step's proof (bwrap only).
func (h *handshake) watchProof() {
	if h.proof == nil {
		return
	}
	h.proof.started = watchPipe(h.proof.startR, proofMaxBytes)
	if h.infoR != nil && h.blockW == nil {
		h.proof.info = watchPipe(h.infoR, proofMaxBytes)
	}
}

func (h *handshake) open(info bool) error {
	var err error
	if info {
		if err := h.openInfo(); err != nil {
			return err
		}
	}
	if h.blockR, h.blockW, err = os.Pipe(); err != nil {
		h.closeAll()
		return fmt.Errorf("block pipe: %w", err)
	}
	return nil
}

// openInfo opens the pipe of bwrap's --info-fd.
func (h *handshake) openInfo() error {
	var err error
	if h.infoR, h.infoW, err = os.Pipe(); err != nil {
		return fmt.Errorf("info pipe: %w", err)
	}
	return nil
}

func (h *handshake) active() bool { return h.blockW != nil }

// closeChildEnds closes the descriptors only the child needs.
func (h *handshake) closeChildEnds() {
	child := []**os.File{&h.infoW, &h.blockR, &h.cgroupDir, &h.readyW, &h.seccomp, &h.guardR, &h.args, &h.bridge}
	if h.proof != nil {
		child = append(child, &h.proof.tokenR, &h.proof.startW)
	}
	for _, f := range child {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

func (h *handshake) closeAll() {
	h.closeChildEnds()
	parent := []**os.File{&h.infoR, &h.blockW, &h.readyR, &h.guardW}
	if h.proof != nil {
		parent = append(parent, &h.proof.tokenW, &h.proof.startR)
	}
	for _, f := range parent {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// place moves the step into cg and lets it go on. With bwrap, that is the
// sandbox's init, whose pid bwrap reports on the info pipe; without, the
// shim (pid). It returns the pid it placed.
func (h *handshake) place(cg *stepCgroup, pid int) (int, error) {
	if h.infoR != nil {
		if err := h.infoR.SetReadDeadline(time.Now().Add(SetupTimeout)); err != nil {
			return 0, fmt.Errorf("info pipe deadline: %w", err)
		}
		var info struct {
			ChildPid int `json:"child-pid"`
		}
		// bwrap writes one small JSON object; a bounded read is enough.
		if err := json.NewDecoder(io.LimitReader(h.infoR, 64<<10)).Decode(&info); err != nil {
			return 0, fmt.Errorf("read bwrap info: %w", err)
		}
		if info.ChildPid <= 0 {
			return 0, errors.New("bwrap info has no child pid")
		}
		if h.proof != nil {
			h.proof.childPid = info.ChildPid
		}
		// Only the sandbox's init: everything that runs untrusted
		// code descends from it. bwrap itself stays outside, in the
		// step's process group; each move costs the kernel an RCU
		// grace period.
		pid = info.ChildPid
	}
	if err := cg.add(pid); err != nil {
		return 0, err
	}
	// bwrap's block pipe, then the guard's (bwrap mode, cgroup v1).
	for _, w := range []**os.File{&h.blockW, &h.guardW} {
		if *w == nil {
			continue
		}
		if _, err := (*w).Write([]byte{'\n'}); err != nil {
			return 0, fmt.Errorf("release sandbox: %w", err)
		}
		if err := (*w).Close(); err != nil {
			return 0, fmt.Errorf("release sandbox: %w", err)
		}
		*w = nil
	}
	return pid, nil
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
