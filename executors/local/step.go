package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

// sandbox is what the steps of one run share.
type sandbox struct {
	opts Options
	dirs runDirs
	// direct runs steps without bwrap (tier none: process hardening only).
	direct bool
	// cg is where step cgroups are made; version cgroupNone for none.
	cg      cgroupHost
	secrets []validation.Secret
	// name prefixes the run's cgroup names.
	name string
	// denyDirs and denyFiles split Options.DenyRead (see Paths).
	denyDirs  []string
	denyFiles []string
}

// stepRun is one execution of one step.
type stepRun struct {
	step      validation.Step
	timeout   time.Duration
	maxOutput int
	// cgName names the step's cgroup.
	cgName string
}

// runStep runs one step to its end and returns its result. An error is an
// infrastructure failure (the sandbox could not be set up or cleaned up);
// the step's own failures are in the result. Every process of the step is
// dead when runStep returns, in every outcome.
func (s *sandbox) runStep(ctx context.Context, sr stepRun) (res validation.StepResult, err error) {
	net := stepNetwork(s.opts, sr.step)
	if s.direct {
		net = validation.NetworkFull // no network namespace in tier none
	}
	res = validation.StepResult{
		Name:      sr.step.Name,
		Argv:      slices.Clone(sr.step.Argv),
		Cwd:       SandboxWorkspace,
		TimeoutMs: sr.timeout.Milliseconds(),
		Network:   net,
	}
	if s.direct {
		res.Cwd = s.dirs.Workspace
	}
	if len(sr.step.Argv) == 0 {
		return res, errors.New("step has no command")
	}

	// The cgroup, when there is one, exists before any process does.
	var cg *stepCgroup
	if s.cg.version != cgroupNone {
		cg, err = s.cg.create(sr.cgName, s.opts.Limits)
		if err != nil {
			return res, fmt.Errorf("step %s: %w", sr.step.Name, err)
		}
		defer func() {
			kerr := cg.kill(context.WithoutCancel(ctx))
			rerr := cg.remove()
			if kerr != nil || rerr != nil {
				err = errors.Join(err, fmt.Errorf("step %s cleanup: %w", sr.step.Name, errors.Join(kerr, rerr)))
			}
		}()
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("output pipe: %w", err)
	}
	defer outR.Close()
	growPipe(outW)

	cmd, handshake, err := s.command(sr, cg, outW)
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
	if err := cmd.Start(); err != nil {
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

	var innerPid int
	if handshake.active() {
		innerPid, err = handshake.place(cmd.Process.Pid, cg)
		if err != nil {
			// The sandbox never ran anything: an infrastructure failure.
			killGroup(pgid, cg, unix.SIGKILL)
			werr := cmd.Wait()
			out := collect(outR, stream)
			return res, fmt.Errorf("set up sandbox for step %s: %w (bwrap: %v; output: %q)",
				sr.step.Name, err, werr, firstLine(out.Head))
		}
	} else if cg != nil && s.cg.version == cgroupV1 {
		// Direct mode on cgroup v1: placed after start. A process
		// forked before this line escapes the limits, not the kill of
		// its process group.
		if err := cg.add(cmd.Process.Pid); err != nil {
			killGroup(pgid, cg, unix.SIGKILL)
			werr := cmd.Wait()
			collect(outR, stream)
			return res, fmt.Errorf("place step %s in cgroup: %w (%v)", sr.step.Name, err, werr)
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
			if serr := cg.signal(unix.SIGTERM, cmd.Process.Pid, innerPid); serr != nil {
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
	// Everything left in the cgroup (a daemon that left the process
	// group) dies now, so the output pipe can reach its end.
	if cg != nil {
		if kerr := cg.kill(context.WithoutCancel(ctx)); kerr != nil {
			err = errors.Join(err, fmt.Errorf("step %s cleanup: %w", sr.step.Name, kerr))
		}
	}
	killGroup(pgid, nil, unix.SIGKILL)
	out := collect(outR, stream)

	o := observation{
		state:     cmd.ProcessState,
		limits:    s.opts.Limits,
		timeout:   sr.timeout,
		maxStream: s.opts.MaxStreamBytes,
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
		o.oomKills = cg.oomKills()
		o.pidsHits = cg.pidsMaxHits()
	}
	v := classify(o)
	res.Status, res.ExitCode, res.Signal, res.Reason = v.status, v.exitCode, v.signal, v.reason
	res.Output = out.Output
	if out.err != nil {
		err = errors.Join(err, fmt.Errorf("read output of step %s: %w", sr.step.Name, out.err))
	}
	if out.drainCut {
		res.Reason = joinReason(res.Reason, fmt.Sprintf("output was still open %s after the step ended and was cut", OutputDrainTimeout))
	}
	return res, err
}

// command builds the process of one step: bwrap, or in direct mode the
// step's own argv, as the sandbox uid, in its own process group, with
// nothing of the worker's environment.
func (s *sandbox) command(sr stepRun, cg *stepCgroup, out *os.File) (*exec.Cmd, *handshake, error) {
	hs := &handshake{}
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
		e := s.opts.stepEnv()
		e["HOME"], e["TMPDIR"] = s.dirs.Home, s.dirs.Tmp
		for _, k := range slices.Sorted(maps.Keys(e)) {
			env = append(env, k+"="+e[k])
		}
		prog, err := lookPath(sr.step.Argv[0], e["PATH"])
		if err != nil {
			return nil, nil, fmt.Errorf("step %s: %w", sr.step.Name, err)
		}
		argv = append([]string{prog}, sr.step.Argv[1:]...)
	} else {
		paths := Paths{
			Workspace: s.dirs.Workspace,
			Home:      s.dirs.Home,
			Tmp:       s.dirs.Tmp,
			DenyDirs:  s.denyDirs,
			DenyFiles: s.denyFiles,
		}
		if cg != nil && cg.version == cgroupV1 {
			if err := hs.open(); err != nil {
				return nil, nil, err
			}
			// ExtraFiles[i] is the child's descriptor 3+i.
			paths.InfoFD, paths.BlockFD = 3, 4
		}
		argv = BuildArgs(s.opts, sr.step, paths)
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
	}
	if hs.active() {
		cmd.ExtraFiles = []*os.File{hs.infoW, hs.blockR}
	}
	return cmd, hs, nil
}

// handshake holds the pipes of bwrap's --info-fd and --block-fd, with
// which a cgroup v1 step is placed in its cgroup before it runs anything.
type handshake struct {
	infoR, infoW   *os.File
	blockR, blockW *os.File
	cgroupDir      *os.File
}

func (h *handshake) open() error {
	var err error
	if h.infoR, h.infoW, err = os.Pipe(); err != nil {
		return fmt.Errorf("info pipe: %w", err)
	}
	if h.blockR, h.blockW, err = os.Pipe(); err != nil {
		h.closeAll()
		return fmt.Errorf("block pipe: %w", err)
	}
	return nil
}

func (h *handshake) active() bool { return h.infoR != nil }

// closeChildEnds closes the descriptors only the child needs.
func (h *handshake) closeChildEnds() {
	for _, f := range []**os.File{&h.infoW, &h.blockR, &h.cgroupDir} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

func (h *handshake) closeAll() {
	h.closeChildEnds()
	for _, f := range []**os.File{&h.infoR, &h.blockW} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// place reads the sandbox's pid from bwrap's info pipe, moves bwrap and
// it into cg, and lets bwrap go on. It returns the sandbox's pid.
func (h *handshake) place(bwrapPid int, cg *stepCgroup) (int, error) {
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
	for _, pid := range []int{bwrapPid, info.ChildPid} {
		if err := cg.add(pid); err != nil {
			return 0, err
		}
	}
	if _, err := h.blockW.Write([]byte{'1'}); err != nil {
		return 0, fmt.Errorf("release sandbox: %w", err)
	}
	if err := h.blockW.Close(); err != nil {
		return 0, fmt.Errorf("release sandbox: %w", err)
	}
	h.blockW = nil
	return info.ChildPid, nil
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
// the default buffer still works, only slower.
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
// close-on-exec. Go opens its own descriptors that way, but one the worker
// inherited from its parent (a socket, a jobserver pipe) would otherwise
// pass through exec, and bwrap hands every open descriptor on to the
// sandbox. The descriptors stay open in the worker.
func cloexecInherited() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: one descriptor at a time.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("mark descriptors close-on-exec: %w", errors.Join(err, rerr))
	}
	for _, en := range entries {
		fd, cerr := strconv.Atoi(en.Name())
		if cerr != nil || fd < 3 {
			continue
		}
		// EBADF: the directory listing's own descriptor, now closed.
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); ferr != nil && !errors.Is(ferr, unix.EBADF) {
			return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, ferr)
		}
	}
	return nil
}
