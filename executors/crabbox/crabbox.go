// Package crabbox is the managed-crabbox executor, gilf's default
// provider: it drives the `crabbox` CLI (openclaw/crabbox) against a
// coordinator, which leases a machine, syncs a copy of the checkout to it
// and runs gilf's marker shell there.
package crabbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/internal/cmdrun"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/internal/logtail"
	"github.com/gilf-review/gilf/validation"
)

// Defaults and limits.
const (
	// DefaultTimeout is the host's deadline for one `crabbox run`,
	// leasing and syncing included; the CLI's process tree is killed
	// past it.
	DefaultTimeout = 45 * time.Minute
	// DefaultKillGrace is how long the CLI has between SIGTERM and
	// SIGKILL (it releases its lease on the way out).
	DefaultKillGrace = 30 * time.Second
	// DefaultStepGrace is how long past a step's own timeout the host
	// waits for the step's END marker before it stops the run.
	DefaultStepGrace = 30 * time.Second
	// DiagnosticTailBytes is how much of the run's last stdout is kept
	// (redacted) to explain a run that failed before any marker.
	DiagnosticTailBytes = cmdrun.DiagnosticTailBytes
	// StderrTailBytes is how much of the CLI's stderr is kept: its
	// timing JSON line and the error lines before it.
	StderrTailBytes = MaxTimingLineBytes + 4096
	// DefaultPath is the CLI's PATH when the worker's environment has none.
	DefaultPath = cmdrun.DefaultPath
)

// The CLI's documented environment (crabbox internal/cli/config.go).
const (
	EnvCoordinator = "CRABBOX_COORDINATOR"
	EnvToken       = "CRABBOX_COORDINATOR_TOKEN"
	// EnvEnvAllow replaces the CLI's forwarding allow-list (and a
	// repository's env.allow); gilf pins it to CI.
	EnvEnvAllow = "CRABBOX_ENV_ALLOW"
)

// RepoConfigFiles are the crabbox files a repository may carry that the
// CLI reads from the checkout. They come from the pull request's head, so
// they are removed from the copy before the CLI sees it: a pull request
// does not steer the provider, the sync or env forwarding.
func RepoConfigFiles() []string {
	return []string{"crabbox.yaml", ".crabbox.yaml", ".crabboxignore"}
}

// EnvAllowList names the worker variables the CLI may inherit.
func EnvAllowList() []string {
	return []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "XDG_CONFIG_HOME"}
}

// NotConfiguredError is returned by New when a required setting is
// missing: the executor is then left out of the configured set, Select
// refuses executor_unconfigured, and nothing runs on the worker.
type NotConfiguredError = remote.NotConfiguredError

// Options configure the executor; cmd/gilf fills them.
type Options struct {
	// Bin is GILF_CRABBOX_BIN, the crabbox CLI.
	Bin string
	// Coordinator is GILF_CRABBOX_COORDINATOR, passed as CRABBOX_COORDINATOR.
	Coordinator string
	// Token is GILF_CRABBOX_TOKEN, a secret: passed to the CLI only as
	// CRABBOX_COORDINATOR_TOKEN, never on argv, never logged.
	Token string
	// Provider and Class come from the merged `crabbox` config.
	Provider string
	Class    string
	// Timeout is DefaultTimeout when zero; KillGrace, StepGrace likewise.
	Timeout   time.Duration
	KillGrace time.Duration
	StepGrace time.Duration
	// TempRoot is where the checkout copies go (os.TempDir() when empty).
	TempRoot string
	// Env is the worker's environment; only EnvAllowList passes.
	Env []string
	// Secrets are the worker's secrets: withheld, and redacted from output.
	Secrets []validation.Secret
	// Tier is validation.TierRemote when empty.
	Tier           validation.Tier
	MaxOutputBytes int
}

// Configured reports whether the settings the executor needs are set.
func (o Options) Configured() bool {
	return strings.TrimSpace(o.Bin) != "" && strings.TrimSpace(o.Coordinator) != ""
}

// Executor runs plans with `crabbox run`.
//
// It ends runs as the self-host executor does: statuses come from the
// markers (Reported); a CLI that fails before any START marker is an
// infrastructure error carrying its last stderr line; markers followed by
// a broken run, or steps left unreported, make the run inconclusive;
// steps past their timeout, or a run past Timeout, are stopped by killing
// the CLI's process tree; ctx cancelled kills it too. When the CLI exits
// on its own, its timing JSON is required and parsed strictly: missing or
// malformed, or an exit code that disagrees with the process's, is an
// infrastructure error. The checkout copy is removed in every outcome.
// Run may be called concurrently.
type Executor struct {
	opts     Options
	env      []string
	withheld []string
}

var _ executors.Executor = (*Executor)(nil)

