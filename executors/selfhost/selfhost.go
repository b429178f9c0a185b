// Package selfhost is the self-host executor (SPEC §4.3): an operator's
// command, named by GILF_SELF_HOST_COMMAND, that starts isolated compute,
// runs gilf's marker shell on the repository archive there, and prints
// its output.
package selfhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/internal/cmdrun"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/validation"
)

// Defaults and limits.
const (
	// DefaultTimeout is GILF_SELF_HOST_TIMEOUT_MS's default (2,700,000 ms):
	// the host kills the command's process tree when it runs longer.
	DefaultTimeout = 2_700_000 * time.Millisecond
	// DefaultKillGrace is how long the command has between SIGTERM and
	// SIGKILL to tear its compute down, and how long Wait waits for its
	// output pipes once it exited.
	DefaultKillGrace = 10 * time.Second
	// DefaultStepGrace is how long past a step's own timeout the host
	// waits for the step's END marker before it stops the command.
	DefaultStepGrace = 30 * time.Second
	// DiagnosticTailBytes is how much of the command's last output is
	// kept (redacted, control characters escaped) to explain a command
	// that failed before printing any marker.
	DiagnosticTailBytes = cmdrun.DiagnosticTailBytes
	// DefaultPath is the PATH the command gets when the worker's
	// environment has none.
	DefaultPath = cmdrun.DefaultPath
	// NetworkEnv names the variable that conveys the network intent to
	// the command, which must enforce it.
	NetworkEnv = "GILF_SELF_HOST_NETWORK"
)

// EnvAllowList names the worker variables the command may inherit; every
// other variable of the worker is withheld.
func EnvAllowList() []string {
	return []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}
}

// ErrNotConfigured is returned by New when no command is configured; the
// executor is then left out of the configured set and Select refuses
// executor_unconfigured.
var ErrNotConfigured = errors.New("self-host executor: GILF_SELF_HOST_COMMAND is not set")

// Options configure the executor. cmd/gilf fills them from the
// environment; nothing here reads it.
type Options struct {
	// Command is GILF_SELF_HOST_COMMAND, split on whitespace, never given
	// to a shell.
	Command string
	// Network is GILF_SELF_HOST_NETWORK, the intent passed to the
	// command: validation.NetworkNone (the default) or NetworkFull.
	Network validation.Network
	// Timeout is GILF_SELF_HOST_TIMEOUT_MS (DefaultTimeout when zero).
	Timeout time.Duration
	// KillGrace is DefaultKillGrace when zero; StepGrace DefaultStepGrace.
	KillGrace time.Duration
	StepGrace time.Duration
	// TempRoot is where packaging directories are made (os.TempDir() when
	// empty).
	TempRoot string
	// Env is the worker's environment ("NAME=value"); only the names in
	// EnvAllowList pass to the command.
	Env []string
	// Secrets are the worker's secrets: never passed (an allow-listed
	// variable holding one is dropped too), redacted from output, and
	// named in Result.SecretsWithheld.
	Secrets []validation.Secret
	// Tier is reported as the isolation tier (validation.TierRemote when
	// empty): gilf does not observe the command's isolation.
	Tier validation.Tier
	// MaxOutputBytes is what is kept of each step's output
	// (validation.DefaultMaxOutputBytes when zero).
	MaxOutputBytes int
	// Resources are what the command's compute is given
	// (GILF_SELF_HOST_VCPU, GILF_SELF_HOST_MEMORY_GIB), reported with
	// every result so a "self-host" rate card can price the run; gilf
	// cannot observe them. Zero: unknown, and the run has no estimate.
	Resources executors.Resources
}

