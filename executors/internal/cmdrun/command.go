package cmdrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/validation"
)

// Command is the remote.Lifecycle of an executor that runs one command
// on the worker which drives the remote compute and prints the marker
// shell's output (the crabbox CLI, the self-host command). Prepare checks
// the program and stages the run in a temporary directory removed in
// every outcome; the command is the sandbox, so Start has nothing to do;
// Steps runs it as a process group and turns how it ended into step
// results. Build one per run.
type Command struct {
	Req executors.Request
	// Prefix starts error messages ("crabbox"); Program is the command's
	// program, which must be runnable; Who names the command in reasons
	// and issues ("crabbox run", "the self-host command").
	Prefix, Program, Who string
	// TempRoot and TempPattern make the run's temporary directory.
	TempRoot, TempPattern string
	// Stage writes what the command needs into dir, the run's temporary
	// directory: the checkout's copy or archive and the marker shell.
	Stage func(ctx context.Context, dir string) (Staging, error)
	// Env is the command's environment; Secrets the executor's own, which
	// are redacted with the request's.
	Env            []string
	Secrets        []validation.Secret
	MaxOutputBytes int
	// Timeout bounds the whole command; KillGrace and StepGrace are as
	// in Spec.
	Timeout, KillGrace, StepGrace time.Duration
	// TimeoutNoStart is the error of a command killed at Timeout before
	// any START marker; TimeoutWhy and TimeoutLater the reasons of the
	// open step and of the later steps of one killed after.
	TimeoutNoStart           error
	TimeoutWhy, TimeoutLater string
	// Stderr takes the command's stderr; nil: the output observer does.
	Stderr io.Writer
	// Enforcement says who enforces the steps' egress (RecordEgress).
	Enforcement validation.Enforcement
	// Notes are the run's notes; the staging's follow them.
	Notes []string
	// Cwd, when set, is every step's working directory in the record.
	Cwd string
	// Exited judges a command that ended on its own: the issues that make
	// the run inconclusive, or an infrastructure error.
	Exited func(x Exit) (issues []string, err error)

	staging Staging
}

// Staging is what Command.Stage staged.
type Staging struct {
	Argv  []string
	Dir   string // the command's working directory
	Nonce string // the marker shell's
	Notes []string
}

// Exit is how a command ended on its own, for Command.Exited.
type Exit struct {
	Code     int
	Signal   string
	AnyStart bool   // a START marker was seen
	Tail     string // the output's last bytes (Observer.State)
	Secrets  []validation.Secret
	Res      *executors.Result
}

var _ remote.Lifecycle = (*Command)(nil)

// Prepare checks the program and stages the run in its temporary
// directory.
func (c *Command) Prepare(ctx context.Context, res *executors.Result) (remote.Staged, error) {
	if r := executors.ProgramAvailable(res.Executor, c.Program); r != nil {
		return remote.Staged{}, r
	}
	dir, err := os.MkdirTemp(c.TempRoot, c.TempPattern)
	if err != nil {
		return remote.Staged{}, fmt.Errorf("%s: temporary directory: %w", c.Prefix, err)
	}
	cleanup := func() error {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("%s: remove %s: %w", c.Prefix, dir, err)
		}
		return nil
	}
	c.staging, err = c.Stage(ctx, dir)
	return remote.Staged{Cleanup: cleanup}, err
}

// Start has nothing to start: the command is started by Steps.
func (c *Command) Start(context.Context, *executors.Result) (func() error, error) { return nil, nil }

