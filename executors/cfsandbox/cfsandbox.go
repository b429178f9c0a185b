// Package cfsandbox is the managed-cf-sandbox executor: a client of
// Cloudflare's sandbox bridge Worker (cloudflare/sandbox-sdk, bridge/worker),
// the HTTP API a non-Worker program uses to drive Cloudflare Sandbox
// containers. It creates a sandbox, uploads the repository archive into
// /workspace, runs gilf's marker shell one step per exec (each an SSE
// stream of base64 output and an exit event), and destroys the sandbox in
// every outcome.
package cfsandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Defaults and limits. Each has an Options field that overrides it.
const (
	// Workspace is the only directory the bridge lets files and commands
	// use.
	Workspace = "/workspace"
	// DefaultTimeout bounds a whole run (GILF_CF_SANDBOX_TIMEOUT_MS): the
	// bridge has no sandbox lifetime, so gilf keeps its own.
	DefaultTimeout = 45 * time.Minute
	// DefaultSetupTimeout bounds extracting the archive.
	DefaultSetupTimeout = 5 * time.Minute
	// DefaultStepGrace is how long past a step's budget the host waits
	// for the exit event before it stops the run.
	DefaultStepGrace = 30 * time.Second
	// DefaultCallTimeout bounds create and delete; DefaultUploadTimeout
	// the upload.
	DefaultCallTimeout   = 60 * time.Second
	DefaultUploadTimeout = 5 * time.Minute
	// DefaultMaxArchiveBytes is the bridge's own ceiling on a file write
	// (32 MiB; it answers 413 above it).
	DefaultMaxArchiveBytes int64 = 32 << 20
	// MaxShellBytes, KillAttempts and SetupOutputBytes are the limits
	// every remote executor shares.
	MaxShellBytes    = remote.MaxShellBytes
	KillAttempts     = remote.KillAttempts
	SetupOutputBytes = remote.SetupOutputBytes
)

const userAgent = "gilf (managed-cf-sandbox)"

// Names of the worker settings, for messages.
const (
	EnvEnabled = "GILF_CF_SANDBOX_ENABLED"
	EnvURL     = "GILF_CF_SANDBOX_URL"
	EnvToken   = "GILF_CF_SANDBOX_TOKEN"
	EnvTimeout = "GILF_CF_SANDBOX_TIMEOUT_MS"
)

// Options configure the executor; cmd/gilf fills them.
type Options struct {
	// Enabled is GILF_CF_SANDBOX_ENABLED=1; without it the executor is
	// not configured.
	Enabled bool
	// URL is GILF_CF_SANDBOX_URL, the bridge Worker's base URL.
	URL string
	// Token is GILF_CF_SANDBOX_TOKEN (the bridge's SANDBOX_API_KEY), a
	// secret: sent only to URL as a bearer token, never logged.
	Token string
	// Timeout is GILF_CF_SANDBOX_TIMEOUT_MS, the bound on a whole run.
	Timeout         time.Duration
	SetupTimeout    time.Duration
	StepGrace       time.Duration
	CallTimeout     time.Duration
	UploadTimeout   time.Duration
	MaxArchiveBytes int64
	MaxOutputBytes  int
	// Secrets are the worker's secrets: redacted from output and named as
	// withheld; the token is added.
	Secrets    []validation.Secret
	TempRoot   string
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// LogValue keeps the token out of logs.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Bool("enabled", o.Enabled),
		slog.String("url", o.URL),
		slog.Bool("token_set", o.Token != ""),
	)
}

// Configured reports whether the executor is enabled and has its URL and
// token.
func (o Options) Configured() bool { return len(o.missing()) == 0 }

func (o Options) missing() []string {
	var m []string
	if !o.Enabled {
		m = append(m, EnvEnabled+"=1")
	}
	if strings.TrimSpace(o.URL) == "" {
		m = append(m, EnvURL)
	}
	if strings.TrimSpace(o.Token) == "" {
		m = append(m, EnvToken)
	}
	return m
}

// Executor runs plans in Cloudflare sandboxes through the bridge, one
// sandbox per run.
//
// How a run ends:
//
//   - Step statuses come from each step's marker shell as the bridge
//     streams its output (Reported is set).
//   - Each step is one exec with timeout_ms set to its budget; the
//     sandbox stops it at its timeout (timed_out) and the next step runs.
//     When no exit event comes within StepGrace more, the host stops
//     waiting; the bridge cannot stop one command, so later steps are
//     not run.
//   - The bridge failing (401, 429/503, 5xx, a cut or malformed stream,
//     an error event, setup failing) is an infrastructure error, typed
//     (*APIError, *ExecError, *StreamError; errors.Is ErrUnauthorized,
//     ErrRateLimited, ErrStreamBroken).
//   - ctx cancelled: the sandbox is destroyed, the running step ends
//     killed, later steps not_run, and ctx's error is returned.
//   - The sandbox is destroyed in every outcome (a fresh bounded context,
//     also on panic); failing to destroy it fails the run.
//
// Run may be called concurrently.
type Executor struct {
	opts   Options
	bridge *bridgeClient
	log    *slog.Logger
	secret []validation.Secret
}

