package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// intakeReq is one RecordDelivery call waiting for its batch's commit.
type intakeReq struct {
	d    validation.Delivery
	job  *validation.JobSpec
	done chan intakeRes // buffered 1: the writer never blocks on it
}

type intakeRes struct {
	res validation.RecordResult
	err error
}

// RecordDelivery durably records a webhook delivery, the job it asks for
// (created, or attached to the existing job for the same reviewed state),
// the supersession of older heads of the same pull request, and the
// cancellation it carries, all in one transaction. It returns only after
// that transaction committed (or failed): a caller that answers 2xx after a
// nil error never acknowledges a delivery that is not on disk.
//
// A delivery id that is already stored is a Duplicate: nothing is written.
// Concurrent calls are group-committed: they share one transaction. When
// one delivery fails inside it, the batch is rolled back and each delivery
// is committed alone, so the bad one fails alone.
func (d *DB) RecordDelivery(ctx context.Context, del validation.Delivery, job *validation.JobSpec) (validation.RecordResult, error) {
	if err := checkDelivery(del, job); err != nil {
		return validation.RecordResult{}, fmt.Errorf("record delivery %q: %w", del.ID, err)
	}
	r := &intakeReq{d: del, job: job, done: make(chan intakeRes, 1)}
	select {
	case d.reqs <- r:
	case <-d.quit:
		return validation.RecordResult{}, fmt.Errorf("record delivery %q: %w", del.ID, ErrClosed)
	case <-ctx.Done():
		return validation.RecordResult{}, fmt.Errorf("record delivery %q: %w", del.ID, ctx.Err())
	}
	select {
	case res := <-r.done:
		if res.err != nil {
			return validation.RecordResult{}, fmt.Errorf("record delivery %q: %w", del.ID, res.err)
		}
		return res.res, nil
	case <-ctx.Done():
		// The batch may still commit; a redelivery is then a duplicate.
		return validation.RecordResult{}, fmt.Errorf("record delivery %q: %w", del.ID, ctx.Err())
	}
}

func checkDelivery(del validation.Delivery, job *validation.JobSpec) error {
	switch {
	case del.ID == "":
		return errors.New("empty delivery id")
	case del.Event == "":
		return errors.New("empty event")
	case del.Status == "":
		return errors.New("empty status")
	case del.Body == nil:
		return errors.New("nil body")
	case del.ReceivedAt.IsZero():
		return errors.New("zero received time")
	}
	if job != nil && (job.Repo == "" || job.PR <= 0 || job.HeadSHA == "") {
		return fmt.Errorf("incomplete job spec (repo %q, pr %d, head %q)", job.Repo, job.PR, job.HeadSHA)
	}
	if c := del.Cancel; c != nil && c.InstallationID == 0 {
		return errors.New("cancellation without an installation id")
	}
	return nil
}