// Steps runs the command and turns how it ended into step results.
func (c *Command) Steps(ctx context.Context, res *executors.Result) error {
	plan := c.Req.Plan
	secrets := append(slices.Clone(c.Req.Secrets), c.Secrets...)
	parser := validation.NewMarkerParser(plan, c.staging.Nonce, validation.CaptureOptions{
		MaxOutputBytes: c.MaxOutputBytes,
		Secrets:        secrets,
		Now:            time.Now,
	})
	obs := NewObserver(plan, c.staging.Nonce, parser, DiagnosticTailBytes)
	stderr := c.Stderr
	if stderr == nil {
		stderr = obs
	}
	pr := Run(ctx, Spec{
		Argv: c.staging.Argv, Env: c.Env, Dir: c.staging.Dir, Stdout: obs, Stderr: stderr,
		Timeout: c.Timeout, KillGrace: c.KillGrace, StepGrace: c.StepGrace,
		Plan: plan, Events: obs.Events(), Progress: c.Req.Progress,
	})
	if pr.StartErr != nil {
		return remote.NotStarted(fmt.Errorf("%s: start %s: %w", c.Prefix, c.Program, pr.StartErr))
	}
	steps, integrity := parser.Finish()
	anyStart, open, tail := obs.State()
	res.Steps = steps
	if c.Cwd != "" {
		for i := range res.Steps {
			res.Steps[i].Cwd = c.Cwd
		}
	}
	executors.RecordEgress(plan, res.Steps, c.Enforcement, nil)
	res.Notes = append(slices.Clone(c.Notes), c.staging.Notes...)
	issues, err := c.ended(ctx, pr, remote.SplitIssues(integrity), open, Exit{AnyStart: anyStart, Tail: tail, Secrets: secrets, Res: res})
	if err != nil {
		return err
	}
	if errors.Is(pr.WaitErr, exec.ErrWaitDelay) {
		res.Notes = append(res.Notes, "the command's output stayed open after it exited; output after that was not read")
	}
	res.Integrity = strings.Join(issues, "; ")
	if pr.KillErr != nil {
		return fmt.Errorf("%s: cleanup: %w", c.Prefix, pr.KillErr)
	}
	return nil
}

// ended rewrites the steps of a command the host stopped, or asks Exited
// about one that ended on its own. An error is returned with the result
// as it stands.
func (c *Command) ended(ctx context.Context, pr Result, issues []string, open int, x Exit) ([]string, error) {
	res, plan := x.Res, c.Req.Plan
	switch pr.Stop {
	case StopCancel:
		issues = MarkStopped(res.Steps, plan, open, issues, validation.StatusKilled,
			"killed: the run was cancelled", "not run: the run was cancelled")
		res.Integrity = strings.Join(issues, "; ")
		return nil, errors.Join(ctx.Err(), pr.KillErr)
	case StopTimeout:
		if !x.AnyStart {
			return nil, errors.Join(c.TimeoutNoStart, pr.KillErr)
		}
		return MarkStopped(res.Steps, plan, open, issues, validation.StatusTimedOut, c.TimeoutWhy, c.TimeoutLater), nil
	case StopStepTimeout:
		st := plan.Steps[pr.StopStep]
		return MarkStopped(res.Steps, plan, pr.StopStep, issues, validation.StatusTimedOut,
			fmt.Sprintf("timed out: no END marker within the step's %v timeout plus %v; the host killed %s", st.Timeout, c.StepGrace, c.Who),
			fmt.Sprintf("not run: the host stopped the run when step %q timed out", st.Name)), nil
	}
	var exited bool
	x.Code, x.Signal, exited = ExitStatus(pr.WaitErr)
	if !exited {
		return nil, fmt.Errorf("%s: wait for %s: %w", c.Prefix, c.Program, pr.WaitErr)
	}
	more, err := c.Exited(x)
	return append(issues, more...), err
}

// UnreportedIssue is the issue of a command that exited 0 without
// reporting every runnable step, or nothing.
func (c *Command) UnreportedIssue(steps []validation.StepResult) []string {
	if missing := Unreported(steps, c.Req.Plan); len(missing) > 0 {
		return []string{fmt.Sprintf("%s exited 0 without reporting step(s) %s", c.Who, strings.Join(missing, ", "))}
	}
	return nil
}
