package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// State is where a job is in its life.
type State string

const (
	StateQueued     State = "queued"     // waiting for a worker (maybe until NextAttemptAt)
	StateRunning    State = "running"    // leased by a worker
	StateDone       State = "done"       // finished with a recorded run, whatever its outcome
	StateFailed     State = "failed"     // a permanent (non-transient) error ended it
	StateDead       State = "dead"       // out of attempts; LastError says why
	StateSuperseded State = "superseded" // a newer head of the pull request replaced it; not a failure
	StateCancelled  State = "cancelled"  // its installation or repository was removed or suspended
)

// Lease is a worker's hold on a job. Gen is the fencing token: every claim
// increments it, and every write a worker makes for the job names it, so a
// worker whose lease was rescued can no longer change the job.
type Lease struct {
	JobID   int64
	Owner   string
	Gen     int64
	TTL     time.Duration
	Expires time.Time
}

// Job is a claimed review job.
type Job struct {
	ID       int64
	Repo     string
	PR       int
	HeadSHA  string
	HeadRepo string
	BaseRef  string
	// InstallationID is 0 when the delivery carried no installation; the
	// pipeline ends such a job with validation.CodeInstallationMissing.
	InstallationID int64
	DeliveryID     string
	Trigger        string
	Attempts       int // including this one
	// Rerun counts the re-runs asked for the job; this run publishes as
	// validation.PublicationID(ID, Rerun).
	Rerun     int
	LastError string
	CreatedAt time.Time
	Lease     Lease
}

// JobStatus is a job's current state, for workers, tests and dashboards.
type JobStatus struct {
	ID            int64
	State         State
	Reason        string
	Attempts      int
	LastError     string
	LeaseOwner    string
	LeaseGen      int64
	LeaseExpires  time.Time
	NextAttemptAt time.Time
	Triggers      int
	Reruns        int
	UpdatedAt     time.Time
}

// The claim statements. Each reads only the partial indexes of unfinished
// jobs (TestQueryPlans holds them to it).
const (
	sqlDue = `SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued' AND next_attempt_at <= ?1)
		OR EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND lease_expires_at <= ?1)`
	sqlDeadLeases = `UPDATE jobs SET state = 'dead',
			last_error = 'lease of ' || COALESCE(lease_owner, '?') || ' expired on attempt ' || attempts || ' of ' || ?2,
			lease_owner = NULL, lease_expires_at = NULL, updated_at = ?1
		WHERE state = 'running' AND lease_expires_at <= ?1 AND attempts >= ?2`
	sqlRescue = `UPDATE jobs SET state = 'queued', next_attempt_at = ?1,
			last_error = 'lease of ' || COALESCE(lease_owner, '?') || ' expired on attempt ' || attempts,
			lease_owner = NULL, lease_expires_at = NULL, updated_at = ?1
		WHERE state = 'running' AND lease_expires_at <= ?1`
	sqlClaim = `UPDATE jobs SET state = 'running', attempts = attempts + 1,
			lease_gen = lease_gen + 1, lease_owner = ?1, lease_expires_at = ?2, updated_at = ?3
		WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND next_attempt_at <= ?3
			ORDER BY next_attempt_at, id LIMIT 1%s)
		RETURNING id, repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id, trigger_action,
			attempts, reruns, last_error, created_at, lease_gen`
)

// Claim leases the next job that is due, or reports false when none is.
// Before choosing, it rescues jobs whose lease expired (their worker died):
// they are queued again at once, or end dead when they used their last
// attempt. The returned lease carries a fencing token higher than any
// earlier lease of the job.
func (d *DB) Claim(ctx context.Context, owner string, ttl time.Duration) (Job, bool, error) {
	if owner == "" || ttl <= 0 {
		return Job{}, false, fmt.Errorf("claim job: owner %q and lease %v must be set", owner, ttl)
	}
	now := d.nowMs()
	// A read first, so idle workers polling do not take the write lock.
	var due bool
	if err := d.r.QueryRowContext(ctx, sqlDue, now).Scan(&due); err != nil {
		return Job{}, false, fmt.Errorf("claim job: %w", err)
	}
	if !due {
		return Job{}, false, nil
	}
	var job Job
	var found bool
	err := d.writeTxWith(ctx, d.drv.ClaimTx(), func(tx *sql.Tx) error {
		job, found = Job{}, false
		if _, err := tx.ExecContext(ctx, sqlDeadLeases, now, d.opts.MaxAttempts); err != nil {
			return fmt.Errorf("end dead leases: %w", err)
		}
		if _, err := tx.ExecContext(ctx, sqlRescue, now); err != nil {
			return fmt.Errorf("rescue expired leases: %w", err)
		}
		var inst sql.NullInt64
		var created int64
		err := tx.QueryRowContext(ctx, d.claimSQL, owner, now+ttl.Milliseconds(), now).Scan(&job.ID, &job.Repo, &job.PR, &job.HeadSHA, &job.HeadRepo, &job.BaseRef, &inst, &job.DeliveryID,
			&job.Trigger, &job.Attempts, &job.Rerun, &job.LastError, &created, &job.Lease.Gen)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		job.InstallationID = inst.Int64
		job.CreatedAt = fromMs(created)
		job.Lease.JobID, job.Lease.Owner, job.Lease.TTL = job.ID, owner, ttl
		job.Lease.Expires = fromMs(now + ttl.Milliseconds())
		return nil
	})
	if err != nil {
		return Job{}, false, fmt.Errorf("claim job: %w", err)
	}
	return job, found, nil
}

