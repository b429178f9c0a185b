// Package e2b is the managed-e2b executor (SPEC §4.4): a client of E2B's
// public API, written here. It creates a sandbox from a template with an
// explicit lifetime and egress policy, uploads the repository archive to
// envd, runs gilf's marker shell one step per process through envd's
// process API (Connect, server-streaming JSON), and kills the sandbox in
// every outcome.
package e2b

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

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Defaults and limits. Each has an Options field that overrides it.
const (
	DefaultAPIURL   = "https://api.e2b.app"
	DefaultDomain   = "e2b.app"
	DefaultTemplate = "base"
	DefaultUser     = "user"
	// DefaultWorkDir is where each run gets its directory in the sandbox.
	DefaultWorkDir = "/home/user/gilf"
	// DefaultTimeout caps the sandbox's lifetime (GILF_E2B_TIMEOUT_MS):
	// one hour, E2B's limit on its base tier.
	DefaultTimeout = time.Hour
	// DefaultSetupTimeout bounds extracting the archive in the sandbox.
	DefaultSetupTimeout = 5 * time.Minute
	// DefaultStepGrace is how long past a step's budget the host waits
	// for envd to report the process's end before it kills the process.
	DefaultStepGrace = 30 * time.Second
	// DefaultLifetimeMargin is kept between the last step's deadline and
	// the sandbox's own end, and added to the lifetime asked for.
	DefaultLifetimeMargin = 30 * time.Second
	// DefaultCreateTimeout bounds creating a sandbox; DefaultCallTimeout
	// every other management call and the upload's start.
	DefaultCreateTimeout = 2 * time.Minute
	DefaultCallTimeout   = 30 * time.Second
	// DefaultUploadTimeout bounds uploading the archive.
	DefaultUploadTimeout = 10 * time.Minute
	// DefaultMaxArchiveBytes bounds the compressed archive uploaded.
	DefaultMaxArchiveBytes int64 = 512 << 20
	// MaxShellBytes, KillAttempts and SetupOutputBytes are the limits
	// every remote executor shares.
	MaxShellBytes    = remote.MaxShellBytes
	KillAttempts     = remote.KillAttempts
	SetupOutputBytes = remote.SetupOutputBytes
)

const userAgent = "gilf (managed-e2b)"

// Names of the worker settings, for messages.
const (
	EnvAPIKey  = "E2B_API_KEY"
	EnvTimeout = "GILF_E2B_TIMEOUT_MS"
)

// Options configure the executor; cmd/gilf fills them from the
// environment, nothing here reads it. Zero values take the defaults.
type Options struct {
	// APIKey is E2B_API_KEY, a secret: sent only to APIURL in X-API-Key,
	// never logged, never sent to envd or the sandbox.
	APIKey string
	// Template is GILF_E2B_TEMPLATE (template ID or alias).
	Template string
	// TimeoutMs is GILF_E2B_TIMEOUT_MS, the cap on a sandbox's lifetime.
	TimeoutMs int64
	// APIURL is GILF_E2B_API_URL.
	APIURL string
	// EnvdURL is GILF_E2B_ENVD_URL: when set, every envd call goes there
	// (E2B's debug mode, http://localhost:49983) instead of
	// https://49983-<sandboxID>.<domain>.
	EnvdURL string
	// Domain is the sandbox domain when the API's answer names none.
	Domain string
	// CPU and MemoryMB are GILF_E2B_CPU and GILF_E2B_MEMORY_MB. E2B sizes
	// a sandbox from its template; these describe it for cost estimates
	// when the sandbox's own detail cannot be read, and a mismatch is
	// noted.
	CPU      int
	MemoryMB int
	// AllowOut are the hosts the install step may reach; nil means
	// DefaultAllowOut of the plan's package manager together with
	// RegistryHosts.
	AllowOut []string
	// RegistryHosts are the registry hosts of the worker's own allow-list
	// (the local executor's): the install step of an E2B sandbox may
	// reach the same registries. Ignored when AllowOut is set.
	RegistryHosts []string
	// User runs the processes and owns the files.
	User    string
	WorkDir string

	SetupTimeout    time.Duration
	StepGrace       time.Duration
	LifetimeMargin  time.Duration
	CreateTimeout   time.Duration
	CallTimeout     time.Duration
	UploadTimeout   time.Duration
	MaxArchiveBytes int64
	// MaxOutputBytes is what is kept of each step's output.
	MaxOutputBytes int
	// Secrets are the worker's secrets, redacted from output and named
	// as withheld; the API key is added.
	Secrets []validation.Secret
	// TempRoot is where the archive is packed (os.TempDir() when empty).
	TempRoot string
	// HTTPClient is used for every call (redirects are never followed);
	// nil means a client with no overall timeout, since streams are long.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// LogValue keeps the API key out of logs.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("api_url", o.APIURL),
		slog.String("envd_url", o.EnvdURL),
		slog.String("template", o.Template),
		slog.Int64("timeout_ms", o.TimeoutMs),
		slog.Bool("api_key_set", o.APIKey != ""),
	)
}

