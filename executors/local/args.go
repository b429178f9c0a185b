package local

import (
	"maps"
	"slices"
	"strconv"

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
	// InfoFD and BlockFD, when positive, are the child's descriptors of
	// bwrap's --info-fd and --block-fd: the cgroup v1 placement handshake
	// (bwrap reports its child's pid, then waits until its processes are
	// in the step's cgroup before running anything).
	InfoFD  int
	BlockFD int
}

// stepNetwork is the network a step actually gets: the host network when
// AllowNetwork is set, or for the install step when its plan asks for it;
// none otherwise.
func stepNetwork(opts Options, step validation.Step) validation.Network {
	if opts.AllowNetwork || (step.Name == validation.StepInstall && step.Network == validation.NetworkFull) {
		return validation.NetworkFull
	}
	return validation.NetworkNone
}

// BuildArgs returns the whole bwrap argv (BwrapPath first) that runs step
// in a sandbox laid out by paths. It is pure: opts must already carry its
// defaults (New applies them) and it reads nothing from the host.
func BuildArgs(opts Options, step validation.Step, paths Paths) []string {
	a := []string{opts.BwrapPath, "--unshare-all"}
	if stepNetwork(opts, step) == validation.NetworkFull {
		a = append(a, "--share-net")
	}
	a = append(a,
		"--die-with-parent",
		"--new-session",
		"--cap-drop", "ALL",
		"--hostname", SandboxHostname,
		"--clearenv",
	)
	env := opts.stepEnv()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		a = append(a, "--setenv", k, env[k])
	}
	for _, p := range SystemReadPaths() {
		a = append(a, "--ro-bind-try", p, p)
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
	a = append(a, "--remount-ro", "/")
	if paths.InfoFD > 0 && paths.BlockFD > 0 {
		a = append(a,
			"--info-fd", strconv.Itoa(paths.InfoFD),
			"--block-fd", strconv.Itoa(paths.BlockFD),
		)
	}
	a = append(a, "--chdir", SandboxWorkspace, "--")
	return append(a, step.Argv...)
}
