package cmdrun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/validation"
)

// MarkStopped rewrites the steps of a run the host stopped: the open step
// (plan index, or -1 when none was open) ends with status and why, and
// later steps that were not run say laterWhy, unless the install step
// failed (the parser's reason stands then). The parser's complaint that
// the open step has no END is dropped: the host caused it.
func MarkStopped(steps []validation.StepResult, plan validation.Plan, open int, issues []string,
	status validation.Status, why, laterWhy string) []string {
	if open >= 0 && open < len(steps) {
		r := &steps[open]
		r.Status, r.Reason, r.ExitCode = status, why, nil
		drop := remote.UnendedIssue(plan.Steps[open].Name)
		issues = slices.DeleteFunc(issues, func(s string) bool { return s == drop })
	}
	if installFailed(steps) {
		return issues
	}
	for i := range steps {
		if i > open && steps[i].Status == validation.StatusNotRun && plan.Steps[i].Inconclusive == "" {
			steps[i].Reason = laterWhy
		}
	}
	return issues
}

func installFailed(steps []validation.StepResult) bool {
	for _, r := range steps {
		if r.Name == validation.StepInstall {
			return r.Status != validation.StatusPassed && r.Status != validation.StatusNotRun
		}
	}
	return false
}

// Unreported lists the runnable steps a command that exited 0 left
// without markers, when no failed install explains it.
func Unreported(steps []validation.StepResult, plan validation.Plan) []string {
	if installFailed(steps) {
		return nil
	}
	var names []string
	for i, r := range steps {
		if r.Status == validation.StatusNotRun && plan.Steps[i].Inconclusive == "" {
			names = append(names, r.Name)
		}
	}
	return names
}

// DescribeExit says how the command ended, in words for a message.
func DescribeExit(code int, signal string) string {
	if signal != "" {
		return "was killed by signal " + signal
	}
	return fmt.Sprintf("exited with status %d", code)
}

// Diagnostic makes the command's last output (an Observer tail of at
// most tailLimit bytes) fit for an error message: secret values
// redacted, including a secret's tail at the cut start of the kept bytes. The caller quotes it (%q), which escapes control
// characters.
func Diagnostic(tail string, tailLimit int, secrets []validation.Secret) string {
	cut := len(tail) >= tailLimit // the kept bytes may start mid-secret
	for _, s := range secrets {
		v := s.Value
		if len(v) < validation.MinSecretLength {
			continue
		}
		for k := len(v) - 1; cut && k > 0; k-- {
			if strings.HasPrefix(tail, v[len(v)-k:]) {
				tail = "[redacted:" + s.Name + "]" + tail[k:]
				break
			}
		}
		tail = strings.ReplaceAll(tail, v, "[redacted:"+s.Name+"]")
	}
	return tail
}