// Configured reports whether the settings the executor needs are set.
func (o Options) Configured() bool { return strings.TrimSpace(o.APIKey) != "" }

// Executor runs plans in E2B sandboxes, one sandbox per run.
//
// How a run ends:
//
//   - Step statuses come from the marker shell each step runs in, as
//     envd streams its output (Reported is set): gilf does not observe
//     the remote exit statuses. Markers that are forged, duplicated or
//     missing, or a shell that ends badly, make the run inconclusive.
//   - Each step is its own process with Connect-Timeout-Ms set to its
//     budget, so envd kills it at its timeout (timed_out) and the next
//     step still runs; the host waits StepGrace more, then kills it with
//     SendSignal. The budget is cut to what is left of the sandbox's
//     lifetime.
//   - The API or envd failing (401, 429, 5xx, a broken stream, setup
//     failing) is an infrastructure error, typed (*APIError, *RPCError,
//     *StreamError; errors.Is ErrUnauthorized, ErrRateLimited,
//     ErrStreamBroken), never a test failure.
//   - ctx cancelled: the sandbox is killed, the running step ends killed,
//     later steps not_run, and ctx's error is returned.
//   - The sandbox is deleted in every outcome (a fresh bounded context,
//     also on panic); failing to delete it fails the run.
//
// Run may be called concurrently.
type Executor struct {
	opts   Options
	api    *apiClient
	http   *http.Client
	log    *slog.Logger
	secret []validation.Secret
}

var _ executors.Executor = (*Executor)(nil)