// Executor runs plans through the self-host command.
//
// How a run ends:
//
//   - Step statuses come from the markers the command prints (every
//     StepResult has Reported set; the Result's notes say so): gilf does
//     not observe the remote exit statuses.
//   - The command could not be started, or it exited non-zero (or was
//     killed by a signal gilf did not send) before printing any START
//     marker: an infrastructure error, retried. Its last output, redacted,
//     is in the error.
//   - It printed markers and then broke (non-zero exit, missing END,
//     forged, duplicate or out-of-order markers), or exited 0 with steps
//     left unreported: the Result's Integrity says why and the run is
//     inconclusive; no error.
//   - A step that outlives its timeout plus StepGrace, or a command that
//     outlives Timeout, is stopped by killing the whole process tree: the
//     open step ends timed_out and later steps not_run. A command that
//     hits Timeout before any START is an infrastructure error.
//   - ctx cancelled: the tree is killed, the open step ends killed, later
//     steps not_run, and ctx's error is returned.
//
// The packaging directory (archive and shell) is removed in every
// outcome; a failure to remove it fails the run. Run may be called
// concurrently.
type Executor struct {
	argv     []string
	opts     Options
	env      []string
	withheld []string
}

var _ executors.Executor = (*Executor)(nil)

// New checks opts and returns a ready executor, or ErrNotConfigured when
// no command is set.
func New(opts Options) (*Executor, error) {
	argv := strings.Fields(opts.Command)
	if len(argv) == 0 {
		return nil, ErrNotConfigured
	}
	var errs []error
	// A relative program path ("examples/selfhost/run.sh") is resolved now,
	// against the worker's directory: the command runs in its packaging
	// directory, where a relative path would name nothing.
	if strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
		abs, err := filepath.Abs(argv[0])
		if err != nil {
			errs = append(errs, fmt.Errorf("self-host command %q: %w", argv[0], err))
		}
		argv[0] = abs
	}
	switch opts.Network {
	case "":
		opts.Network = validation.NetworkNone
	case validation.NetworkNone, validation.NetworkFull:
	default:
		errs = append(errs, fmt.Errorf("%s %q: want %q or %q", NetworkEnv, opts.Network, validation.NetworkNone, validation.NetworkFull))
	}
	errs = append(errs, remote.DefaultDurations("self-host",
		remote.DurationOption{Name: "timeout", V: &opts.Timeout, Def: DefaultTimeout},
		remote.DurationOption{Name: "kill grace", V: &opts.KillGrace, Def: DefaultKillGrace},
		remote.DurationOption{Name: "step grace", V: &opts.StepGrace, Def: DefaultStepGrace},
	)...)
	if opts.MaxOutputBytes < 0 {
		errs = append(errs, fmt.Errorf("self-host max output bytes %d is negative", opts.MaxOutputBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("self-host executor: %w", err)
	}
	if opts.TempRoot == "" {
		opts.TempRoot = os.TempDir()
	}
	if opts.Tier == "" {
		opts.Tier = validation.TierRemote
	}
	return &Executor{
		argv:     argv,
		opts:     opts,
		env:      ChildEnv(opts.Env, opts.Network, opts.Secrets),
		withheld: remote.SecretNames(opts.Secrets),
	}, nil
}

// Name is executors.NameSelfHost.
func (e *Executor) Name() string { return executors.NameSelfHost }

// Argv is the command line of one run: the configured command's words,
// then the archive path, the shell path and the timeout in milliseconds.
func Argv(command []string, archivePath, shellPath string, timeout time.Duration) []string {
	argv := slices.Clone(command)
	return append(argv, archivePath, shellPath, strconv.FormatInt(timeout.Milliseconds(), 10))
}

// ChildEnv builds the command's environment from the worker's: the
// allow-listed names only (PATH defaulted), minus any whose value holds
// a secret, plus the network intent. Sorted, so it is stable.
func ChildEnv(worker []string, network validation.Network, secrets []validation.Secret) []string {
	vals := cmdrun.InheritEnv(worker, EnvAllowList(), secrets, DefaultPath)
	vals[NetworkEnv] = string(network)
	return cmdrun.EnvList(vals)
}

// Run packs req.Dir and runs the plan through the command. See Executor
// for how a run ends.
func (e *Executor) Run(ctx context.Context, req executors.Request) (executors.Result, error) {
	c := &cmdrun.Command{
		Req: req, Prefix: "self-host", Program: e.argv[0], Who: "the self-host command",
		TempRoot: e.opts.TempRoot, TempPattern: "gilf-selfhost-",
		Stage: func(ctx context.Context, pkg string) (cmdrun.Staging, error) {
			archivePath, shellPath, nonce, err := pack(ctx, pkg, req)
			return cmdrun.Staging{Argv: Argv(e.argv, archivePath, shellPath, e.opts.Timeout), Dir: pkg, Nonce: nonce}, err
		},
		Env: e.env, Secrets: e.opts.Secrets, MaxOutputBytes: e.opts.MaxOutputBytes,
		Timeout: e.opts.Timeout, KillGrace: e.opts.KillGrace, StepGrace: e.opts.StepGrace,
		TimeoutNoStart: fmt.Errorf("self-host: the command printed no START marker within GILF_SELF_HOST_TIMEOUT_MS (%v); it was killed", e.opts.Timeout),
		TimeoutWhy:     fmt.Sprintf("timed out: the self-host command exceeded GILF_SELF_HOST_TIMEOUT_MS (%v) and was killed", e.opts.Timeout),
		TimeoutLater:   "not run: the self-host command was killed at GILF_SELF_HOST_TIMEOUT_MS",
		Enforcement:    validation.EnforcedIntentOnly,
		Cwd:            archive.PackRoot,
		Notes: []string{
			"step statuses were reported by the executor: the self-host command printed the markers; gilf did not observe the exit statuses",
			fmt.Sprintf("network intent %q passed to the self-host command as %s; the command enforces it", e.opts.Network, NetworkEnv),
		},
	}
	c.Exited = func(x cmdrun.Exit) ([]string, error) {
		switch {
		case (x.Code != 0 || x.Signal != "") && !x.AnyStart:
			return nil, fmt.Errorf("self-host: %s %s before printing any START marker; last output: %q",
				e.argv[0], cmdrun.DescribeExit(x.Code, x.Signal), cmdrun.Diagnostic(x.Tail, DiagnosticTailBytes, x.Secrets))
		case x.Code != 0 || x.Signal != "":
			return []string{fmt.Sprintf("the self-host command %s after printing markers", cmdrun.DescribeExit(x.Code, x.Signal))}, nil
		}
		return c.UnreportedIssue(x.Res.Steps), nil
	}
	return remote.Run(ctx, executors.Result{
		Executor:        e.Name(),
		Tier:            e.opts.Tier,
		SecretsWithheld: slices.Clone(e.withheld),
		Resources:       e.opts.Resources,
	}, c)
}

// pack writes the repository archive and the marker shell into pkg.
func pack(ctx context.Context, pkg string, req executors.Request) (archivePath, shellPath, nonce string, err error) {
	nonce, err = validation.NewNonce()
	if err != nil {
		return "", "", "", fmt.Errorf("self-host: %w", err)
	}
	archivePath = filepath.Join(pkg, "repo.tar.gz")
	f, err := os.OpenFile(archivePath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", "", fmt.Errorf("self-host: create archive: %w", err)
	}
	perr := archive.Pack(ctx, req.Dir, f)
	if cerr := f.Close(); perr == nil {
		perr = cerr
	}
	if perr != nil {
		return "", "", "", fmt.Errorf("self-host: pack %s: %w", req.Dir, perr)
	}
	shellPath = filepath.Join(pkg, "validate.sh")
	if err := os.WriteFile(shellPath, validation.BuildShell(req.Plan, nonce), 0o600); err != nil {
		return "", "", "", fmt.Errorf("self-host: write shell: %w", err)
	}
	return archivePath, shellPath, nonce, nil
}
