package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// pruneRunBatch is how many runs one pruning transaction strips, so the
// writer is never held long while deliveries wait.
const pruneRunBatch = 100

// PruneResult is what one Prune dropped.
type PruneResult struct {
	Before      time.Time // what was older than this was pruned
	Bodies      int       // deliveries whose body is now pruned
	Runs        int       // finished runs whose step output was stripped
	BaseResults int       // stored base step results deleted (base_results.go)
}

// Prune drops the bulk the store keeps of what is older than before,
// and keeps every row of the record: jobs, deliveries (for dedupe and
// history), runs, steps, findings, artifacts and costs stay. The one row
// it deletes is a cache's: base results stored before before (a later
// head on that base validates it again).
//
// Delivery bodies received before before are emptied, their rows marked
// pruned, so a later read answers "pruned" (StoredDelivery.BodyPrunedAt).
//
// Finished jobs' runs that finished before before lose the step output
// heads and tails in their record and shadow telemetry (the bulk of a
// run); every other field stays, findings and costs included.
//
// It is safe while other handles — another process's `gilf serve` — use
// the store.
func (d *DB) Prune(ctx context.Context, before time.Time) (PruneResult, error) {
	res := PruneResult{Before: before.UTC()}
	if before.IsZero() {
		return res, errors.New("prune: no cutoff")
	}
	if err := d.pruneBodies(ctx, before.UnixMilli(), &res); err != nil {
		return res, fmt.Errorf("prune delivery bodies: %w", err)
	}
	if err := d.pruneRuns(ctx, before.UnixMilli(), &res); err != nil {
		return res, fmt.Errorf("prune run output: %w", err)
	}
	if err := d.pruneBaseResults(ctx, before.UnixMilli(), &res); err != nil {
		return res, fmt.Errorf("prune base results: %w", err)
	}
	return res, nil
}

// pruneBodies empties the bodies of the deliveries received before
// cutoff and marks them pruned.
func (d *DB) pruneBodies(ctx context.Context, cutoff int64, res *PruneResult) error {
	now := d.nowMs()
	return d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE deliveries SET body_pruned_at = ?1, body = ?3, body_crc32c = NULL
			WHERE body_pruned_at IS NULL AND received_at < ?2`, now, cutoff, []byte{})
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.Bodies = int(n)
		return err
	})
}

func (d *DB) pruneRuns(ctx context.Context, cutoff int64, res *PruneResult) error {
	for {
		n, err := d.pruneRunBatch(ctx, cutoff)
		res.Runs += n
		if err != nil || n < pruneRunBatch {
			return err
		}
	}
}

// pruneRunBatch strips one batch of runs, in one transaction.
func (d *DB) pruneRunBatch(ctx context.Context, cutoff int64) (int, error) {
	n := 0
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		n = 0
		batch, err := queryRows(ctx, tx, scanPair[int64, string], `SELECT r.id, r.record FROM runs r INDEXED BY runs_unpruned
			JOIN jobs j ON j.id = r.job_id
			WHERE r.output_pruned_at IS NULL AND r.finished_at < ? AND j.state NOT IN ('queued', 'running')
			ORDER BY r.finished_at LIMIT ?`, cutoff, pruneRunBatch)
		if err != nil {
			return err
		}
		now := d.nowMs()
		for _, r := range batch {
			rec, err := stripOutput(r.b, "")
			if err != nil {
				return fmt.Errorf("run %d: %w", r.a, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET record = ?, output_pruned_at = ? WHERE id = ?`, rec, now, r.a); err != nil {
				return err
			}
			if err := stripShadow(ctx, tx, r.a); err != nil {
				return fmt.Errorf("run %d: %w", r.a, err)
			}
			n++
		}
		return nil
	})
	return n, err
}

func stripShadow(ctx context.Context, tx *sql.Tx, run int64) error {
	details, err := queryRows(ctx, tx, scanPair[int64, string], `SELECT id, detail FROM shadow_telemetry WHERE run_id = ?`, run)
	if err != nil {
		return err
	}
	for _, r := range details {
		out, err := stripOutput(r.b, "record")
		if err != nil {
			return fmt.Errorf("shadow telemetry %d: %w", r.a, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE shadow_telemetry SET detail = ? WHERE id = ?`, out, r.a); err != nil {
			return err
		}
	}
	return nil
}

// stripOutput empties the output head and drops the tail of every step
// of the validation.Record JSON in doc (under the key under, when set),
// keeping every other field as it was.
func stripOutput(doc, under string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return "", fmt.Errorf("decode record: %w", err)
	}
	rec := top
	if under != "" {
		rec, _ = top[under].(map[string]any)
	}
	if rec != nil {
		steps, _ := rec["steps"].([]any)
		for _, s := range steps {
			step, _ := s.(map[string]any)
			out, _ := step["output"].(map[string]any)
			if out != nil {
				out["head"] = ""
				delete(out, "tail")
			}
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(top); err != nil {
		return "", fmt.Errorf("encode record: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