// Heartbeat extends a lease by its TTL. It fails with ErrLeaseLost when the
// lease was rescued by another worker or the job was superseded or
// cancelled: the caller must stop working on the job.
func (d *DB) Heartbeat(ctx context.Context, l Lease) (Lease, error) {
	now := d.nowMs()
	exp := now + l.TTL.Milliseconds()
	var n int64
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE jobs SET lease_expires_at = ?1, updated_at = ?2
			WHERE id = ?3 AND lease_gen = ?4 AND lease_owner = ?5 AND state = 'running'`, exp, now, l.JobID, l.Gen, l.Owner)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return l, fmt.Errorf("heartbeat job %d: %w", l.JobID, err)
	}
	if n == 0 {
		return l, d.leaseLost(ctx, "heartbeat", l)
	}
	l.Expires = fromMs(exp)
	return l, nil
}

// leaseLost builds the ErrLeaseLost error, naming what the job became.
func (d *DB) leaseLost(ctx context.Context, op string, l Lease) error {
	st, err := d.JobState(ctx, l.JobID)
	if err != nil {
		return fmt.Errorf("%s job %d (gen %d): %w", op, l.JobID, l.Gen, errors.Join(ErrLeaseLost, err))
	}
	return fmt.Errorf("%s job %d (gen %d): job is %s at gen %d: %w", op, l.JobID, l.Gen, st.State, st.LeaseGen, ErrLeaseLost)
}

// JobState reads a job's current state; ErrNotFound when there is none.
func (d *DB) JobState(ctx context.Context, id int64) (JobStatus, error) {
	var s JobStatus
	var owner sql.NullString
	var exp sql.NullInt64
	var next, upd int64
	err := d.r.QueryRowContext(ctx, `SELECT id, state, reason, attempts, last_error, lease_owner, lease_gen,
		lease_expires_at, next_attempt_at, triggers, reruns, updated_at FROM jobs WHERE id = ?`, id).Scan(
		&s.ID, &s.State, &s.Reason, &s.Attempts, &s.LastError, &owner, &s.LeaseGen, &exp, &next, &s.Triggers, &s.Reruns, &upd)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("job %d: %w", id, err)
	}
	s.LeaseOwner = owner.String
	s.LeaseExpires = fromMs(exp.Int64)
	s.NextAttemptAt = fromMs(next)
	s.UpdatedAt = fromMs(upd)
	return s, nil
}

// Failure is how an attempt at a job failed.
type Failure struct {
	Err error
	// Transient errors (GitHub 5xx, 403/429 rate limits, network, sandbox
	// API outages) are retried with backoff; others end the job failed.
	// When Err has a `RetryAfter() time.Duration` method (a rate limit's
	// Retry-After), the next attempt waits at least that long.
	Transient bool
	// Run, when set, is the record of the failed attempt, kept like any
	// other run (its outcome is usually validation.OutcomeError).
	Run *RunRecord
}

// RetryResult says what Retry decided.
type RetryResult struct {
	State         State // queued, failed or dead
	NextAttemptAt time.Time
	RunID         int64 // when Failure.Run was recorded
}

// Retry ends a failed attempt, fenced by the lease: a transient failure is
// queued again after an exponential backoff with jitter, unless the job
// used its last attempt (MaxAttempts), in which case it ends dead; a
// permanent failure ends it failed. The error text is kept as LastError.
func (d *DB) Retry(ctx context.Context, l Lease, f Failure) (RetryResult, error) {
	if f.Err == nil {
		return RetryResult{}, fmt.Errorf("retry job %d: nil error", l.JobID)
	}
	now := d.opts.Now()
	var out RetryResult
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		out = RetryResult{}
		msg := f.Err.Error()
		var attempts int
		err := tx.QueryRowContext(ctx, `SELECT attempts FROM jobs
			WHERE id = ? AND lease_gen = ? AND lease_owner = ? AND state = 'running'`, l.JobID, l.Gen, l.Owner).Scan(&attempts)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return err
		}
		next := now
		switch {
		case !f.Transient:
			out.State = StateFailed
		case attempts >= d.opts.MaxAttempts:
			out.State = StateDead
			msg = fmt.Sprintf("%s (attempt %d of %d)", msg, attempts, d.opts.MaxAttempts)
		default:
			out.State = StateQueued
			delay := Backoff(attempts, d.opts.RetryBase, d.opts.RetryCap, d.opts.Jitter())
			var ra interface{ RetryAfter() time.Duration }
			if errors.As(f.Err, &ra) && ra.RetryAfter() > delay {
				delay = ra.RetryAfter()
			}
			next = now.Add(delay)
			out.NextAttemptAt = next.UTC().Truncate(time.Millisecond)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, last_error = ?, next_attempt_at = ?,
				lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ?`,
			string(out.State), msg, next.UnixMilli(), now.UnixMilli(), l.JobID); err != nil {
			return err
		}
		if f.Run != nil {
			id, err := insertRun(ctx, tx, l, *f.Run)
			if err != nil {
				return err
			}
			out.RunID = id
		}
		return nil
	})
	if errors.Is(err, ErrLeaseLost) {
		return RetryResult{}, d.leaseLost(ctx, "retry", l)
	}
	if err != nil {
		return RetryResult{}, fmt.Errorf("retry job %d: %w", l.JobID, err)
	}
	return out, nil
}

