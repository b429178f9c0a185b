package remote

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// ProcEnd is how the remote process of one step ended, as the provider
// reported it.
type ProcEnd struct {
	Exited   bool   // the process exited on its own
	Code     int    // its exit status; -1 when it was killed
	Status   string // the provider's words ("exit status 1", "signal: killed")
	TimedOut bool   // the provider said it killed the process at its deadline
}

// StepRunner runs the shell of one step in the sandbox.
type StepRunner interface {
	// RunStep runs script with sh in the checkout, gives the provider
	// budget as the process's deadline and writes the output to out, in
	// order. started is called once the process runs. It returns how the
	// process ended; or ctx's error (wrapped) when ctx ended first; or an
	// infrastructure error.
	RunStep(ctx context.Context, script []byte, budget time.Duration, out io.Writer, started func()) (ProcEnd, error)
	// StopStep kills the process of the step the host stopped waiting
	// for. An error means it may still be running.
	StopStep(ctx context.Context) error
}

// StepPlan is one run of a plan's steps, one shell each.
type StepPlan struct {
	Plan     validation.Plan
	Scripts  [][]byte // per plan step; nil for inconclusive steps
	Nonce    string
	Capture  validation.CaptureOptions
	Progress func(step string, started time.Time)
	Cwd      string
	// Grace is how long past a step's budget the host waits for the
	// provider to report the end before it stops waiting.
	Grace time.Duration
	// StopBound bounds StopStep.
	StopBound time.Duration
	// Deadline is when the sandbox's lifetime ends, less a margin; zero
	// for none. Lifetime names that bound for reasons.
	Deadline time.Time
	Lifetime string
	// BeforeStep, when set, prepares the sandbox for a step (its egress);
	// an error is an infrastructure error.
	BeforeStep func(ctx context.Context, st validation.Step) error
}

// StepsOutcome is what running the steps gave.
type StepsOutcome struct {
	Steps  []validation.StepResult
	Issues []string // integrity problems: the run is inconclusive
	Notes  []string
}

// Reasons for steps that were not run, kept in the words the marker
// parser uses where it has them.
const (
	reasonInstallFailed = "not run: the install step failed"
	ReasonCancelled     = "not run: the run was cancelled"
	reasonKilled        = "killed: the run was cancelled"
	reasonInfra         = "not run: the sandbox failed"
)

// ShellDeadlineSlack is how long past a step's timeout the provider's
// deadline waits for the shell's own timeout to end the step: the
// shell's SIGTERM-to-SIGKILL grace and a second.
const ShellDeadlineSlack = validation.ShellKillGrace + time.Second

// singleStepShells builds one marker shell per runnable step.
func singleStepShells(plan validation.Plan, nonce string) [][]byte {
	scripts := make([][]byte, len(plan.Steps))
	for i, st := range plan.Steps {
		if st.Inconclusive != "" {
			continue
		}
		scripts[i] = validation.BuildShell(singleStep(plan, st), nonce)
	}
	return scripts
}

func singleStep(plan validation.Plan, st validation.Step) validation.Plan {
	return validation.Plan{
		PackageManager:       plan.PackageManager,
		PackageManagerSource: plan.PackageManagerSource,
		Lockfile:             plan.Lockfile,
		Steps:                []validation.Step{st},
		Env:                  plan.Env,
	}
}

