package main

import (
	"time"

	"github.com/gilf-review/gilf/validation"
)

// recordView is the JSON of gilf validate --json: the validation record
// with each step's output counters at the step's top level (outputBytes,
// truncated, redactions) and the kept text under output. Every field is
// always present; absent values are null or empty, never left out.
type recordView struct {
	Outcome            validation.Outcome  `json:"outcome"`
	Reason             string              `json:"reason"`
	Refusal            *validation.Refusal `json:"refusal"`
	Gap                *validation.Gap     `json:"gap"`
	Executor           string              `json:"executor"`
	IsolationTier      validation.Tier     `json:"isolationTier"`
	PackageManager     string              `json:"packageManager"`
	Platform           validation.Platform `json:"platform"`
	Steps              []stepView          `json:"steps"`
	Findings           []findingView       `json:"findings"`
	ReportedByExecutor bool                `json:"reportedByExecutor"`
	Integrity          string              `json:"integrity"`
	Redactions         int                 `json:"redactions"`
	SecretsWithheld    []string            `json:"secretsWithheld"`
	Notes              []string            `json:"notes"`
	Started            *time.Time          `json:"started"`
	Finished           *time.Time          `json:"finished"`
	Phases             []validation.Phase  `json:"phases"`
	// Base is the comparison with the base (--base, or the reason there
	// was none); null when no step failed.
	Base *validation.BaseRun `json:"base"`
}

type stepView struct {
	Name      string             `json:"name"`
	Command   []string           `json:"command"`
	Cwd       string             `json:"cwd"`
	TimeoutMs int64              `json:"timeoutMs"`
	Network   validation.Network `json:"network"`
	// Egress is null for a step that did not run.
	Egress       *validation.Egress `json:"egress"`
	Status       validation.Status  `json:"status"`
	ExitCode     *int               `json:"exitCode"`
	Signal       *string            `json:"signal"`
	DurationMs   int64              `json:"durationMs"`
	OutputBytes  int64              `json:"outputBytes"`
	OutputSHA256 string             `json:"outputSha256"`
	Truncated    bool               `json:"truncated"`
	Redactions   int                `json:"redactions"`
	Reported     bool               `json:"reportedByExecutor"`
	Reason       string             `json:"reason"`
	Output       outputView         `json:"output"`
	// Origin is a failed step's (introduced, preexisting, flaky,
	// unknown), "" for the others; Failures its parsed failures.
	Origin   validation.Origin        `json:"origin"`
	Failures []validation.StepFailure `json:"failures"`
}

type outputView struct {
	Head string `json:"head"`
	Tail string `json:"tail"`
}

type findingView struct {
	Severity         validation.Severity      `json:"severity"`
	Step             string                   `json:"step"`
	Path             string                   `json:"path"`
	Title            string                   `json:"title"`
	Body             string                   `json:"body"`
	ExecutionClaim   bool                     `json:"executionClaim"`
	Evidence         []validation.EvidenceRef `json:"evidence"`
	EvidenceStatus   string                   `json:"evidenceStatus"`
	DowngradedReason string                   `json:"downgradedReason"`
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func newRecordView(r validation.Record) recordView {
	v := recordView{
		Outcome:            r.Outcome,
		Reason:             r.Reason,
		Refusal:            r.Refusal,
		Gap:                r.Gap,
		Executor:           r.Executor,
		IsolationTier:      r.IsolationTier,
		PackageManager:     string(r.PackageManager),
		Platform:           r.Platform,
		Steps:              []stepView{},
		Findings:           []findingView{},
		ReportedByExecutor: r.ReportedByExecutor,
		Integrity:          r.Integrity,
		Redactions:         r.Redactions,
		SecretsWithheld:    nonNil(r.SecretsWithheld),
		Notes:              nonNil(r.Notes),
		Started:            timePtr(r.Started),
		Finished:           timePtr(r.Finished),
		Phases:             nonNil(r.Phases),
		Base:               r.Base,
	}
	for _, s := range r.Steps {
		sv := stepView{
			Name: s.Name, Command: nonNil(s.Argv), Cwd: s.Cwd, TimeoutMs: s.TimeoutMs, Network: s.Network, Egress: s.Egress,
			Status: s.Status, ExitCode: s.ExitCode, DurationMs: s.DurationMs,
			OutputBytes: s.Output.Bytes, OutputSHA256: s.Output.SHA256, Truncated: s.Output.Truncated,
			Redactions: s.Output.Redactions, Reported: s.Reported, Reason: s.Reason,
			Output: outputView{Head: s.Output.Head, Tail: s.Output.Tail},
			Origin: s.Origin, Failures: nonNil(s.Failures),
		}
		if sv.DurationMs == 0 && s.Duration > 0 {
			sv.DurationMs = s.Duration.Milliseconds()
		}
		if s.Signal != "" {
			sig := s.Signal
			sv.Signal = &sig
		}
		v.Steps = append(v.Steps, sv)
	}
	for _, f := range r.Findings {
		v.Findings = append(v.Findings, findingView{
			Severity: f.Severity, Step: f.Step, Path: f.Path, Title: f.Title, Body: f.Body,
			ExecutionClaim: f.ExecutionClaim, Evidence: nonNil(f.Evidence),
			EvidenceStatus: f.EvidenceStatus, DowngradedReason: f.DowngradedReason,
		})
	}
	return v
}
