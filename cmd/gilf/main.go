// Command gilf is the GitHub App review worker: `gilf serve` runs the
// webhook, workers and dashboard; `gilf validate PATH` runs the whole
// plan → run → record path on a local checkout and prints the review.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors/local/egress"
)

// Exit codes of every subcommand.
const (
	exitOK       = 0 // validate: every step that ran passed
	exitFailed   = 1 // validate: a step failed
	exitUsage    = 2 // usage, configuration or infrastructure error
	exitUnproven = 3 // validate: nothing was proven (gap, skipped, refused, inconclusive)
	// exitInterrupted follows the shell's 128+SIGINT.
	exitInterrupted = 130
)

// Env is what a subcommand gets from the process: its streams and its
// environment, read once in main.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	// StderrTTY is true when stderr is a terminal (progress may redraw).
	StderrTTY bool
	Getenv    func(string) string
	Environ   []string
}

// command is one subcommand. Adding one is one line in commands.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env Env, args []string) int
}

func commands() []command {
	return []command{
		{"validate", "validate a local checkout or .tar.gz and print the review", runValidate},
		{"serve", "run the webhook intake, review workers, /healthz and /metrics", runServe},
		{"costs", "print estimated validation spend by executor and day from the store", runCosts},
		{"migrate", "create the database or apply pending schema migrations, then exit", runMigrate},
		{"doctor", "check the configuration end to end (GitHub App, executors, store, disk, evidence)", runDoctor},
		{"version", "print the module version, VCS revision and Go version", runVersion},
		{"jobs", "list jobs; retry a finished one or cancel a queued or running one", runJobs},
		{"prune", "drop delivery bodies and step output older than GILF_RETENTION_DAYS, once", runPrune},
		{"backup", "write a consistent copy of the store to a directory, also while serve runs", runBackup},
		{"seccomp-filter", "write the local sandbox's seccomp filter, for a self-host command's bwrap --seccomp", runSeccompFilter},
		{"deliver", "sign a webhook payload file with GILF_WEBHOOK_SECRET and post it to a running gilf serve", runDeliver},
	}
}

func main() {
	// The sandbox's egress bridge is this binary too (a hidden
	// subcommand); it must not read config or set up signals first.
	egress.MaybeRunBridge()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	getenv, environ := processEnv()
	code := run(ctx, Env{
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		StderrTTY: isTerminal(os.Stderr),
		Getenv:    getenv,
		Environ:   environ,
	}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, env Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "gilf: unknown command %q\n\n", args[0])
	usage(env.Stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: gilf <command> [arguments]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun gilf <command> -h for a command's flags.")
}

// newLogger builds the process logger from the log settings.
func newLogger(w io.Writer, c LogConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.Level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
