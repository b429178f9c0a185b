package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// Chains: the new heads of one pull request in one batch are recorded
// together, as recording them one after the other would end — a head born
// superseded by the next one instead of inserted queued and updated by
// it — in a fixed number of statements whatever their count: the pull
// request's newest update time, the chain's job ids, the supersession of
// the pull request's older unfinished jobs, all the deliveries in one
// INSERT and all the jobs in another. What it buys, measured with
// bench/intake.sh -c 64 on one pull request (every delivery a new head):
// PostgreSQL 0.03× a bare net/http handler without it, twice (the second
// time p99 571 ms, against 0.08× and 0.06× in the runs either side);
// docs/store.md has the runs. A chain that meets a delivery it cannot record
// (a duplicate id, a reviewed state that has its job) fails with
// errFollowUp: the batch is rolled back and runs again one delivery after
// the other.

// errFollowUp is a chain's delivery whose answer needs the plain
// statements: the transaction was rolled back.
var errFollowUp = errors.New("a delivery of the chain needs a follow-up")

// chains are the groups of several new heads of one pull request in a
// batch, each in batch order. A batch with a delivery that is not a new
// head asking for a job (a cancellation, a re-run, none), or that names one
// delivery id or one reviewed state twice, has none.
func chains(batch []*intakeReq) [][]int {
	ids, states := map[string]bool{}, map[string]bool{}
	at := map[string]int{} // pull request → its group
	var groups [][]int
	for i, r := range batch {
		if r.job == nil || r.d.Cancel != nil || r.d.Rerun != nil {
			return nil
		}
		state := prKey(r.job) + "@" + r.job.HeadSHA + ":" + r.job.BaseRef
		if ids[r.d.ID] || states[state] {
			return nil
		}
		ids[r.d.ID], states[state] = true, true
		g, ok := at[prKey(r.job)]
		if !ok {
			g = len(groups)
			at[prKey(r.job)] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	out := groups[:0]
	for _, g := range groups {
		if len(g) >= 2 {
			out = append(out, g)
		}
	}
	return out
}

// chainStep is how one delivery of a chain ends (planChain).
type chainStep struct {
	stale bool // older than the pull request's newest update: born superseded
	next  int  // a record superseded by the next record, at this index; -1: none
	first bool // the first record: it supersedes the unfinished jobs from before the chain
	later bool // a record after the first: it superseded the record before it
}

// planChain works out a chain: updated are its deliveries' update times
// in batch order, newest the pull request's newest update time before it
// (known false: it had no job). A delivery is stale when the newest update
// so far — of the jobs before the chain, or of an earlier delivery of it —
// is later than its own; every other one (a record) supersedes the record
// before it, and the first record the jobs from before.
func planChain(updated []int64, newest int64, known bool) []chainStep {
	steps := make([]chainStep, len(updated))
	top, has := newest, known
	prev := -1
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
// the batch's transaction tx, filling results.
func (d *DB) recordChain(ctx context.Context, tx *sql.Tx, st boundStmts, batch []*intakeReq, idx []int, results []intakeRes) error {
	pr := batch[idx[0]].job
	var newest sql.NullInt64
	err := st.newestUpdate.QueryRowContext(ctx, pr.Repo, pr.PR).Scan(&newest)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("newest update of %s#%d: %w", pr.Repo, pr.PR, err)
	}
	ids, err := d.jobIDs(ctx, st, len(idx))
	if err != nil {
		return err
	}
	updated := make([]int64, len(idx))
	for k, i := range idx {
		updated[k] = ms(batch[i].job.PRUpdatedAt)
	}
	plan := planChain(updated, newest.Int64, newest.Valid)
	now := d.nowMs()
	// The first record's supersession, before any job of the chain is
	// there to be caught by it.
	superseded := 0
	for k, s := range plan {
		if s.first {
			if superseded, err = supersedeOlder(ctx, st, batch[idx[k]].job, ids[k], now); err != nil {
				return err
			}
		}
	}
	var dels, jobs []any
	for k, i := range idx {
		r := batch[i]
		dels = append(dels, deliveryArgs(r)...)
		job := r.job
		state, reason := StateQueued, ""
		switch s := plan[k]; {
		case s.stale:
			state, reason = StateSuperseded, staleReason
		case s.next >= 0:
			state, reason = StateSuperseded, supersedeReason(batch[idx[s.next]].job.HeadSHA, ids[s.next])
		}
		jobs = append(jobs, ids[k], job.Repo, job.PR, job.HeadSHA, job.HeadRepo, job.BaseRef,
			nullInt(job.InstallationID), r.d.ID, job.Trigger, updated[k], string(state), reason, now, now, now)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{sqlDeliveryRows + valueRows(len(dels)/len(idx), len(idx)) + ` ON CONFLICT (id) DO NOTHING`, dels},
		{sqlJobRows + valueRows(len(jobs)/len(idx), len(idx)) + ` ON CONFLICT (repo, pr, head_sha, base_ref) DO NOTHING`, jobs},
	} {
		res, err := tx.ExecContext(ctx, q.sql, q.args...)
		if err != nil {
			return fmt.Errorf("record chain: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(idx)) {
			return errors.Join(errFollowUp, err) // a duplicate, or a state with its job
		}
	}
	for k, i := range idx {
		res := validation.RecordResult{JobID: ids[k], JobState: string(StateQueued), JobCreated: true}
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

// jobIDs draws n new job ids, ascending (Driver.JobIDs).
func (d *DB) jobIDs(ctx context.Context, st boundStmts, n int) ([]int64, error) {
	rows, err := st.jobIDs.QueryContext(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("draw job ids: %w", err)
	}
	ids := make([]int64, 0, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, errors.Join(fmt.Errorf("draw job ids: %w", err), rows.Close())
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || len(ids) != n {
		return nil, fmt.Errorf("draw job ids: %d of %d: %w", len(ids), n, err)
	}
	return ids, nil
}

// valueRows is n rows of cols placeholders each, for a multi-row VALUES.
func valueRows(cols, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// The inserts of a chain, without their VALUES rows.
const (
	sqlDeliveryRows = `INSERT INTO deliveries (id, event, action, installation_id, repo, pr, head_sha, base_ref,
		received_at, status, reason, body, body_crc32c) VALUES `
	sqlJobRows = `INSERT INTO jobs (id, repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
		trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at) VALUES `
	// The pull request's newest update time: the last entry of
	// jobs_pr_updated.
	sqlNewestUpdate = `SELECT pr_updated_at FROM jobs INDEXED BY jobs_pr_updated
		WHERE repo = ?1 AND pr = ?2 ORDER BY pr_updated_at DESC LIMIT 1`
)