// RunSteps runs the plan's steps in order, one process each. An
// infrastructure error stops the run and is returned with the steps so
// far; a cancelled ctx ends the running step killed, the rest not run,
// and returns ctx's error.
func RunSteps(ctx context.Context, sp StepPlan, r StepRunner) (StepsOutcome, error) {
	out := StepsOutcome{Steps: make([]validation.StepResult, len(sp.Plan.Steps))}
	stop := "" // why later steps are not run
	var runErr error
	for i, st := range sp.Plan.Steps {
		res := validation.StepResult{
			Name:      st.Name,
			Argv:      slices.Clone(st.Argv),
			Cwd:       sp.Cwd,
			TimeoutMs: st.Timeout.Milliseconds(),
			Network:   st.Network,
			Reported:  true,
		}
		if st.Inconclusive != "" {
			res.Status, res.Reason = validation.StatusInconclusive, st.Inconclusive
			out.Steps[i] = res
			continue
		}
		if stop == "" && ctx.Err() != nil {
			stop = ReasonCancelled
		}
		budget, limited := sp.budget(st, time.Now())
		if stop == "" && budget <= 0 {
			stop = "not run: " + sp.Lifetime + " ran out"
		}
		if stop != "" {
			res.Status, res.Reason = validation.StatusNotRun, stop
			out.Steps[i] = res
			continue
		}
		if sp.BeforeStep != nil {
			if err := sp.BeforeStep(ctx, st); err != nil {
				runErr, stop = err, reasonInfra
				if ctx.Err() != nil {
					runErr, stop = ctx.Err(), ReasonCancelled
				}
				res.Status, res.Reason = validation.StatusNotRun, stop
				out.Steps[i] = res
				continue
			}
		}
		res, issues, notes, kind, err := runOne(ctx, sp, r, i, st, budget, limited, res)
		out.Steps[i] = res
		out.Issues = append(out.Issues, issues...)
		out.Notes = append(out.Notes, notes...)
		switch kind {
		case oneCancelled:
			runErr, stop = err, ReasonCancelled
		case oneInfra:
			runErr, stop = err, reasonInfra
		case oneUnstoppable:
			stop = fmt.Sprintf("not run: step %q could not be stopped after its timeout", st.Name)
		}
		if stop == "" && st.Name == validation.StepInstall && res.Status != validation.StatusPassed {
			stop = reasonInstallFailed
		}
	}
	if runErr == nil && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	return out, runErr
}

// NotRun is the result of a run that ended before any step ran (cancelled
// while the sandbox was being prepared): every step not run with why,
// inconclusive steps as they are.
func NotRun(plan validation.Plan, cwd, why string) []validation.StepResult {
	steps := make([]validation.StepResult, len(plan.Steps))
	for i, st := range plan.Steps {
		steps[i] = validation.StepResult{
			Name: st.Name, Argv: slices.Clone(st.Argv), Cwd: cwd, TimeoutMs: st.Timeout.Milliseconds(),
			Network: st.Network, Reported: true, Status: validation.StatusNotRun, Reason: why,
		}
		if st.Inconclusive != "" {
			steps[i].Status, steps[i].Reason = validation.StatusInconclusive, st.Inconclusive
		}
	}
	return steps
}

// budget is the step's deadline for the provider: its timeout, cut to
// what is left of the sandbox's lifetime (limited then reports the cut).
// A step without a timeout gets what is left of the lifetime.
func (sp StepPlan) budget(st validation.Step, now time.Time) (d time.Duration, limited bool) {
	d = st.Timeout
	if sp.Deadline.IsZero() {
		return d, false
	}
	left := sp.Deadline.Sub(now)
	if d <= 0 || left < d {
		return left, true
	}
	return d, false
}

type oneKind int

const (
	oneDone        oneKind = iota
	oneCancelled           // ctx ended: stop, return ctx's error
	oneInfra               // the provider failed: stop, return the error
	oneUnstoppable         // timed out and could not be killed: stop
)

