package remote

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Provider is a sandbox API's wire calls for one run, which Sandbox
// calls in its phases. A Provider serves one run.
type Provider interface {
	// Create asks for the sandbox and returns its ID. ctx is bounded by
	// the create timeout and not ended by the run's cancellation: a
	// sandbox the API made after the client stopped listening would be
	// orphaned.
	Create(ctx context.Context) (id string, err error)
	// Destroy deletes the sandbox once; a temporary *APIError is retried.
	Destroy(ctx context.Context, id string) error
	// Open readies the created sandbox for the run: its clients, the
	// notes and resources it adds to res, and any secret of its own it
	// adds to s.Secrets.
	Open(ctx context.Context, s *Session, res *executors.Result) error
	// Upload writes the archive (size bytes) into the run's directory.
	Upload(ctx context.Context, arch io.Reader, size int64) error
	// Setup runs the script that extracts the archive and prints the
	// platform (os=, arch=, kernel=, node= lines) with budget as its
	// deadline, writing its output to out.
	Setup(ctx context.Context, budget time.Duration, out io.Writer) (ProcEnd, error)
	// Steps fills sp's provider fields (Cwd, Deadline, Lifetime,
	// BeforeStep) and returns the runner of the steps.
	Steps(sp *StepPlan) StepRunner
	// Collect records the steps' egress and adds the provider's notes
	// once the steps ran.
	Collect(res *executors.Result)
}

// Session is one run in a sandbox as its provider sees it.
type Session struct {
	Req executors.Request
	// ID is the sandbox's, once it was created.
	ID string
	// Run names the run's directory in the sandbox; unique per run.
	Run string
	// Secrets are redacted from every output: the request's and the
	// executor's; a provider adds the credentials it is given.
	Secrets []validation.Secret
}

// SandboxConfig is what Sandbox needs of an executor's settings.
type SandboxConfig struct {
	// Prefix starts error messages and log lines ("e2b"); Executor names
	// the executor in a refusal ("managed-e2b").
	Prefix   string
	Executor string
	// Secrets are the executor's own: redacted with the request's.
	Secrets        []validation.Secret
	MaxOutputBytes int
	// TempRoot, ArchivePattern and MaxArchiveBytes say where and how
	// large the archive is packed (Pack).
	TempRoot        string
	ArchivePattern  string
	MaxArchiveBytes int64
	// CreateTimeout bounds creating the sandbox; CallTimeout each attempt
	// at destroying it and stopping a step; UploadTimeout the upload;
	// SetupTimeout the setup script, which StepGrace past it the host
	// stops waiting for, as for each step.
	CreateTimeout time.Duration
	CallTimeout   time.Duration
	UploadTimeout time.Duration
	SetupTimeout  time.Duration
	StepGrace     time.Duration
	Log           *slog.Logger
}

// Sandbox is the Lifecycle of an executor that drives a provider's
// sandbox API: Prepare makes the marker shells and packs the archive (no
// sandbox when no step is runnable), Start creates the sandbox and
// destroys it in every outcome (retried while the answer is temporary),
// Steps uploads and extracts the archive and runs each step through the
// provider's StepRunner.
type Sandbox struct {
	Config   SandboxConfig
	Provider Provider
	Session
	nonce   string
	scripts [][]byte
	arch    io.Reader
	size    int64
}

// RunSandbox runs req in a sandbox of p's provider: Run with Sandbox's
// phases, at validation.TierRemote, the executor's secrets named as
// withheld.
func RunSandbox(ctx context.Context, cfg SandboxConfig, p Provider, req executors.Request) (executors.Result, error) {
	return Run(ctx, executors.Result{
		Executor:        cfg.Executor,
		Tier:            validation.TierRemote,
		SecretsWithheld: SecretNames(cfg.Secrets),
	}, NewSandbox(cfg, p, req))
}

// NewSandbox is the Lifecycle of one run of req through p.
func NewSandbox(cfg SandboxConfig, p Provider, req executors.Request) *Sandbox {
	return &Sandbox{Config: cfg, Provider: p, Session: Session{
		Req:     req,
		Secrets: append(slices.Clone(req.Secrets), cfg.Secrets...),
	}}
}

func (s *Sandbox) capture() validation.CaptureOptions {
	return validation.CaptureOptions{MaxOutputBytes: s.Config.MaxOutputBytes, Secrets: s.Secrets, Now: time.Now}
}

