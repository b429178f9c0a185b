package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SpendSince sums the known (non-null) estimated cost of an executor's
// spans, every lane, that started at or after since. Unknown costs add
// nothing: the sum is a floor, not a bill. A model's spans are its own
// (executor model:<name>), never an executor's.
func (d *DB) SpendSince(ctx context.Context, executor string, since time.Time) (float64, error) {
	var usd float64
	if err := d.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(usd), 0) FROM cost_spans WHERE executor = ? AND started_at >= ?`,
		executor, since.UnixMilli()).Scan(&usd); err != nil {
		return 0, fmt.Errorf("spend of %s since %s: %w", executor, since.Format(time.RFC3339), err)
	}
	return usd, nil
}

// CostsByDay groups the cost spans started at or after since by UTC day,
// executor and lane, oldest day first.
func (d *DB) CostsByDay(ctx context.Context, since time.Time) ([]CostDay, error) {
	out, err := queryRows(ctx, d.r, func(rows *sql.Rows) (CostDay, error) {
		var c CostDay
		var usd sql.NullFloat64
		err := rows.Scan(&c.Day, &c.Executor, &c.Lane, &c.Spans, &c.Priced, &usd, &c.Seconds, &c.InputTokens, &c.OutputTokens)
		c.USD = floatPtr(usd)
		return c, err
	}, `SELECT `+d.drv.DayOf("started_at")+` AS day,
			executor, lane, COUNT(*), COUNT(usd), SUM(usd), COALESCE(SUM(finished_at - started_at), 0) / 1000.0,
			COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)
		FROM cost_spans WHERE started_at >= ? GROUP BY day, executor, lane ORDER BY day, executor, lane`,
		since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("costs by day: %w", err)
	}
	return out, nil
}
