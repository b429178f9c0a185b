package local

import (
	"maps"
	"slices"
	"strconv"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// Paths are the host-side facts of one sandbox that BuildArgs needs but
// cannot look up itself (it is pure).
type Paths struct {
	// Workspace, Home and Tmp are host directories owned by the sandbox
	// uid, bound at SandboxWorkspace, SandboxHome and SandboxTmp.
	Workspace string
	Home      string
	Tmp       string
	// DenyFiles are the entries of Options.DenyRead that are not
	// directories: they are masked with /dev/null instead of a tmpfs.
	// Entries of DenyRead missing on the host are left out of both by the
	// caller (there is nothing to hide) and must not appear here.
	DenyFiles []string
	// DenyDirs are the entries of Options.DenyRead that are directories.
	DenyDirs []string
	// Etc is the host directory holding the files of GeneratedEtc, each
	// bound read-only at /etc/<name>; empty binds none.
	Etc string
	// InfoFD and BlockFD, when positive, are the child's descriptors of
	// bwrap's --info-fd and --block-fd: the cgroup v1 placement handshake
	// (bwrap reports its child's pid, then waits until its processes are
	// in the step's cgroup before running anything).
	InfoFD  int
	BlockFD int
	// SeccompFD, when positive, is the child's descriptor from which
	// bwrap reads the compiled seccomp filter (SeccompFilter) and loads
	// it just before it runs the step; bwrap fails, and runs nothing,
	// when the kernel refuses it.
	SeccompFD int
	// Egress, for a step whose network is the registry, is where its
	// proxy and bridge are; nil otherwise.
	Egress *EgressPaths
	// Tool is the host directory of the plan's package manager, bound
	// read-only at SandboxToolDir with its bin first on PATH; empty
	// binds none.
	Tool string
	// CA says Etc holds the CA bundle of Options.CAFile, bound at
	// SandboxCAFile.
	CA bool
	// Env are variables of this run added to the step environment (the
	// package manager's own settings).
	Env map[string]string
	// RepoEnv are the repository's variables (validation.Plan.Env): set
	// first, so every variable the executor sets wins over them.
	RepoEnv map[string]string
	// GuardFD, when positive, is the child's descriptor from which the
	// sandbox's first process (guardShim) reads the worker's go-ahead
	// before it runs anything; at EOF it exits instead (cgroup v1).
	GuardFD int
}

// EgressPaths are the host-side facts of an install step's proxy.
type EgressPaths struct {
	// SocketDir is the host directory holding the proxy's unix socket,
	// bound at SandboxSocketDir.
	SocketDir string
	// Bridge is the host path of the bridge binary, bound read-only at
	// SandboxBridgePath; it is in the run directory, where the sandbox
	// uid can reach it wherever the worker's own binary lives.
	Bridge string
	// ReadyFD is the child's descriptor on which the bridge says it
	// listens, before it starts the step.
	ReadyFD int
}

// stepNetwork is the network a step actually gets: the registry (through
// the proxy) for an install step whose plan asks for it; none for every
// other step. The host network is never given.
func stepNetwork(step validation.Step) validation.Network {
	if step.Name == validation.StepInstall && step.Network == validation.NetworkRegistry {
		return validation.NetworkRegistry
	}
	return validation.NetworkNone
}

// BuildArgs returns the whole bwrap argv (BwrapPath first) that runs step
// in a sandbox laid out by paths. It is pure: opts must already carry its
// defaults (New applies them) and it reads nothing from the host.
func BuildArgs(opts Options, step validation.Step, paths Paths) []string {
	// --unshare-all gives the sandbox its own network namespace with only
	// a loopback; there is no --share-net, for any step. Its own user
	// namespace is made no matter what (--unshare-user) so that no further
	// one can be made inside (--disable-userns): without a new user
	// namespace nothing inside gets the capabilities a new mount or
	// network namespace needs. bwrap checks it (--assert-userns-disabled)
	// and fails the step, never runs it, where it cannot.
	a := []string{opts.BwrapPath, "--unshare-all", "--unshare-user", "--disable-userns", "--assert-userns-disabled"}
	a = append(a,
		"--die-with-parent",
		"--new-session",
		"--cap-drop", "ALL",
		"--hostname", SandboxHostname,
		"--clearenv",
	)
	env := opts.stepEnv(paths.RepoEnv)
	if paths.Egress != nil {
		maps.Copy(env, proxyEnv())
	}
	if paths.Tool != "" {
		env["PATH"] = SandboxToolDir + "/bin:" + env["PATH"]
	}
	maps.Copy(env, paths.Env)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		a = append(a, "--setenv", k, env[k])
	}
	for _, p := range SystemReadPaths() {
		a = append(a, "--ro-bind-try", p, p)
	}
	if paths.Etc != "" {
		for _, name := range slices.Sorted(maps.Keys(GeneratedEtc(opts.SandboxUID, opts.SandboxGID))) {
			a = append(a, "--ro-bind", paths.Etc+"/"+name, "/etc/"+name)
		}
		if paths.CA {
			a = append(a, "--ro-bind", paths.Etc+"/"+caEtcName, SandboxCAFile)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	a = append(a,
		"--bind", paths.Workspace, SandboxWorkspace,
		"--bind", paths.Home, SandboxHome,
		"--bind", paths.Tmp, SandboxTmp,
	)
	// Allowed paths come after the private directories, so one below
	// /tmp is not hidden by the private TMPDIR.
	for _, p := range opts.AllowRead {
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range opts.AllowWrite {
		a = append(a, "--bind-try", p, p)
	}
	for _, p := range paths.DenyDirs {
		a = append(a, "--tmpfs", p, "--remount-ro", p)
	}
	for _, p := range paths.DenyFiles {
		a = append(a, "--ro-bind", "/dev/null", p)
	}
	if paths.Tool != "" {
		a = append(a, "--ro-bind", paths.Tool, SandboxToolDir)
	}
	if e := paths.Egress; e != nil {
		a = append(a,
			"--ro-bind", e.Bridge, SandboxBridgePath,
			"--bind", e.SocketDir, SandboxSocketDir,
		)
	}
	a = append(a, "--remount-ro", "/")
	if paths.InfoFD > 0 && paths.BlockFD > 0 {
		a = append(a,
			"--info-fd", strconv.Itoa(paths.InfoFD),
			"--block-fd", strconv.Itoa(paths.BlockFD),
		)
	}
	// Last of the sandbox's options. bwrap loads the filter after its
	// own setup, just before it runs the step.
	if paths.SeccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(paths.SeccompFD))
	}
	a = append(a, "--chdir", SandboxWorkspace, "--")
	cmd := step.Argv
	if e := paths.Egress; e != nil {
		cmd = egress.BridgeArgv(SandboxBridgePath, SandboxSocketPath, e.ReadyFD, cmd)
	}
	if paths.GuardFD > 0 {
		cmd = guardArgv(paths.GuardFD, cmd)
	}
	return append(a, cmd...)
}
