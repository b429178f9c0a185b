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
	// sandbox's first process (startShim) reads the worker's go-ahead
	// before it runs anything; at EOF it exits instead (cgroup v1).
	GuardFD int
	// TokenFD and StartFD, when both positive, make startShim the
	// sandbox's first process: it reads the step's token from TokenFD
	// and writes it, with its own pid, to StartFD before it runs the
	// step (the proof that the step started inside, see proof.go).
	TokenFD int
	StartFD int
	// Shm is the host directory bound at /dev/shm; empty binds none.
	// /dev itself is read-only: nothing a step writes lands outside the
	// run's own file system.
	Shm string
	// InitFD, when positive, is the child's descriptor from which bwrap
	// copies the sandbox's init (pid1.go) to SandboxInitPath: the step
	// runs under it (--as-pid-1) instead of bwrap's own, dumpable init.
	InitFD int
}

// EgressPaths are the host-side facts of an install step's proxy.
type EgressPaths struct {
	// SocketDir is the host directory holding the proxy's unix socket,
	// bound read-only at SandboxSocketDir: the step connects to the
	// socket and writes nothing there.
	SocketDir string
	// BridgeFD is the child's descriptor from which bwrap copies the
	// bridge binary into the sandbox's own root, at SandboxBridgePath
	// (read-only, mode 0555): no host path of it is mounted.
	BridgeFD int
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
	options, cmd := bwrapArgs(opts, step, paths)
	return append(append(append([]string{opts.BwrapPath}, options...), "--"), cmd...)
}

// bwrapArgs returns what BuildArgs joins: bwrap's options (handed to bwrap
// on a descriptor, --args, so that no host path of them shows in the
// sandbox's /proc/1/cmdline) and the command after "--".
func bwrapArgs(opts Options, step validation.Step, paths Paths) (options, command []string) {
	// --unshare-all gives the sandbox its own network namespace with only
	// a loopback; there is no --share-net, for any step. Its own user
	// namespace is made no matter what (--unshare-user) so that no further
	// one can be made inside (--disable-userns): without a new user
	// namespace nothing inside gets the capabilities a new mount or
	// network namespace needs. bwrap checks it (--assert-userns-disabled)
	// and fails the step, never runs it, where it cannot.
	a := []string{"--unshare-all", "--unshare-user", "--disable-userns", "--assert-userns-disabled"}
	a = append(a,
		"--die-with-parent",
		"--new-session",
		"--cap-drop", "ALL",
		"--hostname", SandboxHostname,
		"--clearenv",
	)
	a = append(a, bwrapEnv(opts, paths)...)
	a = append(a, bwrapMounts(opts, paths)...)
	if paths.InfoFD > 0 {
		a = append(a, "--info-fd", strconv.Itoa(paths.InfoFD))
	}
	if paths.BlockFD > 0 {
		a = append(a, "--block-fd", strconv.Itoa(paths.BlockFD))
	}
	// Last of the sandbox's options. bwrap loads the filter after its
	// own setup, just before it runs the step.
	if paths.SeccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(paths.SeccompFD))
	}
	a = append(a, "--chdir", SandboxWorkspace)
	if paths.InitFD > 0 {
		a = append(a, "--as-pid-1")
	}
	cmd := slices.Clone(step.Argv)
	if e := paths.Egress; e != nil {
		cmd = egress.BridgeArgv(SandboxBridgePath, SandboxSocketPath, e.ReadyFD, cmd)
	}
	if paths.GuardFD > 0 || (paths.TokenFD > 0 && paths.StartFD > 0) {
		cmd = startArgv(paths.GuardFD, paths.TokenFD, paths.StartFD, cmd)
	}
	if paths.InitFD > 0 {
		cmd = initArgv(cmd)
	}
	return a, cmd
}

// bwrapEnv sets the step's whole environment (--clearenv comes first).
func bwrapEnv(opts Options, paths Paths) []string {
	env := opts.stepEnv(paths.RepoEnv)
	if paths.Egress != nil {
		maps.Copy(env, proxyEnv())
	}
	if paths.Tool != "" {
		env["PATH"] = SandboxToolDir + "/bin:" + env["PATH"]
	}
	maps.Copy(env, paths.Env)
	var a []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		a = append(a, "--setenv", k, env[k])
	}
	return a
}

// bwrapMounts lays out the sandbox's file system: the system read-only,
// the generated /etc, the run's private directories, the allowed and
// denied paths, the package manager and the bridge, then / read-only.
func bwrapMounts(opts Options, paths Paths) []string {
	var a []string
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
	if paths.Shm != "" {
		a = append(a, "--bind", paths.Shm, "/dev/shm")
	}
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
			"--perms", "0555", "--ro-bind-data", strconv.Itoa(e.BridgeFD), SandboxBridgePath,
			"--ro-bind", e.SocketDir, SandboxSocketDir,
		)
	}
	if paths.InitFD > 0 {
		a = append(a, "--perms", sandboxInitPerms, "--ro-bind-data", strconv.Itoa(paths.InitFD), SandboxInitPath)
	}
	a = append(a, "--remount-ro", "/")
	if paths.Shm != "" {
		a = append(a, "--remount-ro", "/dev")
	}
	return a
}