// runOne runs the shell of plan step i and says how it ended.
func runOne(ctx context.Context, sp StepPlan, r StepRunner, i int, st validation.Step, budget time.Duration, limited bool,
	base validation.StepResult) (validation.StepResult, []string, []string, oneKind, error) {
	parser := validation.NewMarkerParser(singleStep(sp.Plan, st), sp.Nonce, sp.Capture)
	// The marker shell times a step with a timeout itself (timeout(1),
	// exit 124 with an END marker); the provider's deadline is the
	// backstop just after it, unless the sandbox's own end comes first.
	provider := budget
	if !limited && st.Timeout > 0 {
		provider += ShellDeadlineSlack
	}
	stepCtx, cancel := context.WithTimeout(ctx, provider+sp.Grace)
	defer cancel()
	began := time.Now()
	end, err := r.RunStep(stepCtx, sp.Scripts[i], provider, parser, func() {
		if sp.Progress != nil {
			sp.Progress(st.Name, time.Now())
		}
	})
	elapsed := time.Since(began)
	results, integrity := parser.Finish()
	res := results[0]
	res.Cwd, res.TimeoutMs, res.Reported = base.Cwd, base.TimeoutMs, true
	issues := SplitIssues(integrity)
	ended := res.ExitCode != nil // the step's END marker arrived
	unended := UnendedIssue(st.Name)
	interrupted := func(status validation.Status, why string) {
		res.Status, res.Reason, res.ExitCode = status, why, nil
		res.Duration, res.DurationMs = elapsed, elapsed.Milliseconds()
		issues = slices.DeleteFunc(issues, func(s string) bool { return s == unended })
	}
	switch {
	case err != nil && ctx.Err() != nil:
		if !ended {
			interrupted(validation.StatusKilled, reasonKilled)
		}
		return res, issues, nil, oneCancelled, ctx.Err()
	case err != nil && stepCtx.Err() != nil:
		// The provider did not end the process at its deadline: the host
		// stops waiting and kills it.
		var notes []string
		if !ended {
			interrupted(validation.StatusTimedOut, fmt.Sprintf("timed out: no end within the step's %v budget plus %v; the host stopped waiting", provider, sp.Grace))
		} else {
			notes = append(notes, fmt.Sprintf("step %q printed its END marker but its process did not end within %v; the host stopped it", st.Name, provider+sp.Grace))
		}
		stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), sp.StopBound)
		defer stopCancel()
		if serr := r.StopStep(stopCtx); serr != nil {
			notes = append(notes, fmt.Sprintf("step %q could not be stopped after its timeout: %v", st.Name, serr))
			return res, issues, notes, oneUnstoppable, nil
		}
		return res, issues, notes, oneDone, nil
	case err != nil:
		if !ended {
			interrupted(validation.StatusKilled, "killed: the sandbox failed while the step ran")
		}
		return res, issues, nil, oneInfra, err
	}
	switch {
	case ended:
		if !end.Exited || end.Code != 0 {
			issues = append(issues, fmt.Sprintf("the shell of step %q ended (%s) after its END marker", st.Name, end.Status))
		}
	case end.TimedOut || (!end.Exited && elapsed >= budget):
		why := fmt.Sprintf("timed out: the step ran past its %v timeout; the sandbox stopped it", budget)
		if limited {
			why = fmt.Sprintf("timed out: %s ran out after %v", sp.Lifetime, budget)
		}
		interrupted(validation.StatusTimedOut, why)
	default:
		if res.Status == validation.StatusNotRun {
			res.Status, res.Reason = validation.StatusFailed, "the step's shell ended without reporting a START marker"
		}
		res.Duration, res.DurationMs = elapsed, elapsed.Milliseconds()
		issues = append(issues, fmt.Sprintf("the shell of step %q ended (%s) without an END marker", st.Name, end.Status))
	}
	return res, issues, nil, oneDone, nil
}

// SplitIssues splits the parser's integrity string into its issues.
func SplitIssues(integrity string) []string {
	if integrity == "" {
		return nil
	}
	return strings.Split(integrity, "; ")
}

// UnendedIssue is the parser's issue for a step left open at Finish.
func UnendedIssue(step string) string {
	return fmt.Sprintf("step %q has a START marker but no END marker", step)
}

// Shells makes a run's nonce and one marker shell per runnable step
// (nil for an inconclusive one). A shell over maxBytes is refused
// (script_too_long), naming executor; prefix starts other errors.
func Shells(plan validation.Plan, maxBytes int, prefix, executor string) (nonce string, scripts [][]byte, err error) {
	nonce, err = validation.NewNonce()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", prefix, err)
	}
	scripts = singleStepShells(plan, nonce)
	for i, s := range scripts {
		if len(s) > maxBytes {
			return "", nil, validation.Refuse(validation.CodeScriptTooLong,
				"the shell of step %q is %d bytes, over the %d-byte limit of %s", plan.Steps[i].Name, len(s), maxBytes, executor)
		}
	}
	return nonce, scripts, nil
}

// AnyRunnable reports whether the plan has a step that is not
// inconclusive: without one, no sandbox is needed.
func AnyRunnable(plan validation.Plan) bool {
	return slices.ContainsFunc(plan.Steps, func(s validation.Step) bool { return s.Inconclusive == "" })
}
