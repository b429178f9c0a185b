package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// FinishShadow records the shadow lane of run runID (of job jobID) once
// the lane ended, after the run itself was recorded: the primary's result
// never waits for the shadow. The telemetry replaces what Finish wrote
// for the lane while it ran, and the lane's cost spans are added to the
// run. A run without shadow telemetry gets a row of its own.
func (d *DB) FinishShadow(ctx context.Context, jobID, runID int64, sh ShadowTelemetry, spans []CostSpan) error {
	agreed, detail, err := shadowRow(sh)
	if err != nil {
		return err
	}
	err = d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE shadow_telemetry SET executor = ?, outcome = ?, error = ?, steps_agreed = ?,
				steps_total = ?, wall_ms = ?, usd = ?, detail = ? WHERE run_id = ?`,
			sh.Executor, string(sh.Outcome), sh.Err, agreed, len(sh.Steps), sh.Wall.Milliseconds(), sh.USD, detail, runID)
		if err != nil {
			return fmt.Errorf("update shadow telemetry: %w", err)
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO shadow_telemetry (run_id, executor, outcome, error, steps_agreed,
					steps_total, wall_ms, usd, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				runID, sh.Executor, string(sh.Outcome), sh.Err, agreed, len(sh.Steps), sh.Wall.Milliseconds(), sh.USD, detail); err != nil {
				return fmt.Errorf("insert shadow telemetry: %w", err)
			}
		}
		for i, s := range spans {
			if err := insertSpan(ctx, tx, jobID, runID, s); err != nil {
				return fmt.Errorf("insert cost span %d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish shadow of run %d: %w", runID, err)
	}
	return nil
}

// shadowRow is what a shadow_telemetry row holds beside its columns: the
// steps agreed and the JSON detail.
func shadowRow(sh ShadowTelemetry) (agreed int, detail string, err error) {
	for _, s := range sh.Steps {
		if s.Agree {
			agreed++
		}
	}
	b, err := json.Marshal(struct {
		Steps  []StepAgreement    `json:"steps"`
		Record *validation.Record `json:"record,omitempty"`
	}{sh.Steps, sh.Record})
	if err != nil {
		return 0, "", fmt.Errorf("encode shadow telemetry: %w", err)
	}
	return agreed, string(b), nil
}

// insertSpan adds one cost span to a run.
func insertSpan(ctx context.Context, tx *sql.Tx, jobID, runID int64, s CostSpan) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO cost_spans (job_id, run_id, lane, executor, started_at,
			finished_at, vcpu, memory_gib, input_tokens, output_tokens, usd, method) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		jobID, runID, string(s.Lane), s.Executor, ms(s.Started), ms(s.Finished), s.VCPU, s.MemoryGiB,
		s.InputTokens, s.OutputTokens, s.USD, s.Method)
	return err
}
