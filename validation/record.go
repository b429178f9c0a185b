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
	Phases          []Phase
}

// NewRecord fills the validation record of an executed run: outcome and
// reason from Conclude, findings from Findings, redactions summed over the
// steps, the plan's notes, then NodeNote's when the platform's node does
// not satisfy the plan's node requirement, then the caller's. Refusals and skips are
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
		Notes:           recordNotes(in),
		Started:         in.Started,
		Finished:        in.Finished,
		Phases:          slices.Clone(in.Phases),
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

// recordNotes are the plan's notes, the node note, and the caller's.
func recordNotes(in RecordInput) []string {
	notes := slices.Clone(in.Plan.Notes)
	if n := NodeNote(in.Plan.Node, in.Platform.Node); n != "" {
		notes = append(notes, n)
	}
	return append(notes, in.Notes...)
}