// writer is the group-commit loop: it takes one pending delivery, then
// every other delivery already waiting (up to MaxBatch), and commits them
// together. It exits when the store closes.
func (d *DB) writer(ctx context.Context) {
	defer d.wg.Done()
	batch := make([]*intakeReq, 0, d.opts.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-d.reqs:
			batch = append(batch, r)
		case <-d.quit:
			return
		}
	fill:
		for len(batch) < d.opts.MaxBatch {
			select {
			case r := <-d.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		d.commitBatch(ctx, batch)
	}
}

func (d *DB) commitBatch(ctx context.Context, batch []*intakeReq) {
	results := make([]intakeRes, len(batch))
	err := d.runBatch(ctx, batch, results)
	var bad *itemError
	if errors.As(err, &bad) && len(batch) > 1 {
		// One delivery failed and took the shared transaction with it:
		// commit each alone, so only the bad one fails.
		d.log.Warn("group commit failed on one delivery; committing one by one", "delivery_id", batch[bad.i].d.ID, "err", bad.err)
		for i, r := range batch {
			if err := d.runBatch(ctx, batch[i:i+1], results[i:i+1]); err != nil {
				results[i] = intakeRes{err: err}
			}
			r.done <- results[i]
		}
		return
	}
	for i, r := range batch {
		if err != nil {
			results[i] = intakeRes{err: err}
		}
		r.done <- results[i]
	}
}

// itemError is one delivery's failure inside a batch.
type itemError struct {
	i   int
	err error
}

func (e *itemError) Error() string { return e.err.Error() }
func (e *itemError) Unwrap() error { return e.err }

// runBatch records a batch in one transaction: all or nothing.
func (d *DB) runBatch(ctx context.Context, batch []*intakeReq, results []intakeRes) (err error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, rollback(tx))
		}
	}()
	st := d.stmts.in(ctx, tx)
	for i, r := range batch {
		res, err := d.recordTx(ctx, st, r.d, r.job)
		if err != nil {
			return &itemError{i: i, err: err} // the caller logs it, once
		}
		results[i] = intakeRes{res: res}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// recordTx writes one delivery inside the batch transaction.
func (d *DB) recordTx(ctx context.Context, st boundStmts, del validation.Delivery, job *validation.JobSpec) (validation.RecordResult, error) {
	var res validation.RecordResult
	var jobID sql.NullInt64
	var state string
	err := st.selDelivery.QueryRowContext(ctx, del.ID).Scan(&jobID, &state)
	switch {
	case err == nil:
		return validation.RecordResult{Duplicate: true, JobID: jobID.Int64, JobState: state}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return res, fmt.Errorf("look up delivery: %w", err)
	}
	now := d.nowMs()
	if job != nil {
		updated := ms(job.PRUpdatedAt)
		var stale bool
		if err := st.newerHead.QueryRowContext(ctx, job.Repo, job.PR, job.HeadSHA, job.BaseRef, updated).Scan(&stale); err != nil {
			return res, fmt.Errorf("look up newer heads: %w", err)
		}
		want, reason := StateQueued, ""
		if stale {
			want, reason = StateSuperseded, "a newer head of this pull request was already received"
		}
		var triggers int
		if err := st.upsertJob.QueryRowContext(ctx,
			job.Repo, job.PR, job.HeadSHA, job.HeadRepo, job.BaseRef, nullInt(job.InstallationID), del.ID, job.Trigger,
			updated, string(want), reason, now, now, now,
		).Scan(&res.JobID, &res.JobState, &triggers); err != nil {
			return res, fmt.Errorf("upsert job: %w", err)
		}
		res.JobCreated = triggers == 1
		jobID = sql.NullInt64{Int64: res.JobID, Valid: true}
		if js := State(res.JobState); !stale && (js == StateQueued || js == StateRunning) {
			n, err := execCount(ctx, st.supersede,
				fmt.Sprintf("superseded by head %s (job %d)", job.HeadSHA, res.JobID), now,
				job.Repo, job.PR, job.HeadSHA, job.BaseRef, updated)
			if err != nil {
				return res, fmt.Errorf("supersede older heads: %w", err)
			}
			res.Superseded = int(n)
		}
	}
	if c := del.Cancel; c != nil {
		n, err := cancelJobs(ctx, st.cancel, *c, now)
		if err != nil {
			return res, err
		}
		res.Cancelled = int(n)
	}
	if _, err := st.insDelivery.ExecContext(ctx,
		del.ID, del.Event, del.Action, nullInt(del.InstallationID), del.Repo, nullInt(int64(del.PR)), del.HeadSHA,
		ms(del.ReceivedAt), string(del.Status), del.Reason, jobID, del.Body,
	); err != nil {
		return res, fmt.Errorf("insert delivery: %w", err)
	}
	return res, nil
}

func cancelJobs(ctx context.Context, stmt *sql.Stmt, c validation.Cancellation, now int64) (int64, error) {
	repos := c.Repos
	if repos == nil {
		repos = []string{}
	}
	list, err := json.Marshal(repos)
	if err != nil {
		return 0, fmt.Errorf("cancel installation %d: %w", c.InstallationID, err)
	}
	reason := c.Reason
	if reason == "" {
		reason = fmt.Sprintf("installation %d removed", c.InstallationID)
	}
	n, err := execCount(ctx, stmt, reason, now, c.InstallationID, string(list), string(list), c.PR)
	if err != nil {
		return 0, fmt.Errorf("cancel installation %d: %w", c.InstallationID, err)
	}
	return n, nil
}

func execCount(ctx context.Context, stmt *sql.Stmt, args ...any) (int64, error) {
	r, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	return n, nil
}

// The statements of intake, prepared once on the writer connection.
const (
	sqlSelDelivery = `SELECT d.job_id, COALESCE(j.state, '') FROM deliveries d
		LEFT JOIN jobs j ON j.id = d.job_id WHERE d.id = ?`
	sqlNewerHead = `SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_pr_updated WHERE repo = ?1 AND pr = ?2
		AND (head_sha <> ?3 OR base_ref <> ?4) AND pr_updated_at > ?5)`
	sqlUpsertJob = `INSERT INTO jobs (repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
		trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (repo, pr, head_sha, base_ref) DO UPDATE SET
		triggers = jobs.triggers + 1,
		installation_id = COALESCE(excluded.installation_id, jobs.installation_id),
		head_repo = CASE WHEN excluded.head_repo <> '' THEN excluded.head_repo ELSE jobs.head_repo END,
		pr_updated_at = MAX(jobs.pr_updated_at, excluded.pr_updated_at),
		state = CASE WHEN ` + requeue + ` THEN 'queued' ELSE jobs.state END,
		reason = CASE WHEN ` + requeue + ` THEN '' ELSE jobs.reason END,
		attempts = CASE WHEN ` + requeue + ` THEN 0 ELSE jobs.attempts END,
		last_error = CASE WHEN ` + requeue + ` THEN '' ELSE jobs.last_error END,
		next_attempt_at = CASE WHEN ` + requeue + ` THEN excluded.next_attempt_at ELSE jobs.next_attempt_at END,
		updated_at = excluded.updated_at
	RETURNING id, state, triggers`
	// requeue: a superseded or cancelled job asked for again (a force-push
	// back to its head, or a reinstalled App) runs again.
	requeue = `(jobs.state IN ('superseded', 'cancelled') AND excluded.state = 'queued')`
	// INDEXED BY: only the few unfinished jobs of the PR are looked at,
	// never its whole history.
	sqlSupersede = `UPDATE jobs INDEXED BY jobs_pr SET state = 'superseded', reason = ?1, updated_at = ?2
		WHERE repo = ?3 AND pr = ?4 AND (head_sha <> ?5 OR base_ref <> ?6)
		AND state IN ('queued', 'running') AND pr_updated_at <= ?7`
	sqlCancel = `UPDATE jobs SET state = 'cancelled', reason = ?1, updated_at = ?2
		WHERE installation_id = ?3 AND state IN ('queued', 'running')
		AND (?4 = '[]' OR repo IN (SELECT value FROM json_each(?5))) AND (?6 = 0 OR pr = ?6)`
	sqlInsDelivery = `INSERT INTO deliveries (id, event, action, installation_id, repo, pr, head_sha,
		received_at, status, reason, job_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

type intakeStmts struct {
	selDelivery, newerHead, upsertJob, supersede, cancel, insDelivery *sql.Stmt
}

type boundStmts = intakeStmts

func (s *intakeStmts) prepare(ctx context.Context, w *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&s.selDelivery, sqlSelDelivery},
		{&s.newerHead, sqlNewerHead},
		{&s.upsertJob, sqlUpsertJob},
		{&s.supersede, sqlSupersede},
		{&s.cancel, sqlCancel},
		{&s.insDelivery, sqlInsDelivery},
	} {
		st, err := w.PrepareContext(ctx, p.q)
		if err != nil {
			return errors.Join(fmt.Errorf("prepare intake statement: %w", err), s.close())
		}
		*p.dst = st
	}
	return nil
}

// in binds the statements to a transaction.
func (s *intakeStmts) in(ctx context.Context, tx *sql.Tx) boundStmts {
	return boundStmts{
		selDelivery: tx.StmtContext(ctx, s.selDelivery),
		newerHead:   tx.StmtContext(ctx, s.newerHead),
		upsertJob:   tx.StmtContext(ctx, s.upsertJob),
		supersede:   tx.StmtContext(ctx, s.supersede),
		cancel:      tx.StmtContext(ctx, s.cancel),
		insDelivery: tx.StmtContext(ctx, s.insDelivery),
	}
}

func (s *intakeStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.selDelivery, s.newerHead, s.upsertJob, s.supersede, s.cancel, s.insDelivery} {
		if st != nil {
			if err := st.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close intake statements: %w", err)
	}
	return nil
}
