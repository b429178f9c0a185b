package executortest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// FakeName is Fake's Name when Fake.ExecName is empty.
const FakeName = "fake"

// fakeWaitDelay bounds how long Fake waits for a killed child's pipes.
const fakeWaitDelay = 2 * time.Second

// fakePath is the PATH of the processes Fake.Exec starts; the worker's own
// environment is never passed on.
const fakePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Script says how Fake ends one step.
type Script struct {
	// Status defaults to passed. failed with Exit 0 reports exit code 1.
	Status validation.Status
	Exit   int
	Signal string
	Output string
	Reason string
	// Delay is how long the step "runs". It respects the step's Timeout
	// (the step ends timed_out) and cancellation (killed).
	Delay time.Duration
}

// Fake is a scriptable executor for tests. Steps named in Steps end as
// scripted; other steps pass with no output, or, with Exec set, are run
// as real child processes (no sandbox: tests only) in a private copy of
// req.Dir. Either way Fake keeps the executor lifecycle: plan order,
// inconclusive steps not run, install failure stops later steps,
// timeouts, cancellation, redaction of req.Secrets.
//
// The zero value is ready; set fields before the first Run.
type Fake struct {
	ExecName string
	Tier     validation.Tier
	Platform validation.Platform
	Steps    map[string]Script
	Exec     bool
	// MaxOutputBytes bounds what is kept of one step's output.
	MaxOutputBytes int
	// Refusal, when set, is returned before anything runs.
	Refusal *validation.Refusal
	// Err, when set, is returned after the steps ran, as an
	// infrastructure failure (setup or cleanup broke).
	Err error
	// Panic, when set, makes Run panic with it after its cleanup is armed.
	Panic any
	// Integrity is copied to the Result.
	Integrity string
	// Withheld is copied to Result.SecretsWithheld; nil means the names
	// of req.Secrets, as a real executor reports them.
	Withheld []string

	mu       sync.Mutex
	requests []executors.Request
	cleanups int
}

var _ executors.Executor = (*Fake)(nil)

// Name is ExecName, or FakeName.
func (f *Fake) Name() string {
	if f.ExecName == "" {
		return FakeName
	}
	return f.ExecName
}

// Requests returns the requests Run was given, in call order.
func (f *Fake) Requests() []executors.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]executors.Request(nil), f.requests...)
}

// Cleanups counts the runs whose cleanup ran, panics included.
func (f *Fake) Cleanups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cleanups
}

// Run runs req.Plan as scripted.
func (f *Fake) Run(ctx context.Context, req executors.Request) (res executors.Result, err error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.Refusal != nil {
		return executors.Result{}, f.Refusal
	}
	var work string
	defer func() {
		if work != "" {
			if rerr := os.RemoveAll(work); rerr != nil && err == nil {
				err = fmt.Errorf("fake cleanup: %w", rerr)
			}
		}
		f.mu.Lock()
		f.cleanups++
		f.mu.Unlock()
	}()
	if f.Panic != nil {
		panic(f.Panic)
	}
	tier := f.Tier
	if tier == "" {
		tier = validation.TierNone
	}
	res = executors.Result{
		Executor:        f.Name(),
		Tier:            tier,
		Platform:        f.Platform,
		Integrity:       f.Integrity,
		SecretsWithheld: f.Withheld,
		Started:         time.Now(),
	}
	if res.SecretsWithheld == nil {
		for _, sec := range req.Secrets {
			res.SecretsWithheld = append(res.SecretsWithheld, sec.Name)
		}
	}
	if f.Exec {
		work, err = f.workspace(req.Dir)
		if err != nil {
			return executors.Result{}, err
		}
	}
	stop := "" // why later steps do not run
	for _, st := range req.Plan.Steps {
		r := validation.StepResult{
			Name:      st.Name,
			Argv:      st.Argv,
			Cwd:       work,
			TimeoutMs: st.Timeout.Milliseconds(),
			Network:   st.Network,
		}
		switch {
		case stop != "":
			r.Status, r.Reason = validation.StatusNotRun, stop
		case st.Inconclusive != "":
			r.Status, r.Reason = validation.StatusInconclusive, st.Inconclusive
		default:
			if req.Progress != nil {
				req.Progress(st.Name, time.Now())
			}
			r = f.step(ctx, req, st, r, work)
			if ctx.Err() != nil {
				stop = "not run: the run was cancelled"
			} else if st.Name == validation.StepInstall && r.Status != validation.StatusPassed {
				stop = "not run: install did not pass"
			}
		}
		res.Steps = append(res.Steps, r)
	}
	res.Finished = time.Now()
	if cerr := ctx.Err(); cerr != nil {
		return res, cerr
	}
	return res, f.Err
}