// Prepare makes the run's shells and packs the archive.
func (s *Sandbox) Prepare(ctx context.Context, res *executors.Result) (Staged, error) {
	cfg, plan := s.Config, s.Req.Plan
	var err error
	s.nonce, s.scripts, err = Shells(plan, MaxShellBytes, cfg.Prefix, cfg.Executor)
	if err != nil {
		return Staged{}, err
	}
	s.Run = s.nonce[:12]
	if !AnyRunnable(plan) {
		out, err := RunSteps(ctx, StepPlan{Plan: plan, Scripts: s.scripts, Nonce: s.nonce, Capture: s.capture()}, nil)
		res.Steps = out.Steps
		res.Notes = []string{"no step was runnable: no sandbox was created"}
		return Staged{Done: true}, err
	}
	arch, size, err := PackArchive(ctx, Pack{
		Dir: s.Req.Dir, TempRoot: cfg.TempRoot, Pattern: cfg.ArchivePattern, MaxBytes: cfg.MaxArchiveBytes,
		Prefix: cfg.Prefix, Executor: cfg.Executor,
	})
	if err != nil {
		return Staged{}, err
	}
	s.arch, s.size = arch, size
	return Staged{Cleanup: func() error { return DiscardArchive(arch, cfg.Prefix) }}, nil
}

// Start creates the sandbox; the run's cancellation does not abandon
// the call, so the sandbox it makes is always destroyed.
func (s *Sandbox) Start(ctx context.Context, _ *executors.Result) (func() error, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.Config.CreateTimeout)
	defer cancel()
	id, err := s.Provider.Create(cctx)
	if err != nil {
		return nil, err
	}
	s.ID = id
	s.Config.Log.InfoContext(ctx, s.Config.Prefix+" sandbox created", logkey.SandboxID, id)
	return func() error { return s.destroy(ctx) }, nil
}

// destroy deletes the sandbox with fresh bounded contexts, so a
// cancelled run still cleans up; temporary API errors are retried
// KillAttempts times.
func (s *Sandbox) destroy(ctx context.Context) error {
	err := Retry(ctx, KillAttempts, s.Config.CallTimeout, TemporaryAPIError, func(kctx context.Context) error {
		return s.Provider.Destroy(kctx, s.ID)
	})
	if err == nil {
		s.Config.Log.InfoContext(ctx, s.Config.Prefix+" sandbox destroyed", logkey.SandboxID, s.ID)
		return nil
	}
	s.Config.Log.ErrorContext(ctx, s.Config.Prefix+" sandbox not destroyed", logkey.SandboxID, s.ID, logkey.Err, err)
	return fmt.Errorf("%s: cleanup: destroy sandbox %s: %w", s.Config.Prefix, s.ID, err)
}

// Steps readies the sandbox, extracts the archive and runs the steps.
// Cancelled before the steps: every step not run, with ctx's error.
func (s *Sandbox) Steps(ctx context.Context, res *executors.Result) error {
	cfg, plan := s.Config, s.Req.Plan
	if cerr := ctx.Err(); cerr != nil {
		res.Steps = NotRun(plan, "", ReasonCancelled)
		return fmt.Errorf("%s: cancelled while the sandbox was created: %w", cfg.Prefix, cerr)
	}
	if err := s.Provider.Open(ctx, &s.Session, res); err != nil {
		return err
	}
	platform, err := s.setup(ctx)
	if err != nil {
		if ctx.Err() != nil {
			res.Steps = NotRun(plan, "", ReasonCancelled)
		}
		return err
	}
	res.Platform = platform
	sp := StepPlan{
		Plan: plan, Scripts: s.scripts, Nonce: s.nonce, Capture: s.capture(), Progress: s.Req.Progress,
		Grace: cfg.StepGrace, StopBound: cfg.CallTimeout,
	}
	runner := s.Provider.Steps(&sp)
	out, err := RunSteps(ctx, sp, runner)
	res.Steps = out.Steps
	res.Notes = append(res.Notes, out.Notes...)
	s.Provider.Collect(res)
	res.Integrity = strings.Join(out.Issues, "; ")
	return err
}

// setup uploads the archive and runs the provider's setup script; any
// failure is an infrastructure error. It returns the platform the script
// printed.
func (s *Sandbox) setup(ctx context.Context) (validation.Platform, error) {
	cfg := s.Config
	uctx, cancel := context.WithTimeout(ctx, cfg.UploadTimeout)
	defer cancel()
	if err := s.Provider.Upload(uctx, s.arch, s.size); err != nil {
		return validation.Platform{}, err
	}
	capture := validation.NewCapture(SetupOutputBytes)
	red := validation.NewRedactor(capture, s.Secrets)
	sctx, scancel := context.WithTimeout(ctx, cfg.SetupTimeout+cfg.StepGrace)
	defer scancel()
	end, err := s.Provider.Setup(sctx, cfg.SetupTimeout, red)
	if ferr := red.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("%s: prepare the checkout: %w", cfg.Prefix, ferr)
	}
	if err != nil {
		return validation.Platform{}, err
	}
	out := capture.Output()
	if !end.Exited || end.Code != 0 {
		return validation.Platform{}, fmt.Errorf("%s: prepare the checkout: the setup command ended (%s): %q", cfg.Prefix, end.Status, out.Head+out.Tail)
	}
	return ParsePlatform(out.Head), nil
}
