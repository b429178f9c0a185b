package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// ArtifactStatus says whether the evidence store accepted an upload.
type ArtifactStatus string

const (
	ArtifactPersisted ArtifactStatus = "persisted"
	ArtifactFailed    ArtifactStatus = "failed"
)

// Artifact is one evidence upload, persisted or not.
type Artifact struct {
	Key    string
	Kind   string
	Bytes  int64
	SHA256 string
	Status ArtifactStatus
	URL    string // empty when the store gives no public URL
	Err    string // why the upload failed
}

// Lane says which lane a cost span belongs to; the cost_spans CHECK
// allows these values only.
type Lane string

const (
	LanePrimary Lane = "primary"
	LaneShadow  Lane = "shadow"
	// LaneSemantic is the semantic review's model call: its Executor is
	// the model's card key (model:<name>), its cost from its tokens.
	LaneSemantic Lane = "semantic"
)

// CostSpan is the time an executor was held, or a model call of the
// semantic lane with its tokens, with its estimated cost. Nil VCPU,
// MemoryGiB, InputTokens, OutputTokens or USD mean unknown (or not
// this kind of span), never zero.
type CostSpan struct {
	Lane         Lane
	Executor     string
	Started      time.Time
	Finished     time.Time
	VCPU         *float64
	MemoryGiB    *float64
	InputTokens  *int64
	OutputTokens *int64
	USD          *float64
	Method       string // e.g. "estimate:wall-clock", "estimate:tokens"
}

// StepAgreement compares one step of the primary and the shadow lane.
type StepAgreement struct {
	Step    string            `json:"step"`
	Primary validation.Status `json:"primary"`
	Shadow  validation.Status `json:"shadow"`
	Agree   bool              `json:"agree"`
}

// ShadowTelemetry is the shadow lane's result: telemetry only.
type ShadowTelemetry struct {
	Executor string
	Outcome  validation.Outcome // empty when the lane errored or timed out
	Err      string
	Steps    []StepAgreement
	Wall     time.Duration
	USD      *float64
	Record   *validation.Record
}

// RunRecord is everything one attempt at a job produced.
type RunRecord struct {
	Record    validation.Record
	Artifacts []Artifact
	Spans     []CostSpan
	Shadow    *ShadowTelemetry
}

// Finish records a run — its record, steps, findings, artifacts, cost
// spans and shadow telemetry — and ends the job done, in one transaction
// fenced by the lease: when the lease was rescued, or the job superseded or
// cancelled, nothing is written and the error is ErrLeaseLost.
func (d *DB) Finish(ctx context.Context, l Lease, run RunRecord) (int64, error) {
	var runID int64
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'done', last_error = '', lease_owner = NULL,
			lease_expires_at = NULL, updated_at = ?
			WHERE id = ? AND lease_gen = ? AND lease_owner = ? AND state = 'running'`, d.nowMs(), l.JobID, l.Gen, l.Owner)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrLeaseLost
		}
		runID, err = insertRun(ctx, tx, l, run)
		return err
	})
	if errors.Is(err, ErrLeaseLost) {
		return 0, d.leaseLost(ctx, "finish", l)
	}
	if err != nil {
		return 0, fmt.Errorf("finish job %d: %w", l.JobID, err)
	}
	return runID, nil
}

func insertRun(ctx context.Context, tx *sql.Tx, l Lease, run RunRecord) (int64, error) {
	rec := run.Record
	record, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode record: %w", err)
	}
	var refusal string
	if rec.Refusal != nil {
		refusal = string(rec.Refusal.Code)
	}
	var runID int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO runs (job_id, lease_gen, outcome, reason, refusal, executor, tier,
			record, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		l.JobID, l.Gen, string(rec.Outcome), rec.Reason, refusal, rec.Executor, string(rec.IsolationTier),
		string(record), ms(rec.Started), ms(rec.Finished)).Scan(&runID); err != nil {
		return 0, fmt.Errorf("insert run: %w", err)
	}
	for i, s := range rec.Steps {
		var exit sql.NullInt64
		if s.ExitCode != nil {
			exit = sql.NullInt64{Int64: int64(*s.ExitCode), Valid: true}
		}
		dur := s.DurationMs
		if dur == 0 {
			dur = s.Duration.Milliseconds()
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO steps (run_id, idx, name, status, exit_code, signal, duration_ms,
				reported, reason, output_bytes, output_sha256, truncated, redactions)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			runID, i, s.Name, string(s.Status), exit, s.Signal, dur, s.Reported, s.Reason,
			s.Output.Bytes, s.Output.SHA256, s.Output.Truncated, s.Output.Redactions); err != nil {
			return 0, fmt.Errorf("insert step %d: %w", i, err)
		}
	}
	for i, f := range rec.Findings {
		if _, err := tx.ExecContext(ctx, `INSERT INTO findings (run_id, idx, severity, step, path, title, body,
				execution_claim, evidence_status, downgraded_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			runID, i, string(f.Severity), f.Step, f.Path, f.Title, f.Body, f.ExecutionClaim, f.EvidenceStatus,
			f.DowngradedReason); err != nil {
			return 0, fmt.Errorf("insert finding %d: %w", i, err)
		}
	}
	for i, a := range run.Artifacts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO artifacts (run_id, key, kind, bytes, sha256, status, url, error)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			runID, a.Key, a.Kind, a.Bytes, a.SHA256, string(a.Status), a.URL, a.Err); err != nil {
			return 0, fmt.Errorf("insert artifact %d: %w", i, err)
		}
	}
	for i, s := range run.Spans {
		if err := insertSpan(ctx, tx, l.JobID, runID, s); err != nil {
			return 0, fmt.Errorf("insert cost span %d: %w", i, err)
		}
	}
	if sh := run.Shadow; sh != nil {
		agreed, detail, err := shadowRow(*sh)
		if err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO shadow_telemetry (run_id, executor, outcome, error, steps_agreed,
				steps_total, wall_ms, usd, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			runID, sh.Executor, string(sh.Outcome), sh.Err, agreed, len(sh.Steps), sh.Wall.Milliseconds(), sh.USD,
			detail); err != nil {
			return 0, fmt.Errorf("insert shadow telemetry: %w", err)
		}
	}
	return runID, nil
}
