package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// JobList reads jobs in the given states, most recently updated first;
// with no state, the queue and what fell out of it (queued, running,
// dead).
func (d *DB) JobList(ctx context.Context, q JobQuery) ([]JobView, error) {
	states := q.States
	if len(states) == 0 {
		states = []string{string(StateQueued), string(StateRunning), string(StateDead)}
	}
	limit := RunQuery{Limit: q.Limit}.PageLimit()
	args := make([]any, 0, len(states)+1)
	for _, s := range states {
		args = append(args, s)
	}
	args = append(args, limit)
	marks := strings.TrimSuffix(strings.Repeat("?,", len(states)), ",")
	rows, err := d.r.QueryContext(ctx, `SELECT `+sqlJobColumns+`
		FROM jobs WHERE state IN (`+marks+`) ORDER BY updated_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	out := []JobView{}
	for rows.Next() {
		j, err := scanJobView(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// RerunJob queues a finished job again as a re-run, as GitHub's Re-run
// button does (reruns.go): its attempts are reset and its rerun count
// raised. It reports the job's state afterwards and whether it was queued
// again: a queued or running job, or one a newer job of its pull request
// replaced, is left as it is. ErrNotFound when there is no such job.
func (d *DB) RerunJob(ctx context.Context, id int64, reason string) (string, bool, error) {
	if reason == "" {
		reason = DefaultRerunReason
	}
	var state string
	var n int64
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		var repo string
		err := tx.QueryRowContext(ctx, `SELECT repo FROM jobs WHERE id = ?`, id).Scan(&repo)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, sqlRerunJob, reason, d.nowMs(), nil, id, repo, "")
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, sqlRerunState, id, repo, "").Scan(&state)
	})
	if err != nil {
		return "", false, fmt.Errorf("re-run job %d: %w", id, err)
	}
	return state, n > 0, nil
}