var _ executors.Executor = (*Executor)(nil)

// New checks opts and returns a ready executor; a *NotConfiguredError
// when it is not enabled or lacks its URL or token.
func New(opts Options) (*Executor, error) {
	if m := opts.missing(); len(m) > 0 {
		return nil, &NotConfiguredError{Executor: executors.NameManagedCFSandbox, Missing: m}
	}
	errs := remote.DefaultDurations("cf-sandbox",
		remote.DurationOption{Name: "timeout", V: &opts.Timeout, Def: DefaultTimeout},
		remote.DurationOption{Name: "setup timeout", V: &opts.SetupTimeout, Def: DefaultSetupTimeout},
		remote.DurationOption{Name: "step grace", V: &opts.StepGrace, Def: DefaultStepGrace},
		remote.DurationOption{Name: "call timeout", V: &opts.CallTimeout, Def: DefaultCallTimeout},
		remote.DurationOption{Name: "upload timeout", V: &opts.UploadTimeout, Def: DefaultUploadTimeout},
	)
	if opts.MaxArchiveBytes < 0 || opts.MaxOutputBytes < 0 {
		errs = append(errs, errors.New("cf-sandbox archive and output limits must not be negative"))
	}
	if opts.MaxArchiveBytes == 0 {
		opts.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	base, err := remote.CheckBaseURL(EnvURL, opts.URL)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("managed-cf-sandbox: %w", err)
	}
	if opts.TempRoot == "" {
		opts.TempRoot = os.TempDir()
	}
	// A redirect would carry the bearer token only to the same host, but
	// there is no reason to follow one: it surfaces as an *APIError.
	client := remote.Client(opts.HTTPClient)
	log := remote.Logger(opts.Logger)
	return &Executor{
		opts:   opts,
		bridge: &bridgeClient{base: base, token: opts.Token, http: client},
		log:    log.With(logkey.Executor, executors.NameManagedCFSandbox),
		secret: append(slices.Clone(opts.Secrets), validation.Secret{Name: EnvToken, Value: opts.Token}),
	}, nil
}

// Name is executors.NameManagedCFSandbox.
func (e *Executor) Name() string { return executors.NameManagedCFSandbox }

// Run runs req.Plan in a new sandbox. See Executor for how a run ends.
func (e *Executor) Run(ctx context.Context, req executors.Request) (executors.Result, error) {
	cfg := remote.SandboxConfig{
		Prefix: "cf-sandbox", Executor: executors.NameManagedCFSandbox, Secrets: e.secret, MaxOutputBytes: e.opts.MaxOutputBytes,
		TempRoot: e.opts.TempRoot, ArchivePattern: "gilf-cfsandbox-*.tar.gz", MaxArchiveBytes: e.opts.MaxArchiveBytes,
		CreateTimeout: e.opts.CallTimeout, CallTimeout: e.opts.CallTimeout, UploadTimeout: e.opts.UploadTimeout,
		SetupTimeout: e.opts.SetupTimeout, StepGrace: e.opts.StepGrace, Log: e.log,
	}
	return remote.RunSandbox(ctx, cfg, &sandboxRun{e: e, req: req, deadline: time.Now().Add(e.opts.Timeout)}, req)
}

// setupScript prints the platform and extracts the archive <run>.tar.gz
// into <run>/ (the archive's one top directory is archive.PackRoot), in
// /workspace, before any code of the repository runs.
func setupScript(run string) string {
	return strings.Join([]string{
		"set -eu",
		`printf 'os=%s\n' "$(uname -s)"`,
		`printf 'arch=%s\n' "$(uname -m)"`,
		`printf 'kernel=%s\n' "$(uname -r)"`,
		`printf 'node=%s\n' "$(node --version 2>/dev/null || true)"`,
		"mkdir -p " + run,
		"tar -xzf " + run + ".tar.gz -C " + run,
		"rm -f " + run + ".tar.gz",
		"test -d " + run + "/" + archive.PackRoot,
	}, "\n") + "\n"
}
