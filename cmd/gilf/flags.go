package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet is a subcommand's flag set: its errors and its usage go to
// stderr, the usage text followed, when withDefaults, by every flag with
// its default.
func newFlagSet(name, usage string, stderr io.Writer, withDefaults bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		if withDefaults {
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses a subcommand's args. When the command ends there, ok
// is false and exit is its exit code: exitOK for -h, exitUsage for a
// flag it does not know (the flag package has said so on stderr).
func parseFlags(fs *flag.FlagSet, args []string) (exit int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}

// parseNoArgs is parseFlags for a subcommand that takes flags only: an
// argument is a usage error, said on stderr.
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (exit int, ok bool) {
	if exit, ok := parseFlags(fs, args); !ok {
		return exit, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gilf %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return exitUsage, false
	}
	return exitOK, true
}