func (f *Fake) workspace(dir string) (string, error) {
	work, err := os.MkdirTemp("", "gilf-fake-")
	if err != nil {
		return "", fmt.Errorf("fake workspace: %w", err)
	}
	if dir != "" {
		if err := os.CopyFS(filepath.Join(work, "repo"), os.DirFS(dir)); err != nil {
			return work, fmt.Errorf("fake workspace copy: %w", err)
		}
	} else if err := os.Mkdir(filepath.Join(work, "repo"), 0o755); err != nil {
		return work, fmt.Errorf("fake workspace: %w", err)
	}
	if err := os.Mkdir(filepath.Join(work, "home"), 0o700); err != nil {
		return work, fmt.Errorf("fake workspace home: %w", err)
	}
	return work, nil
}

// step ends one runnable step, scripted or executed.
func (f *Fake) step(ctx context.Context, req executors.Request, st validation.Step, r validation.StepResult, work string) validation.StepResult {
	start := time.Now()
	r = f.runStep(ctx, req, st, r, work)
	r.Duration = time.Since(start)
	r.DurationMs = r.Duration.Milliseconds()
	return r
}

func (f *Fake) runStep(ctx context.Context, req executors.Request, st validation.Step, r validation.StepResult, work string) validation.StepResult {
	sctx := ctx
	if st.Timeout > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, st.Timeout)
		defer cancel()
	}
	sc, scripted := f.Steps[st.Name]
	if !scripted && f.Exec {
		r.Cwd = filepath.Join(work, "repo")
		return f.exec(ctx, sctx, req, st, r, work)
	}
	if sc.Delay > 0 {
		t := time.NewTimer(sc.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-sctx.Done():
			return interrupted(ctx, st, r)
		}
	}
	c := newCapture(f.MaxOutputBytes)
	c.add([]byte(sc.Output))
	r.Output = c.output(req.Secrets)
	r.Status = sc.Status
	if r.Status == "" {
		r.Status = validation.StatusPassed
	}
	r.Signal = sc.Signal
	r.Reason = sc.Reason
	switch r.Status {
	case validation.StatusPassed:
		r.ExitCode = intp(0)
	case validation.StatusFailed:
		code := sc.Exit
		if code == 0 {
			code = 1
		}
		r.ExitCode = intp(code)
	}
	return r
}

func interrupted(ctx context.Context, st validation.Step, r validation.StepResult) validation.StepResult {
	if ctx.Err() != nil {
		r.Status, r.Reason = validation.StatusKilled, "killed: the run was cancelled"
		return r
	}
	r.Status, r.Reason = validation.StatusTimedOut, fmt.Sprintf("timed out after %s", st.Timeout)
	return r
}

// exec runs the step as a child process group in the workspace copy.
func (f *Fake) exec(ctx, sctx context.Context, req executors.Request, st validation.Step, r validation.StepResult, work string) validation.StepResult {
	if len(st.Argv) == 0 {
		r.Status, r.Reason = validation.StatusFailed, "empty command"
		return r
	}
	c := newCapture(f.MaxOutputBytes)
	cmd := exec.CommandContext(sctx, st.Argv[0], st.Argv[1:]...)
	cmd.Dir = filepath.Join(work, "repo")
	cmd.Env = []string{"PATH=" + fakePath, "HOME=" + filepath.Join(work, "home"), "LANG=C.UTF-8", "CI=true"}
	cmd.Stdout, cmd.Stderr = c, c
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = fakeWaitDelay
	err := cmd.Run()
	if cmd.Process != nil {
		// The group may outlive its leader (a backgrounded grandchild).
		if kerr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			r.Reason = "kill process group: " + kerr.Error()
		}
	}
	r.Output = c.output(req.Secrets)
	if sctx.Err() != nil {
		return interrupted(ctx, st, r)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		r.Status, r.ExitCode = validation.StatusPassed, intp(0)
	case errors.As(err, &ee):
		ws, ok := ee.Sys().(syscall.WaitStatus)
		if ok && ws.Signaled() {
			r.Status, r.Signal = validation.StatusKilled, ws.Signal().String()
			r.Reason = "killed by signal " + ws.Signal().String()
		} else {
			r.Status, r.ExitCode = validation.StatusFailed, intp(ee.ExitCode())
		}
	default:
		r.Status, r.Reason = validation.StatusFailed, "could not start: "+err.Error()
	}
	return r
}

func intp(i int) *int { return &i }
