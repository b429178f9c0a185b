package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The attempts of jobs (migration 0008): one row per claim, written by
// triggers on jobs, so each attempt keeps its own error.

// MaxAttemptsShown bounds the attempts JobAttempts reads per job, newest
// first: a job re-run many times still shows on one page.
const MaxAttemptsShown = 50

const sqlJobColumns = `id, repo, pr, head_sha, state, reason, attempts, reruns, last_error,
	next_attempt_at, lease_owner, lease_expires_at, created_at, updated_at`

func scanJobView(sc interface{ Scan(...any) error }) (JobView, error) {
	var j JobView
	var owner sql.NullString
	var exp sql.NullInt64
	var next, created, updated int64
	if err := sc.Scan(&j.ID, &j.Repo, &j.PR, &j.HeadSHA, &j.State, &j.Reason, &j.Attempts, &j.Reruns,
		&j.LastError, &next, &owner, &exp, &created, &updated); err != nil {
		return j, err
	}
	j.LeaseOwner = owner.String
	j.LeaseExpires = fromMs(exp.Int64)
	j.NextAttemptAt, j.CreatedAt, j.UpdatedAt = fromMs(next), fromMs(created), fromMs(updated)
	return j, nil
}

// JobDetail reads one job, its recorded attempts and its runs' ids;
// ErrNotFound when there is no such job.
func (d *DB) JobDetail(ctx context.Context, id int64) (JobDetail, error) {
	var out JobDetail
	j, err := scanJobView(d.r.QueryRowContext(ctx, `SELECT `+sqlJobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return out, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return out, fmt.Errorf("job %d: %w", id, err)
	}
	out.JobView = j
	hist, err := d.JobAttempts(ctx, []int64{id})
	if err != nil {
		return out, err
	}
	out.History = hist[id]
	out.Runs, err = queryRows(ctx, d.r, scanOne[int64], `SELECT id FROM runs WHERE job_id = ? ORDER BY id DESC LIMIT ?`,
		id, MaxAttemptsShown)
	if err != nil {
		return out, fmt.Errorf("job %d: runs: %w", id, err)
	}
	return out, nil
}

// JobAttempts reads the recorded attempts of the given jobs, newest
// first (by re-run, then attempt), at most MaxAttemptsShown per job.
// A job with none recorded (claimed before migration 0008, or never
// claimed) has no entry.
func (d *DB) JobAttempts(ctx context.Context, ids []int64) (map[int64][]JobAttempt, error) {
	out := map[int64][]JobAttempt{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	rows, err := d.r.QueryContext(ctx, `SELECT job_id, rerun, attempt, owner, started_at, ended_at, result, error, reason
		FROM job_attempts WHERE job_id IN (`+marks+`) ORDER BY job_id, rerun DESC, attempt DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("job attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a JobAttempt
		var job, started int64
		var ended sql.NullInt64
		if err := rows.Scan(&job, &a.Rerun, &a.Attempt, &a.Owner, &started, &ended, &a.Result, &a.Error, &a.Reason); err != nil {
			return nil, fmt.Errorf("job attempts: %w", err)
		}
		if len(out[job]) >= MaxAttemptsShown {
			continue
		}
		a.Started, a.Ended = fromMs(started), fromMs(ended.Int64)
		out[job] = append(out[job], a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job attempts: %w", err)
	}
	return out, nil
}

// CancelQueuedJob is CancelJob as the dashboard asks it: the job's state
// afterwards and whether this call cancelled it. A job already finished
// is reported with its state and false; ErrNotFound when there is none.
func (d *DB) CancelQueuedJob(ctx context.Context, id int64, reason string) (string, bool, error) {
	st, err := d.CancelJob(ctx, id, reason)
	if errors.Is(err, ErrWrongState) {
		cur, serr := d.JobState(ctx, id)
		if serr != nil {
			return "", false, serr
		}
		return string(cur.State), false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(st.State), true, nil
}
