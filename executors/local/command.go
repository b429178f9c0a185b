package local

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// childFiles are the descriptors handed to a step's process beyond
// stdio: the i-th is the child's descriptor 3+i.
type childFiles []*os.File

// add hands f to the child and returns its descriptor there.
func (c *childFiles) add(f *os.File) int {
	*c = append(*c, f)
	return 2 + len(*c)
}

// command builds the process of one step: bwrap (with the seccomp
// filter), or in direct mode the step's own argv, as the sandbox uid, in
// its own process group, with nothing of the worker's environment. Its
// parent-death signal is the forking thread's end: startStep forks it
// from a thread of its own.
func (s *sandbox) command(sr stepRun, cg *stepCgroup, out *os.File, proxy *stepProxy) (*exec.Cmd, *handshake, error) {
	hs := &handshake{}
	var files childFiles
	var argv, env []string
	var err error
	if s.direct {
		argv, env, err = s.directArgv(sr, cg, hs, &files)
	} else {
		argv, err = s.bwrapArgv(sr, cg, proxy, hs, &files)
		env = []string{} // bwrap sets the step's environment itself
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
	if err == nil && cg != nil && cg.version == cgroupV2 {
		hs.cgroupDir, err = cg.fd()
		if err == nil {
			attr.UseCgroupFD = true
			attr.CgroupFD = int(hs.cgroupDir.Fd())
		}
	}
	if err != nil {
		hs.closeAll()
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         env,
		Dir:         s.dirs.Workspace,
		Stdout:      out,
		Stderr:      out,
		SysProcAttr: attr,
		WaitDelay:   s.opts.KillGrace,
		ExtraFiles:  files,
	}
	return cmd, hs, nil
}

// directArgv is a direct-mode step's argv and environment (tier none).
func (s *sandbox) directArgv(sr stepRun, cg *stepCgroup, hs *handshake, files *childFiles) (argv, env []string, err error) {
	e := s.directEnv()
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
		files.add(hs.blockR)
		argv = append([]string{"/bin/sh", "-c", directShim, "gilf-shim"}, argv...)
	}
	return argv, env, nil
}

// directEnv is a direct-mode step's environment, with host paths where a
// sandboxed step has the sandbox's.
func (s *sandbox) directEnv() map[string]string {
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
	return e
}

// bwrapArgv is a sandboxed step's argv: bwrap, its options on a
// descriptor, the step's command.
func (s *sandbox) bwrapArgv(sr stepRun, cg *stepCgroup, proxy *stepProxy, hs *handshake, files *childFiles) ([]string, error) {
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
	if err := hs.openSandbox(&paths, files, cg != nil && cg.version == cgroupV1); err != nil {
		return nil, err
	}
	if proxy != nil {
		if err := hs.openEgress(&paths, files, proxy); err != nil {
			return nil, err
		}
	}
	// Every sandboxed step runs under gilf's init, or not at all.
	var err error
	if hs.init, err = openInit(); err != nil {
		return nil, fmt.Errorf("step %s: %w", sr.step.Name, err)
	}
	paths.InitFD = files.add(hs.init)
	// Every sandboxed step runs under the seccomp filter, or not at all.
	f, err := seccompFile()
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", sr.step.Name, err)
	}
	hs.seccomp = f
	paths.SeccompFD = files.add(f)
	options, command := bwrapArgs(s.opts, sr.step, paths)
	if hs.args, err = argsFile(options); err != nil {
		return nil, err
	}
	return append([]string{s.opts.BwrapPath, "--args", strconv.Itoa(files.add(hs.args)), "--"}, command...), nil
}
