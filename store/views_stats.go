package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// RefusalCounts counts the refused runs finished at or after since by
// refusal code, most frequent first.
func (d *DB) RefusalCounts(ctx context.Context, since time.Time) ([]RefusalCount, error) {
	rows, err := d.r.QueryContext(ctx, `SELECT refusal, COUNT(*), MAX(finished_at) FROM runs
		WHERE refusal <> '' AND finished_at >= ? GROUP BY refusal ORDER BY COUNT(*) DESC, refusal`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("refusals: %w", err)
	}
	defer rows.Close()
	out := []RefusalCount{}
	for rows.Next() {
		var c RefusalCount
		var last int64
		if err := rows.Scan(&c.Code, &c.Runs, &last); err != nil {
			return nil, fmt.Errorf("refusals: %w", err)
		}
		c.Last = fromMs(last)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("refusals: %w", err)
	}
	return out, nil
}

// ShadowPairs sums the shadow comparisons of runs finished at or after
// since by primary and shadow executor.
func (d *DB) ShadowPairs(ctx context.Context, since time.Time) ([]ShadowPair, error) {
	rows, err := d.r.QueryContext(ctx, `SELECT r.executor, s.executor, COUNT(*),
			SUM(CASE WHEN s.outcome <> '' AND s.outcome = r.outcome THEN 1 ELSE 0 END),
			SUM(CASE WHEN s.outcome = '' OR s.error <> '' THEN 1 ELSE 0 END),
			SUM(s.steps_agreed), SUM(s.steps_total)
		FROM shadow_telemetry s JOIN runs r ON r.id = s.run_id WHERE r.finished_at >= ?
		GROUP BY r.executor, s.executor ORDER BY r.executor, s.executor`, ms(since))
	if err != nil {
		return nil, fmt.Errorf("shadow agreement: %w", err)
	}
	defer rows.Close()
	out := []ShadowPair{}
	for rows.Next() {
		var p ShadowPair
		var agreed, errs, steps, total sql.NullFloat64
		if err := rows.Scan(&p.Primary, &p.Shadow, &p.Runs, &agreed, &errs, &steps, &total); err != nil {
			return nil, fmt.Errorf("shadow agreement: %w", err)
		}
		p.OutcomesAgreed, p.Errors = int(agreed.Float64), int(errs.Float64)
		p.StepsAgreed, p.StepsTotal = int(steps.Float64), int(total.Float64)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("shadow agreement: %w", err)
	}
	return out, nil
}
