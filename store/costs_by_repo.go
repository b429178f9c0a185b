package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CostsByRepo groups the cost spans started at or after since by the
// repository of their job, UTC day, executor and lane: oldest day first,
// then repository, executor and lane. As CostsByDay, a row's USD is nil
// when none of its spans had a price.
func (d *DB) CostsByRepo(ctx context.Context, since time.Time) ([]RepoCostDay, error) {
	out, err := queryRows(ctx, d.r, func(rows *sql.Rows) (RepoCostDay, error) {
		var c RepoCostDay
		var usd sql.NullFloat64
		err := rows.Scan(&c.Repo, &c.Day, &c.Executor, &c.Lane, &c.Spans, &c.Priced, &usd, &c.Seconds,
			&c.InputTokens, &c.OutputTokens)
		c.USD = floatPtr(usd)
		return c, err
	}, `SELECT j.repo, `+d.drv.DayOf("c.started_at")+` AS day,
			c.executor, c.lane, COUNT(*), COUNT(c.usd), SUM(c.usd),
			COALESCE(SUM(c.finished_at - c.started_at), 0) / 1000.0,
			COALESCE(SUM(c.input_tokens), 0), COALESCE(SUM(c.output_tokens), 0)
		FROM cost_spans c JOIN jobs j ON j.id = c.job_id WHERE c.started_at >= ?
		GROUP BY j.repo, day, c.executor, c.lane ORDER BY day, j.repo, c.executor, c.lane`,
		since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("costs by repository: %w", err)
	}
	return out, nil
}