// Backoff is the delay before the next attempt after the given attempt
// (1-based): base·2^(attempt-1), capped at max, with "equal jitter" — half
// fixed, half uniform by jitter in [0, 1) — so retries of jobs that failed
// together spread out but never come back sooner than half the delay.
func Backoff(attempt int, base, max time.Duration, jitter float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if jitter < 0 {
		jitter = 0
	}
	if jitter >= 1 {
		jitter = 0.999999
	}
	half := d / 2
	return half + time.Duration(float64(d-half)*jitter)
}

// Supersede ends the queued and running jobs of a pull request that review
// any other head than keepHead, as superseded (not failed). The pipeline
// calls it when it learns of a newer head than the one it was given.
func (d *DB) Supersede(ctx context.Context, repo string, pr int, keepHead, reason string) (int, error) {
	var n int64
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'superseded', reason = ?, updated_at = ?
			WHERE repo = ? AND pr = ? AND head_sha <> ? AND state IN ('queued', 'running')`,
			reason, d.nowMs(), repo, pr, keepHead)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("supersede %s#%d: %w", repo, pr, err)
	}
	return int(n), nil
}

// CancelInstallation cancels the queued and running jobs of an
// installation (of the named repositories only, when c.Repos is set).
// Intake does the same inside RecordDelivery for installation events.
func (d *DB) CancelInstallation(ctx context.Context, c validation.Cancellation) (int, error) {
	if c.InstallationID == 0 {
		return 0, errors.New("cancel installation: no installation id")
	}
	var n int64
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = cancelJobs(ctx, tx.StmtContext(ctx, d.stmts.cancel), c, d.nowMs())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cancel installation: %w", err)
	}
	return int(n), nil
}

// writeTx runs fn in one write transaction: on SQLite IMMEDIATE, on the
// writer connection; on PostgreSQL SERIALIZABLE, so the rules written for
// one writer hold among replicas too — a transaction that lost a
// serialization conflict runs again (fn must be safe to run again: it
// resets what it reports), up to MaxSerializationRetries times.
func (d *DB) writeTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return d.writeTxWith(ctx, d.drv.WriteTx(), fn)
}

func (d *DB) writeTxWith(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	for try := 1; ; try++ {
		err := d.writeTxOnce(ctx, opts, fn)
		if err == nil || !d.retryable(err) || try >= MaxSerializationRetries {
			return err
		}
	}
}

func (d *DB) writeTxOnce(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Tx) error) (err error) {
	tx, err := d.w.BeginTx(ctx, opts)
	if err != nil {
		return &beginError{err: err}
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, rollback(tx))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := d.drv.Durable(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
