package local

import (
	"fmt"
	"os"
)

// The sandbox's pid 1. bwrap's own init (the reaper it forks when it makes
// a pid namespace) runs as the sandbox uid and marks itself dumpable: the
// step could write its memory through /proc/1/mem, read its environment
// and descriptors, and make it outlive the step (clear its parent-death
// signal, the one tie of the namespace to bwrap on a host without
// cgroups). So bwrap runs the step with --as-pid-1 under an init of
// gilf's instead: the host's /bin/sh, copied by bwrap into the sandbox's
// own root (--ro-bind-data, no host path mounted) with mode 0111. The
// kernel makes a process that executes a file it cannot read undumpable
// (fs/exec.c would_dump; the dumpable flag then follows
// fs.suid_dumpable, never 1): /proc/1/mem, environ and fd are closed to
// the step, which has no capability to override it. The init runs a fixed
// script, never the step's words as shell code: it forks the step's argv
// (startShim, so pid 2 as before), reaps whatever is orphaned to it while
// it waits, and exits with the step's status; the kernel then kills what
// is left in the namespace. Its own messages (a shell reports a child
// killed by a signal) go to /dev/null; the step keeps the standard
// streams. Copying /bin/sh costs one read of ~125 KiB per step.
const (
	// SandboxInitPath is where the init is copied in the sandbox.
	SandboxInitPath = "/run/gilf/init"
	// sandboxInitPerms: executable, readable by none (not even its
	// owner, the sandbox uid).
	sandboxInitPerms = "0111"
	// initScript is the init's whole program; $@ is the step's argv.
	// The command is not the script's last, so the shell forks it and
	// waits, rather than exec it.
	initScript = `exec 3>&2 2>/dev/null; "$@" 2>&3 3>&-; exit $?`
	// hostInitShell is the host file copied in as the init.
	hostInitShell = "/bin/sh"
)

// initArgv runs argv under the init.
func initArgv(argv []string) []string {
	return append([]string{SandboxInitPath, "-c", initScript, "gilf-init"}, argv...)
}

// openInit opens the host file bwrap copies in as the init.
func openInit() (*os.File, error) {
	f, err := os.Open(hostInitShell)
	if err != nil {
		return nil, fmt.Errorf("sandbox init: %w", err)
	}
	return f, nil
}