// New checks opts and returns a ready executor; a *NotConfiguredError
// when the API key is missing.
func New(opts Options) (*Executor, error) {
	if !opts.Configured() {
		return nil, &NotConfiguredError{Executor: executors.NameManagedE2B, Missing: []string{EnvAPIKey}}
	}
	var errs []error
	def := func(s *string, v string) {
		if strings.TrimSpace(*s) == "" {
			*s = v
		}
	}
	def(&opts.Template, DefaultTemplate)
	def(&opts.APIURL, DefaultAPIURL)
	def(&opts.Domain, DefaultDomain)
	def(&opts.User, DefaultUser)
	def(&opts.WorkDir, DefaultWorkDir)
	if opts.TimeoutMs < 0 {
		errs = append(errs, fmt.Errorf("%s %d is negative", EnvTimeout, opts.TimeoutMs))
	} else if opts.TimeoutMs == 0 {
		opts.TimeoutMs = DefaultTimeout.Milliseconds()
	}
	errs = append(errs, remote.DefaultDurations("e2b",
		remote.DurationOption{Name: "setup timeout", V: &opts.SetupTimeout, Def: DefaultSetupTimeout},
		remote.DurationOption{Name: "step grace", V: &opts.StepGrace, Def: DefaultStepGrace},
		remote.DurationOption{Name: "lifetime margin", V: &opts.LifetimeMargin, Def: DefaultLifetimeMargin},
		remote.DurationOption{Name: "create timeout", V: &opts.CreateTimeout, Def: DefaultCreateTimeout},
		remote.DurationOption{Name: "call timeout", V: &opts.CallTimeout, Def: DefaultCallTimeout},
		remote.DurationOption{Name: "upload timeout", V: &opts.UploadTimeout, Def: DefaultUploadTimeout},
	)...)
	if opts.MaxArchiveBytes < 0 || opts.MaxOutputBytes < 0 || opts.CPU < 0 || opts.MemoryMB < 0 {
		errs = append(errs, errors.New("e2b archive, output, CPU and memory limits must not be negative"))
	}
	if opts.MaxArchiveBytes == 0 {
		opts.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if time.Duration(opts.TimeoutMs)*time.Millisecond <= opts.LifetimeMargin {
		errs = append(errs, fmt.Errorf("%s %d leaves nothing past the %v lifetime margin", EnvTimeout, opts.TimeoutMs, opts.LifetimeMargin))
	}
	var err error
	if opts.APIURL, err = remote.CheckBaseURL("GILF_E2B_API_URL", opts.APIURL); err != nil {
		errs = append(errs, err)
	}
	if opts.EnvdURL != "" {
		if opts.EnvdURL, err = remote.CheckBaseURL("GILF_E2B_ENVD_URL", opts.EnvdURL); err != nil {
			errs = append(errs, err)
		}
	}
	if !domainPattern.MatchString(opts.Domain) {
		errs = append(errs, fmt.Errorf("e2b domain %q is not a host name", opts.Domain))
	}
	if !strings.HasPrefix(opts.WorkDir, "/") || strings.ContainsAny(opts.WorkDir, "\x00\n") {
		errs = append(errs, fmt.Errorf("e2b work dir %q is not an absolute path", opts.WorkDir))
	}
	for _, h := range append(slices.Clone(opts.AllowOut), opts.RegistryHosts...) {
		if h == "" || strings.ContainsAny(h, " \t\r\n/") {
			errs = append(errs, fmt.Errorf("e2b allowed host %q is not a host, IP or CIDR", h))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("managed-e2b: %w", err)
	}
	opts.WorkDir = strings.TrimRight(opts.WorkDir, "/")
	if opts.TempRoot == "" {
		opts.TempRoot = os.TempDir()
	}
	client := remote.Client(opts.HTTPClient)
	log := remote.Logger(opts.Logger)
	secrets := append(slices.Clone(opts.Secrets), validation.Secret{Name: EnvAPIKey, Value: opts.APIKey})
	return &Executor{
		opts:   opts,
		api:    &apiClient{base: opts.APIURL, key: opts.APIKey, http: client},
		http:   client,
		log:    log.With(logkey.Executor, executors.NameManagedE2B),
		secret: secrets,
	}, nil
}

// Name is executors.NameManagedE2B.
func (e *Executor) Name() string { return executors.NameManagedE2B }

// Run runs req.Plan in a new sandbox. See Executor for how a run ends.
func (e *Executor) Run(ctx context.Context, req executors.Request) (executors.Result, error) {
	egress := planEgress(req.Plan, e.opts.AllowOut, e.opts.RegistryHosts)
	lifetime, capped := e.lifetime(req.Plan, req.Run)
	p := &sandboxRun{e: e, req: req, egress: egress, lifetime: lifetime, capped: capped}
	cfg := remote.SandboxConfig{
		Prefix: "e2b", Executor: executors.NameManagedE2B, Secrets: e.secret, MaxOutputBytes: e.opts.MaxOutputBytes,
		TempRoot: e.opts.TempRoot, ArchivePattern: "gilf-e2b-*.tar.gz", MaxArchiveBytes: e.opts.MaxArchiveBytes,
		CreateTimeout: e.opts.CreateTimeout, CallTimeout: e.opts.CallTimeout, UploadTimeout: e.opts.UploadTimeout,
		SetupTimeout: e.opts.SetupTimeout, StepGrace: e.opts.StepGrace, Log: e.log,
	}
	return remote.RunSandbox(ctx, cfg, p, req)
}

// lifetime is the sandbox timeout asked for: setup, every runnable
// step's timeout plus the shell's kill slack and the step grace, and the
// margin, capped by
// TimeoutMs (capped reports the cap). A step without a timeout takes the
// cap. Whole seconds, rounded up.
func (e *Executor) lifetime(plan validation.Plan, run executors.RunConfig) (d time.Duration, capped bool) {
	limit := time.Duration(e.opts.TimeoutMs) * time.Millisecond
	if run.E2BTimeout > 0 && run.E2BTimeout < limit {
		limit = run.E2BTimeout // a repository may shorten it, never lengthen it
	}
	d = e.opts.SetupTimeout + e.opts.LifetimeMargin
	for _, st := range plan.Steps {
		if st.Inconclusive != "" {
			continue
		}
		if st.Timeout <= 0 {
			d = limit + 1
			break
		}
		d += st.Timeout + remote.ShellDeadlineSlack + e.opts.StepGrace
	}
	if d > limit {
		// Stay inside the cap: round down to whole seconds.
		return max(limit.Truncate(time.Second), time.Second), true
	}
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d, false
}

// metadata tags the sandbox with the run's labels, so orphans can be
// found by repository and job.
func metadata(labels map[string]string) map[string]string {
	m := map[string]string{"app": "gilf"}
	for k, v := range labels {
		m[k] = v
	}
	return m
}

// resources reads the sandbox's size for cost estimates: its detail, or
// the configured CPU and memory when the detail cannot be read.
func (e *Executor) resources(ctx context.Context, id string, notes []string) (executors.Resources, []string) {
	configured := executors.Resources{VCPU: float64(e.opts.CPU), MemoryGiB: float64(e.opts.MemoryMB) / 1024}
	dctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
	defer cancel()
	d, err := e.api.detail(dctx, id)
	if err != nil || d.CPUCount <= 0 || d.MemoryMB <= 0 {
		why := "it reported no size"
		if err != nil {
			why = err.Error()
		}
		return configured, append(notes, "sandbox size from configuration: the sandbox detail could not be read: "+why)
	}
	got := executors.Resources{VCPU: float64(d.CPUCount), MemoryGiB: float64(d.MemoryMB) / 1024}
	if (e.opts.CPU > 0 && e.opts.CPU != d.CPUCount) || (e.opts.MemoryMB > 0 && e.opts.MemoryMB != d.MemoryMB) {
		notes = append(notes, fmt.Sprintf("the template gives %d vCPU and %d MB, not the configured %d vCPU and %d MB (E2B sizes sandboxes by template)",
			d.CPUCount, d.MemoryMB, e.opts.CPU, e.opts.MemoryMB))
	}
	return got, notes
}

// template is the run's E2B template when its config names one, else the
// executor's.
func (e *Executor) template(run executors.RunConfig) string {
	if run.E2BTemplate != "" {
		return run.E2BTemplate
	}
	return e.opts.Template
}
