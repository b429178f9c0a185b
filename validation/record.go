package validation

import (
	"slices"
	"time"
)

// RecordInput is what the caller knows about a run that was executed.
type RecordInput struct {
	Plan            Plan
	Executor        string
	Tier            Tier
	Platform        Platform
	Steps           []StepResult
	Integrity       string
	SecretsWithheld []string
	Notes           []string
	Started         time.Time
	Finished        time.Time
}

// NewRecord fills the validation record of an executed run: outcome and
// reason from Conclude, findings from Findings, redactions summed over the
// steps, the plan's notes followed by the caller's. Refusals and skips are
// recorded by their callers; they never reach an executor.
func NewRecord(in RecordInput) Record {
	outcome, reason := Conclude(in.Plan, in.Steps, in.Integrity)
	rec := Record{
		Outcome:         outcome,
		Reason:          reason,
		Gap:             in.Plan.Gap,
		Executor:        in.Executor,
		IsolationTier:   in.Tier,
		PackageManager:  in.Plan.PackageManager,
		Platform:        in.Platform,
		Steps:           slices.Clone(in.Steps),
		Findings:        Findings(in.Steps),
		Integrity:       in.Integrity,
		SecretsWithheld: slices.Clone(in.SecretsWithheld),
		Notes:           append(slices.Clone(in.Plan.Notes), in.Notes...),
		Started:         in.Started,
		Finished:        in.Finished,
	}
	if rec.Steps == nil {
		rec.Steps = []StepResult{}
	}
	for _, s := range in.Steps {
		rec.Redactions += s.Output.Redactions
		if s.Reported {
			rec.ReportedByExecutor = true
		}
	}
	return rec
}
