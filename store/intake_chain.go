package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// On SQLite too, the new heads of one pull request in one batch are
// recorded as a chain (chainsOf picks them): the writer works out in Go
// how recording them one after the other would end — what
// sqlChainPostgres works out in SQL on PostgreSQL — and writes that end
// directly. A head born superseded by the next one is inserted so, instead
// of being inserted queued and updated by the next delivery: each
// delivery of a busy pull request costs its two inserts, and the chain one
// supersession in all (measured at 64 concurrent new heads of one pull
// request, where the supersession was a third of the writer's time).

// chainStep is how one delivery of a chain ends (planChain).
type chainStep struct {
	stale bool // older than the pull request's newest update: born superseded
	next  int  // a record superseded by the next record, at this index; -1: none
	first bool // the first record: it supersedes the unfinished jobs from before the chain
	later bool // a record after the first: it superseded the record before it
}

// planChain works out a chain (see sqlChainPostgres for the rule): updated
// are its deliveries' update times in batch order, newest the pull
// request's newest update time before it (known false: it had no job).
func planChain(updated []int64, newest int64, known bool) []chainStep {
	steps := make([]chainStep, len(updated))
	top, has := newest, known // the newest update time so far
	prev := -1                // the last record
	for k, u := range updated {
		steps[k].next = -1
		steps[k].stale = has && top > u
		if !steps[k].stale {
			steps[k].first, steps[k].later = prev < 0, prev >= 0
			if prev >= 0 {
				steps[prev].next = k
			}
			prev = k
		}
		if !has || u > top {
			top, has = u, true
		}
	}
	return steps
}

// recordChain records a chain inside the batch's transaction (SQLite),
// filling results. Job ids are drawn in the chain's order from the
// table's largest, as SQLite's own inserts would draw them: the writer's
// transaction is the only one writing. A delivery already recorded, or a
// reviewed state that has its job, fails it with errFollowUp before
// anything of it commits: the batch then runs one delivery after the
// other.
func (d *DB) recordChain(ctx context.Context, st boundStmts, chain []pgItem, results []intakeRes) error {
	pr := chain[0].req.job
	var newest sql.NullInt64
	err := st.newestUpdate.QueryRowContext(ctx, pr.Repo, pr.PR).Scan(&newest)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("newest update of %s#%d: %w", pr.Repo, pr.PR, err)
	}
	var top int64
	if err := st.maxJobID.QueryRowContext(ctx).Scan(&top); err != nil {
		return fmt.Errorf("largest job id: %w", err)
	}
	updated := make([]int64, len(chain))
	for k, it := range chain {
		updated[k] = ms(it.req.job.PRUpdatedAt)
	}
	plan := planChain(updated, newest.Int64, newest.Valid)
	id := func(k int) int64 { return top + 1 + int64(k) }
	now := d.nowMs()
	// The first record's supersession, before any job of the chain is
	// there to be caught by it.
	superseded := 0
	for k, s := range plan {
		if s.first {
			if superseded, err = supersedeOlder(ctx, st, chain[k].req.job, id(k), now); err != nil {
				return err
			}
		}
	}
	for k, it := range chain {
		inserted, err := d.insertDelivery(ctx, st, it.req)
		if err != nil {
			return err
		}
		if !inserted {
			return errFollowUp
		}
		job := it.req.job
		state, reason := StateQueued, ""
		switch s := plan[k]; {
		case s.stale:
			state, reason = StateSuperseded, staleReason
		case s.next >= 0:
			state, reason = StateSuperseded, supersedeReason(chain[s.next].req.job.HeadSHA, id(s.next))
		}
		n, err := execCount(ctx, st.insJobAs, id(k), job.Repo, job.PR, job.HeadSHA, job.HeadRepo, job.BaseRef,
			nullInt(job.InstallationID), it.req.d.ID, job.Trigger, updated[k], string(state), reason, now)
		if err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		if n == 0 { // the reviewed state has its job: it attaches
			return errFollowUp
		}
		res := validation.RecordResult{JobID: id(k), JobState: string(StateQueued), JobCreated: true}
		switch s := plan[k]; {
		case s.stale:
			res.JobState = string(StateSuperseded)
		case s.first:
			res.Superseded = superseded
		case s.later:
			res.Superseded = 1
		}
		results[it.i] = intakeRes{res: res}
	}
	d.pipelined.Add(1)
	return nil
}

// The chain's statements (SQLite).
const (
	// The pull request's newest update time: the last entry of
	// jobs_pr_updated.
	sqlNewestUpdate = `SELECT pr_updated_at FROM jobs INDEXED BY jobs_pr_updated
		WHERE repo = ?1 AND pr = ?2 ORDER BY pr_updated_at DESC LIMIT 1`
	sqlMaxJobID = `SELECT COALESCE(MAX(id), 0) FROM jobs`
	// A job with its state worked out, and its id: a chain's, or NULL for
	// SQLite to draw (insertJobSQLite); nothing when the reviewed state
	// has its job.
	sqlInsJobAs = `INSERT INTO jobs (id, repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
			trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, ?13)
		ON CONFLICT (repo, pr, head_sha, base_ref) DO NOTHING`
)
