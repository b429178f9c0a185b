package review

import (
	"context"
	"fmt"
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
		Started: in.Result.Started, Finished: in.Result.Finished,
	})
	rec.VCPU, rec.MemoryGiB = in.Result.Resources.VCPU, in.Result.Resources.MemoryGiB
	switch {
	case in.Skipped != "":
		rec.Outcome, rec.Reason, rec.Findings = validation.OutcomeSkipped, in.Skipped, []validation.Finding{}
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
	res, err := runExecutor(ctx, exec, req)
	return recordFromRun(req.Plan, exec, res, err, notes)
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
