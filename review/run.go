package review

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// RecordInput is what a validation record is made of, before the outcome
// is derived.
type RecordInput struct {
	Plan     validation.Plan
	Executor string
	Result   executors.Result
	Refusal  *validation.Refusal
	// Skipped, when set, is why policy or diff classification said not to
	// run: the outcome is skipped with that reason.
	Skipped string
	Notes   []string
}

// NewRecord assembles the validation record of SPEC §3.5 from a plan and
// what the executor observed (validation.NewRecord), adding the endings
// that never reach an executor. An unexecuted check is never reported as
// covered: a refusal, a skip or a gap leaves every step not run.
func NewRecord(in RecordInput) validation.Record {
	steps := in.Result.Steps
	if len(steps) == 0 {
		steps = notRun(in.Plan)
	}
	executor := in.Result.Executor
	if executor == "" {
		executor = in.Executor
	}
	rec := validation.NewRecord(validation.RecordInput{
		Plan: in.Plan, Executor: executor, Tier: in.Result.Tier, Platform: in.Result.Platform,
		Steps: steps, Integrity: in.Result.Integrity, SecretsWithheld: in.Result.SecretsWithheld,
		Notes:   append(append([]string(nil), in.Notes...), in.Result.Notes...),
		Started: in.Result.Started, Finished: in.Result.Finished, Phases: in.Result.Phases,
	})
	rec.VCPU, rec.MemoryGiB = in.Result.Resources.VCPU, in.Result.Resources.MemoryGiB
	switch {
	case in.Skipped != "":
		rec.Outcome, rec.Reason, rec.Findings = validation.OutcomeSkipped, in.Skipped, []validation.Finding{}
	case in.Refusal != nil && validation.OperatorCode(in.Refusal.Code):
		// Not the author's to act on: gilf's own error, kept with its
		// code for the operator. Not retried: a retry meets the same
		// configuration.
		rec.Outcome, rec.Reason, rec.Refusal, rec.Findings = validation.OutcomeError, in.Refusal.Msg, in.Refusal, []validation.Finding{}
	case in.Refusal != nil:
		rec.Outcome, rec.Reason, rec.Refusal, rec.Findings = validation.OutcomeRefused, in.Refusal.Msg, in.Refusal, []validation.Finding{}
	}
	return rec
}

// notRun lists the plan's steps as not run, so a record that ran nothing
// still shows what would have run.
func notRun(plan validation.Plan) []validation.StepResult {
	out := make([]validation.StepResult, 0, len(plan.Steps))
	for _, s := range plan.Steps {
		status := validation.StatusNotRun
		reason := "not run"
		if s.Inconclusive != "" {
			status, reason = validation.StatusInconclusive, s.Inconclusive
		}
		out = append(out, validation.StepResult{
			Name: s.Name, Argv: s.Argv, Network: s.Network,
			TimeoutMs: s.Timeout.Milliseconds(), Status: status, Reason: reason,
		})
	}
	return out
}

// Validate runs plan on exec and returns the record. A refusal is a record
// (outcome refused), not an error; any other error from the executor is an
// infrastructure failure and is returned for the caller to retry.
func Validate(ctx context.Context, exec executors.Executor, req executors.Request, notes []string) (validation.Record, error) {
	in := RecordInput{Plan: req.Plan, Executor: exec.Name(), Notes: notes}
	if req.Plan.Gap != nil {
		return NewRecord(in), nil
	}
	// The redaction control comes before any executor: the record must
	// show what ran, and redaction would change such a command. Each
	// decision is recorded, passed or not.
	var decisions []validation.ControlDecision
	for _, c := range []struct {
		name  string
		admit func() *validation.Refusal
	}{
		{validation.ControlRedaction, func() *validation.Refusal { return validation.AdmitCommands(req.Plan, req.Secrets) }},
		{validation.ControlCommandRoot, func() *validation.Refusal { return admitCommandRoot(req.Root, req.Dir) }},
	} {
		ref := c.admit()
		decisions = append(decisions, validation.Decision(c.name, ref))
		if ref != nil {
			in.Refusal = ref
			rec := NewRecord(in)
			rec.Controls = decisions
			return rec, nil
		}
	}
	res, err := runExecutor(ctx, exec, req)
	rec, err := recordFromRun(req.Plan, exec, res, err, notes)
	// The executor's own controls (tier, egress, sandbox user,
	// availability) refuse through it.
	decisions = append(decisions, validation.Decision(validation.ControlExecutor, rec.Refusal))
	rec.Controls = append(decisions, rec.Controls...)
	return rec, err
}

// runExecutor calls Run and turns a panic inside the executor into an
// infrastructure error, so one broken executor cannot take a worker down.
func runExecutor(ctx context.Context, exec executors.Executor, req executors.Request) (res executors.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("executor %s panicked: %v", exec.Name(), p)
		}
	}()
	started := time.Now()
	res, err = exec.Run(ctx, req)
	if res.Started.IsZero() {
		res.Started = started
	}
	if res.Finished.IsZero() {
		res.Finished = time.Now()
	}
	return res, err
}

// admitCommandRoot is the command root control (SPEC §7): the checkout
// the commands run in must lie in the declared root once symlinks are
// resolved. A root that is not declared, or a path that cannot be
// resolved, is refused as unknown; one outside it as an escape.
func admitCommandRoot(root, dir string) *validation.Refusal {
	if root == "" || dir == "" {
		return validation.Refuse(validation.CodeCommandRootUnknown, "no command root was declared for the run")
	}
	r, err1 := filepath.EvalSymlinks(root)
	d, err2 := filepath.EvalSymlinks(dir)
	if err1 != nil || err2 != nil {
		return validation.Refuse(validation.CodeCommandRootUnknown, "the command root or the checkout could not be resolved")
	}
	r, err1 = filepath.Abs(r)
	d, err2 = filepath.Abs(d)
	if err1 != nil || err2 != nil {
		return validation.Refuse(validation.CodeCommandRootUnknown, "the command root or the checkout could not be resolved")
	}
	if !validation.WithinRoot(filepath.Clean(r), filepath.Clean(d)) {
		return validation.Refuse(validation.CodeCommandRootEscape, "the checkout is outside the run's command root")
	}
	return nil
}

// GuardOutput is the secret-leak control (SPEC §7): text about to be
// posted or stored is scanned for the worker's secret values in every
// encoding the redactor knows; what it finds is redacted, and the
// decision names the secrets and offsets, never the values.
func GuardOutput(text string, secrets []validation.Secret) (string, validation.ControlDecision) {
	hits := validation.ScanSecrets([]byte(text), secrets)
	if len(hits) == 0 {
		return text, validation.ControlDecision{Control: validation.ControlSecretLeak, Passed: true}
	}
	var b strings.Builder
	r := validation.NewRedactor(&b, secrets)
	if _, err := r.Write([]byte(text)); err != nil || r.Flush() != nil {
		// A strings.Builder does not fail; never return the text.
		b.Reset()
		b.WriteString("[redacted: the output held a worker secret]")
	}
	where := make([]string, 0, min(len(hits), 10))
	for _, h := range hits[:min(len(hits), 10)] {
		where = append(where, fmt.Sprintf("%s at offset %d (%s)", h.Name, h.Offset, h.Encoding))
	}
	return b.String(), validation.ControlDecision{
		Control: validation.ControlSecretLeak, Code: validation.CodeSecretLeak,
		Detail: fmt.Sprintf("%d occurrence(s) redacted before posting: %s", len(hits), strings.Join(where, ", ")),
	}
}
