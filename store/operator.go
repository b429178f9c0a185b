package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrWrongState means an operator asked a job to move from a state it
// cannot move from (a retry of a queued job, a cancel of a done one).
var ErrWrongState = errors.New("job in the wrong state")

// ErrNotNewest means a retry named a job that is no longer its pull
// request's newest: re-running it would review an old head.
var ErrNotNewest = errors.New("not the pull request's newest job")

// MaxListJobs bounds JobFilter.Limit.
const MaxListJobs = 10_000

// DefaultListJobs is JobFilter.Limit's default.
const DefaultListJobs = 50

// JobFilter selects the jobs ListJobs returns. The zero value is the
// newest DefaultListJobs jobs of any state and repository.
type JobFilter struct {
	State State  // "" for any
	Repo  string // owner/name, "" for any
	Limit int    // 0: DefaultListJobs
}

// JobSummary is one job as an operator lists it.
type JobSummary struct {
	ID        int64
	Repo      string
	PR        int
	HeadSHA   string
	State     State
	Attempts  int
	Reruns    int
	Triggers  int
	Reason    string
	LastError string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// States (stats.go) is every job state, in the order of a job's life.

// ValidState reports whether s names a job state.
func ValidState(s State) bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// ListJobs returns the jobs the filter selects, the most recently
// updated first. It reads on the query-only pool: it never waits for the
// writer, and works while `gilf serve` runs on the same file.
func (d *DB) ListJobs(ctx context.Context, f JobFilter) ([]JobSummary, error) {
	if f.State != "" && !ValidState(f.State) {
		return nil, fmt.Errorf("list jobs: unknown state %q (want one of %s)", f.State, stateList(States))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListJobs
	}
	if limit > MaxListJobs {
		return nil, fmt.Errorf("list jobs: limit %d is over %d", limit, MaxListJobs)
	}
	out, err := queryRows(ctx, d.r, func(rows *sql.Rows) (JobSummary, error) {
		var j JobSummary
		var created, updated int64
		err := rows.Scan(&j.ID, &j.Repo, &j.PR, &j.HeadSHA, &j.State, &j.Attempts, &j.Reruns, &j.Triggers,
			&j.Reason, &j.LastError, &created, &updated)
		j.CreatedAt, j.UpdatedAt = fromMs(created), fromMs(updated)
		return j, err
	}, `SELECT id, repo, pr, head_sha, state, attempts, reruns, triggers, reason, last_error, created_at, updated_at
		FROM jobs WHERE (?1 = '' OR state = ?1) AND (?2 = '' OR repo = ?2)
		ORDER BY updated_at DESC, id DESC LIMIT ?3`, string(f.State), f.Repo, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// RetryJob queues a finished job (done, failed, dead, superseded or
// cancelled) again as a re-run, as GitHub's Re-run button does: its
// attempts start over and its rerun count rises, so the run publishes
// under a new id. A queued or running job is ErrWrongState; a job that is
// no longer its pull request's newest is ErrNotNewest; an unknown id is
// ErrNotFound. reason "" is DefaultRerunReason.
func (d *DB) RetryJob(ctx context.Context, id int64, reason string) (JobStatus, error) {
	if reason == "" {
		reason = DefaultRerunReason
	}
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		var repo string
		var state State
		err := tx.QueryRowContext(ctx, `SELECT repo, state FROM jobs WHERE id = ?`, id).Scan(&repo, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if state == StateQueued || state == StateRunning {
			return fmt.Errorf("it is %s; only a finished job (%s) can be retried: %w", state,
				stateList(States[2:]), ErrWrongState)
		}
		n, err := execCount(ctx, tx.StmtContext(ctx, d.stmts.rerunJob), reason, d.nowMs(), nil, id, repo, "")
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("a newer head of its pull request has a job; retry that one: %w", ErrNotNewest)
		}
		return nil
	})
	if err != nil {
		return JobStatus{}, fmt.Errorf("retry job %d: %w", id, err)
	}
	return d.JobState(ctx, id)
}

// CancelJob cancels a queued or running job. A running job loses its
// lease at once: its worker's next heartbeat fails with ErrLeaseLost and
// the worker stops the job, and nothing it finishes afterwards is kept.
// A finished job is ErrWrongState; an unknown id ErrNotFound. reason ""
// is "cancelled by an operator".
func (d *DB) CancelJob(ctx context.Context, id int64, reason string) (JobStatus, error) {
	if reason == "" {
		reason = "cancelled by an operator"
	}
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, sqlCancelJob, reason, d.nowMs(), id)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var state State
		err = tx.QueryRowContext(ctx, `SELECT state FROM jobs WHERE id = ?`, id).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("it is already %s; only a queued or running job can be cancelled: %w", state, ErrWrongState)
	})
	if err != nil {
		return JobStatus{}, fmt.Errorf("cancel job %d: %w", id, err)
	}
	return d.JobState(ctx, id)
}

// sqlCancelJob ends one unfinished job cancelled and takes its lease:
// Heartbeat, Finish and Retry of the old lease find no running job.
const sqlCancelJob = `UPDATE jobs SET state = 'cancelled', reason = ?1, updated_at = ?2,
	lease_owner = NULL, lease_expires_at = NULL
	WHERE id = ?3 AND state IN ('queued', 'running')`

func stateList(s []State) string {
	names := make([]string, len(s))
	for i, v := range s {
		names[i] = string(v)
	}
	return strings.Join(names, ", ")
}
