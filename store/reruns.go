package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// DefaultRerunReason is a re-queued job's reason when the re-run names
// none.
const DefaultRerunReason = "re-run requested"

// The statements of re-runs (intake's, prepared with the others). A re-run
// queues a finished job again — done, failed, dead, superseded or
// cancelled — with its attempts reset and its rerun count raised; a queued
// or running job is left as it is (it has yet to publish), and a job
// whose state is no longer its pull request's newest (another job of the
// pull request has a newer pr_updated_at) is not revived.
const (
	sqlRerunSet = `UPDATE jobs SET state = 'queued', reruns = reruns + 1, attempts = 0, last_error = '',
		reason = ?1, next_attempt_at = ?2, updated_at = ?2, lease_owner = NULL, lease_expires_at = NULL,
		installation_id = COALESCE(?3, installation_id)`
	// ?4 job id, ?5 repo, ?6 head ('' for any).
	sqlRerunJob = sqlRerunSet + `
		WHERE id = ?4 AND repo = ?5 AND (?6 = '' OR head_sha = ?6) AND state NOT IN ('queued', 'running')
		AND NOT EXISTS (SELECT 1 FROM jobs AS n INDEXED BY jobs_pr_updated
			WHERE n.repo = jobs.repo AND n.pr = jobs.pr AND n.pr_updated_at > jobs.pr_updated_at)`
	// What the job a re-run named is now, for the answer.
	sqlRerunState = `SELECT state FROM jobs WHERE id = ?1 AND repo = ?2 AND (?3 = '' OR head_sha = ?3)`
	// ?4 repo, ?5 head. The newest job of each pull request at the head:
	// no job of the pull request is newer, and none at the same head and
	// update is younger (a base change made another). The repository's
	// jobs are read from an index on repo (the unique key's, which holds
	// the head too): a rare event pays for it, not every new job for one
	// more index.
	sqlRerunHead = sqlRerunSet + `
		WHERE id IN (SELECT j.id FROM jobs AS j
			WHERE j.repo = ?4 AND j.head_sha = ?5 AND j.state NOT IN ('queued', 'running')
			AND NOT EXISTS (SELECT 1 FROM jobs AS n INDEXED BY jobs_pr_updated
				WHERE n.repo = j.repo AND n.pr = j.pr AND (n.pr_updated_at > j.pr_updated_at
					OR (n.pr_updated_at = j.pr_updated_at AND n.head_sha = j.head_sha AND n.id > j.id))))
		RETURNING id`
	// The outcome of a job's last run.
	sqlLastOutcome = `SELECT outcome FROM runs WHERE job_id = ? ORDER BY id DESC LIMIT 1`
)

// rerunResult is what a re-run did: how many jobs it queued again, and
// the job to answer with (the one named, or the lowest id re-queued).
type rerunResult struct {
	n     int
	job   int64
	state string
}

// rerunJobs applies a delivery's re-run inside the intake transaction.
func rerunJobs(ctx context.Context, st boundStmts, r validation.Rerun, now int64) (rerunResult, error) {
	reason := r.Reason
	if reason == "" {
		reason = DefaultRerunReason
	}
	var out rerunResult
	if r.JobID != 0 {
		n, err := execCount(ctx, st.rerunJob, reason, now, nullInt(r.InstallationID), r.JobID, r.Repo, r.HeadSHA)
		if err != nil {
			return out, fmt.Errorf("re-run job %d: %w", r.JobID, err)
		}
		out.n = int(n)
		err = st.rerunState.QueryRowContext(ctx, r.JobID, r.Repo, r.HeadSHA).Scan(&out.state)
		switch {
		case errors.Is(err, sql.ErrNoRows): // not a job of this repository: nothing
			return out, nil
		case err != nil:
			return out, fmt.Errorf("re-run job %d: %w", r.JobID, err)
		}
		out.job = r.JobID
		return out, nil
	}
	rows, err := st.rerunHead.QueryContext(ctx, reason, now, nullInt(r.InstallationID), r.Repo, r.HeadSHA)
	if err != nil {
		return out, fmt.Errorf("re-run %s at %s: %w", r.Repo, r.HeadSHA, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return out, fmt.Errorf("re-run %s at %s: %w", r.Repo, r.HeadSHA, err)
		}
		out.n++
		if out.job == 0 || id < out.job {
			out.job = id
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("re-run %s at %s: %w", r.Repo, r.HeadSHA, err)
	}
	if out.n > 0 {
		out.state = string(StateQueued)
	}
	return out, nil
}

// reevaluates reports the triggers that can change what the pipeline
// decides for an unchanged head: the labels (execution.labels filters)
// and the draft flag. Attached to a job whose last run was skipped, they
// run it again.
func reevaluates(trigger string) bool {
	switch trigger {
	case "labeled", "unlabeled", "ready_for_review":
		return true
	}
	return false
}

// skippedLastRun reports whether the job's last run was skipped.
func skippedLastRun(ctx context.Context, st boundStmts, job int64) (bool, error) {
	var outcome string
	err := st.lastOutcome.QueryRowContext(ctx, job).Scan(&outcome)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("last run of job %d: %w", job, err)
	}
	return outcome == string(validation.OutcomeSkipped), nil
}
