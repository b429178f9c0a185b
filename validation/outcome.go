package validation

import (
	"fmt"
	"strings"
	"time"
)

// Conclude derives a run's outcome from its plan, the step results and the
// integrity verdict on the executor's report. It is pure. In order:
//   - a plan with a gap → gap (never a pass);
//   - a non-empty integrity → inconclusive;
//   - results that do not line up with the plan → inconclusive;
//   - any step failed, timed out or killed → failed;
//   - a runnable step not run (cancelled, no markers) → inconclusive;
//   - a step "passed" without an exit status of 0, or with a signal →
//     inconclusive: missing evidence is never success;
//   - every runnable step passed and at least one of them is a script
//     other than install → passed;
//   - otherwise (only inconclusive scripts, nothing proven) → inconclusive.
//
// The reason is one sentence in plain words.
func Conclude(plan Plan, steps []StepResult, integrity string) (Outcome, string) {
	if plan.Gap != nil {
		if plan.Gap.Msg != "" {
			return OutcomeGap, fmt.Sprintf("nothing to run (%s): %s", plan.Gap.Reason, plan.Gap.Msg)
		}
		return OutcomeGap, fmt.Sprintf("nothing to run (%s)", plan.Gap.Reason)
	}
	if integrity != "" {
		return OutcomeInconclusive, "the executor's report cannot be trusted: " + integrity
	}
	if len(plan.Steps) == 0 {
		return OutcomeInconclusive, "the plan has no steps"
	}
	if len(steps) != len(plan.Steps) {
		return OutcomeInconclusive, fmt.Sprintf("%d step results for a plan of %d steps", len(steps), len(plan.Steps))
	}
	for i, s := range steps {
		if s.Name != plan.Steps[i].Name {
			return OutcomeInconclusive, fmt.Sprintf("step %d is %q in the results but %q in the plan", i+1, s.Name, plan.Steps[i].Name)
		}
	}
	for _, s := range steps {
		switch s.Status {
		case StatusFailed, StatusTimedOut, StatusKilled:
			return OutcomeFailed, "step " + s.Name + " " + stepEnding(s)
		}
	}
	proven := false
	for i, s := range steps {
		ps := plan.Steps[i]
		if ps.Inconclusive != "" {
			continue // recorded, never proof, whatever its status says
		}
		switch s.Status {
		case StatusPassed:
			if s.ExitCode == nil || *s.ExitCode != 0 || s.Signal != "" {
				return OutcomeInconclusive, "step " + s.Name + " is marked passed without an exit status of 0"
			}
			if s.Name != StepInstall {
				proven = true
			}
		case StatusNotRun:
			return OutcomeInconclusive, "step " + s.Name + " did not run"
		case StatusInconclusive:
			return OutcomeInconclusive, "step " + s.Name + " was planned to run but ended inconclusive"
		default:
			return OutcomeInconclusive, fmt.Sprintf("step %s has an unknown status %q", s.Name, s.Status)
		}
	}
	if !proven {
		return OutcomeInconclusive, "no script that ran can prove anything: " + inconclusiveNames(plan)
	}
	return OutcomePassed, "every planned step passed"
}

// stepEnding describes how a step that did not pass ended, after its name:
// "failed with exit code 1", "timed out after 10m", "was killed by SIGKILL".
func stepEnding(s StepResult) string {
	var out string
	switch s.Status {
	case StatusTimedOut:
		out = "timed out"
		if s.TimeoutMs > 0 {
			out += " after " + shortDuration(s.TimeoutMs)
		}
	case StatusKilled:
		out = "was killed"
		if why, ok := strings.CutPrefix(s.Reason, "killed by "); ok {
			// The reason names the killer (the memory limit, a
			// signal): said once, not twice.
			return out + " by " + why
		}
		if s.Signal != "" {
			out += " by " + s.Signal
		}
	case StatusFailed:
		switch {
		case s.ExitCode != nil:
			out = fmt.Sprintf("failed with exit code %d", *s.ExitCode)
		case s.Signal != "":
			out = "failed on " + s.Signal
		default:
			out = "failed without an exit status"
		}
	default:
		out = string(s.Status)
	}
	if s.Reason != "" {
		out += " (" + s.Reason + ")"
	}
	return out
}

// shortDuration writes milliseconds as Go does, without zero units:
// 600000 → "10m", 90000 → "1m30s", 1500 → "1.5s".
func shortDuration(ms int64) string {
	s := (time.Duration(ms) * time.Millisecond).String()
	for _, z := range []struct{ from, to string }{{"m0s", "m"}, {"h0m", "h"}} {
		if len(s) > len(z.from) && s[len(s)-len(z.from):] == z.from {
			s = s[:len(s)-len(z.from)] + z.to
		}
	}
	return s
}

func inconclusiveNames(plan Plan) string {
	out := ""
	for _, s := range plan.Steps {
		if s.Inconclusive == "" {
			continue
		}
		if out != "" {
			out += ", "
		}
		out += s.Name + " (" + s.Inconclusive + ")"
	}
	if out == "" {
		return "only the install step ran"
	}
	return out
}
