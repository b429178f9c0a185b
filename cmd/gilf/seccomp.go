package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gilf-review/gilf/executors/local"
)

const seccompUsage = `usage: gilf seccomp-filter [-o FILE]

Writes the seccomp filter gilf's local sandbox runs every step under, as
bubblewrap's --seccomp reads it (a compiled struct sock_filter array, for
this machine's architecture), to standard output or FILE (mode 0644). A
self-host command loads it with: bwrap ... --seccomp 3 ... 3<FILE
(examples/selfhost/run.sh does).
`

// runSeccompFilter is gilf seccomp-filter.
func runSeccompFilter(_ context.Context, env Env, args []string) int {
	fs := newFlagSet("seccomp-filter", seccompUsage, env.Stderr, false)
	out := fs.String("o", "", "write the filter to `FILE` instead of standard output")
	if exit, ok := parseNoArgs(fs, args, env.Stderr); !ok {
		return exit
	}
	prog, err := local.SeccompFilter()
	if err == nil {
		err = writeFilter(env, *out, prog)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf seccomp-filter: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// writeFilter writes prog to path (replacing it whole: a reader never sees
// half a filter), or to standard output when path is "".
func writeFilter(env Env, path string, prog []byte) error {
	if path == "" {
		_, err := env.Stdout.Write(prog)
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, prog, 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