// New returns a ready executor, a *NotConfiguredError when Bin or
// Coordinator is empty, or an error for an invalid setting.
func New(opts Options) (*Executor, error) {
	var missing []string
	if strings.TrimSpace(opts.Bin) == "" {
		missing = append(missing, "GILF_CRABBOX_BIN")
	}
	if strings.TrimSpace(opts.Coordinator) == "" {
		missing = append(missing, "GILF_CRABBOX_COORDINATOR")
	}
	if len(missing) > 0 {
		return nil, &NotConfiguredError{Executor: executors.NameManagedCrabbox, Missing: missing}
	}
	errs := remote.DefaultDurations("crabbox",
		remote.DurationOption{Name: "timeout", V: &opts.Timeout, Def: DefaultTimeout},
		remote.DurationOption{Name: "kill grace", V: &opts.KillGrace, Def: DefaultKillGrace},
		remote.DurationOption{Name: "step grace", V: &opts.StepGrace, Def: DefaultStepGrace},
	)
	if opts.MaxOutputBytes < 0 {
		errs = append(errs, fmt.Errorf("crabbox max output bytes %d is negative", opts.MaxOutputBytes))
	}
	for _, f := range []struct{ name, v string }{{"provider", opts.Provider}, {"class", opts.Class}} {
		if strings.HasPrefix(f.v, "-") || strings.ContainsAny(f.v, " \t\r\n") {
			errs = append(errs, fmt.Errorf("crabbox %s %q is not a plain word", f.name, f.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("managed-crabbox: %w", err)
	}
	if opts.TempRoot == "" {
		opts.TempRoot = os.TempDir()
	}
	if opts.Tier == "" {
		opts.Tier = validation.TierRemote
	}
	secrets := opts.Secrets
	if opts.Token != "" {
		secrets = append(slices.Clone(secrets), validation.Secret{Name: "GILF_CRABBOX_TOKEN", Value: opts.Token})
	}
	opts.Secrets = secrets
	return &Executor{opts: opts, env: CLIEnv(opts), withheld: remote.SecretNames(secrets)}, nil
}

// Name is executors.NameManagedCrabbox.
func (e *Executor) Name() string { return executors.NameManagedCrabbox }

// Argv is the CLI command line for one run of the shell at shellName
// (relative to the checkout copy, the CLI's working directory).
func Argv(bin, provider, class, shellName string) []string {
	argv := []string{bin, "run"}
	if provider != "" {
		argv = append(argv, "--provider", provider)
	}
	if class != "" {
		argv = append(argv, "--class", class)
	}
	return append(argv, "--timing-json", "--", "sh", shellName)
}

// CLIEnv is the CLI's environment: the allow-listed worker variables
// (none holding a worker secret other than the token, which goes only in
// EnvToken), the coordinator, and the forwarding allow-list pinned to CI.
func CLIEnv(opts Options) []string {
	vals := cmdrun.InheritEnv(opts.Env, EnvAllowList(), opts.Secrets, DefaultPath)
	vals[EnvCoordinator] = opts.Coordinator
	if opts.Token != "" {
		vals[EnvToken] = opts.Token
	}
	vals[EnvEnvAllow] = "CI"
	return cmdrun.EnvList(vals)
}

// Run copies req.Dir, writes the marker shell into the copy and runs it
// with `crabbox run`. See Executor for how a run ends.
func (e *Executor) Run(ctx context.Context, req executors.Request) (executors.Result, error) {
	stderr := logtail.New(StderrTailBytes)
	c := &cmdrun.Command{
		Req: req, Prefix: "crabbox", Program: e.opts.Bin, Who: "crabbox run",
		TempRoot: e.opts.TempRoot, TempPattern: "gilf-crabbox-",
		Stage: func(ctx context.Context, tmp string) (cmdrun.Staging, error) {
			return e.stage(ctx, tmp, req)
		},
		Env: e.env, Secrets: e.opts.Secrets, MaxOutputBytes: e.opts.MaxOutputBytes,
		Timeout: e.opts.Timeout, KillGrace: e.opts.KillGrace, StepGrace: e.opts.StepGrace,
		TimeoutNoStart: fmt.Errorf("crabbox: no START marker within %v; crabbox run was killed", e.opts.Timeout),
		TimeoutWhy:     fmt.Sprintf("timed out: crabbox run exceeded %v and was killed", e.opts.Timeout),
		TimeoutLater:   "not run: crabbox run was killed at its deadline",
		Stderr:         stderr,
		Enforcement:    validation.EnforcedNone,
		Notes: []string{"egress: gilf sends crabbox no egress policy; the machine's network is the provider's",
			"step statuses were reported by the executor: the marker shell's output came back through crabbox run; gilf did not observe the exit statuses"},
	}
	c.Exited = func(x cmdrun.Exit) ([]string, error) { return e.exited(c, x, stderr.Bytes()) }
	return remote.Run(ctx, executors.Result{
		Executor:        e.Name(),
		Tier:            e.opts.Tier,
		SecretsWithheld: slices.Clone(e.withheld),
	}, c)
}

// exited judges a `crabbox run` that ended on its own by its exit status
// and its timing JSON (on stderr, errTail), which is required and parsed
// strictly.
func (e *Executor) exited(c *cmdrun.Command, x cmdrun.Exit, errTail []byte) ([]string, error) {
	code, res := x.Code, x.Res
	timing, terr := ParseTiming(errTail)
	var issues []string
	switch {
	case x.Signal != "":
		if !x.AnyStart {
			return nil, fmt.Errorf("crabbox: crabbox run was killed by signal %s before any START marker; %s", x.Signal, e.lastError(errTail, x.Secrets))
		}
		issues = append(issues, "crabbox run was killed by signal "+x.Signal+" after printing markers")
	case terr != nil:
		return nil, fmt.Errorf("crabbox: run exited with status %d: %w; %s", code, terr, e.lastError(errTail, x.Secrets))
	case timing.ExitCode != code:
		return nil, fmt.Errorf("crabbox: timing JSON says exit code %d but crabbox run exited %d", timing.ExitCode, code)
	case code != 0 && !x.AnyStart:
		return nil, fmt.Errorf("crabbox: run exited with status %d (runStatus %q, errorKind %q) before any START marker; %s",
			code, timing.RunStatus, timing.ErrorKind, e.lastError(errTail, x.Secrets))
	case code != 0:
		issues = append(issues, fmt.Sprintf("crabbox run exited with status %d (runStatus %q, errorKind %q) after printing markers", code, timing.RunStatus, timing.ErrorKind))
	default:
		issues = c.UnreportedIssue(res.Steps)
	}
	if terr == nil {
		res.Notes = append(res.Notes, timing.note())
		for i := range res.Steps {
			res.Steps[i].Cwd = timing.Workdir
		}
	}
	return issues, nil
}

// lastError returns the CLI's last stderr line before its timing JSON,
// redacted and quoted, for an infrastructure error.
func (e *Executor) lastError(tail []byte, secrets []validation.Secret) string {
	lines := strings.Split(strings.TrimRight(string(tail), "\r\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "{") {
			continue
		}
		if len(l) > 500 {
			l = strings.ToValidUTF8(l[:500], "") + "…"
		}
		return fmt.Sprintf("last error line: %q", cmdrun.Diagnostic(l, DiagnosticTailBytes, secrets))
	}
	return "no error line on stderr"
}

// stage copies req.Dir to tmp/repo, removes the repository's crabbox
// config from the copy, and writes the marker shell into it under a
// name no repository file can already have.
func (e *Executor) stage(ctx context.Context, tmp string, req executors.Request) (cmdrun.Staging, error) {
	nonce, err := validation.NewNonce()
	if err != nil {
		return cmdrun.Staging{}, fmt.Errorf("crabbox: %w", err)
	}
	work := filepath.Join(tmp, "repo")
	if _, err := archive.CopyTree(ctx, req.Dir, work, archive.PackOptions{}); err != nil {
		return cmdrun.Staging{}, fmt.Errorf("crabbox: copy %s: %w", req.Dir, err)
	}
	removed, err := removeRepoConfig(work)
	if err != nil {
		return cmdrun.Staging{}, err
	}
	shellName := ".gilf-validate-" + nonce[:12] + ".sh"
	if err := writeNew(work, shellName, validation.BuildShell(req.Plan, nonce)); err != nil {
		return cmdrun.Staging{}, fmt.Errorf("crabbox: write shell: %w", err)
	}
	st := cmdrun.Staging{
		Argv:  Argv(e.opts.Bin, orDefault(req.Run.CrabboxProvider, e.opts.Provider), orDefault(req.Run.CrabboxClass, e.opts.Class), shellName),
		Dir:   work,
		Nonce: nonce,
	}
	if len(removed) > 0 {
		st.Notes = []string{"removed the repository's crabbox config from the synced copy: " + strings.Join(removed, ", ")}
	}
	return st, nil
}

// removeRepoConfig removes RepoConfigFiles from the copy at work and
// names those it removed.
func removeRepoConfig(work string) (removed []string, err error) {
	root, err := os.OpenRoot(work)
	if err != nil {
		return nil, fmt.Errorf("crabbox: %w", err)
	}
	defer root.Close()
	for _, name := range RepoConfigFiles() {
		if _, err := root.Lstat(name); err != nil {
			continue
		}
		if err := root.RemoveAll(name); err != nil {
			return nil, fmt.Errorf("crabbox: remove repository %s: %w", name, err)
		}
		removed = append(removed, name)
	}
	return removed, nil
}

// writeNew writes b to the new file name in dir; a file already there
// is an error.
func writeNew(dir, name string, b []byte) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// orDefault is the run's setting when set, else the executor's.
func orDefault(run, worker string) string {
	if run != "" {
		return run
	}
	return worker
}
