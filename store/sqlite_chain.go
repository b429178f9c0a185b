package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// On SQLite too, the new heads of one pull request in one batch are
// recorded as a chain (chains picks them): the writer works out in Go
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

// recordChain records the deliveries of batch at idx, a chain, inside
// the batch's transaction, filling results. Job ids are drawn in the
// chain's order from the table's largest, as SQLite's own inserts would
// draw them: the writer's transaction is the only one writing. A delivery
// already recorded, or a reviewed state that has its job, fails it with
// errFollowUp before anything of it commits: the batch then runs one
// delivery after the other.
func (e *sqliteEngine) recordChain(ctx context.Context, st boundStmts, batch []*intakeReq, idx []int, results []intakeRes) error {
	d := e.d
	pr := batch[idx[0]].job
	var newest sql.NullInt64
	err := st.newestUpdate.QueryRowContext(ctx, pr.Repo, pr.PR).Scan(&newest)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("newest update of %s#%d: %w", pr.Repo, pr.PR, err)
	}
	var top int64
	if err := st.maxJobID.QueryRowContext(ctx).Scan(&top); err != nil {
		return fmt.Errorf("largest job id: %w", err)
	}
	updated := make([]int64, len(idx))
	for k, i := range idx {
		updated[k] = ms(batch[i].job.PRUpdatedAt)
	}
	plan := planChain(updated, newest.Int64, newest.Valid)
	id := func(k int) int64 { return top + 1 + int64(k) }
	now := d.nowMs()
	// The first record's supersession, before any job of the chain is
	// there to be caught by it.
	superseded := 0
	for k, s := range plan {
		if s.first {
			if superseded, err = supersedeOlder(ctx, st, batch[idx[k]].job, id(k), now); err != nil {
				return err
			}
		}
	}
	for k, i := range idx {
		r := batch[i]
		inserted, err := d.insertDelivery(ctx, st, r)
		if err != nil {
			return err
		}
		if !inserted {
			return errFollowUp
		}
		job := r.job
		state, reason := StateQueued, ""
		switch s := plan[k]; {
		case s.stale:
			state, reason = StateSuperseded, staleReason
		case s.next >= 0:
			state, reason = StateSuperseded, supersedeReason(batch[idx[s.next]].job.HeadSHA, id(s.next))
		}
		n, err := execCount(ctx, st.insJobAs, id(k), job.Repo, job.PR, job.HeadSHA, job.HeadRepo, job.BaseRef,
			nullInt(job.InstallationID), r.d.ID, job.Trigger, updated[k], string(state), reason, now)
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
		results[i] = intakeRes{res: res}
	}
	return nil
}

// chains are the chains of a batch of allNew deliveries: each pull
// request's several new heads (pipelineGroups).
func (e *sqliteEngine) chains(batch []*intakeReq) [][]int {
	if !allNew(batch) {
		return nil
	}
	var out [][]int
	for _, g := range pipelineGroups(batch) {
		if len(g) >= 2 {
			out = append(out, g)
		}
	}
	return out
}
