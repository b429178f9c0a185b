package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// intakeReq is one RecordDelivery call on its way through the pipeline.
type intakeReq struct {
	d   validation.Delivery
	job *validation.JobSpec
	// stored is d.Body as its row keeps it, encoded by the caller's
	// goroutine, in parallel with the other callers; d.Body is dropped.
	stored encodedBody

	done chan intakeRes // buffered 1: nobody blocks on answering
}

type intakeRes struct {
	res validation.RecordResult
	err error
}

// RecordDelivery durably records a webhook delivery — its row with its
// raw body — the job it asks for (created, or attached to the existing
// job for the same reviewed state), the supersession of older heads of
// the same pull request, and the cancellation it carries, all in one
// transaction. It returns only after that transaction committed and was
// synced to disk (or failed): a caller that answers 2xx after a nil error
// never acknowledges a delivery that is not on disk.
//
// A delivery id that is already stored is a Duplicate: nothing is written
// (unless the stored body was damaged: the redelivered one replaces it).
//
// Intake is a group commit: a writer goroutine takes every delivery
// waiting and records them in one transaction, one fsync for the batch.
// What it buys, measured with bench/intake.sh -c 64 (1 / 500 pull
// requests): one transaction per delivery (MaxBatch 1) made SQLite 0.03× /
// 0.03× a bare net/http handler and PostgreSQL 0.01× / 0.02×, against
// 0.10× / 0.10× and 0.08× / 0.04× with it in the next run (docs/store.md).
// When one delivery fails inside a batch's transaction, the batch is
// rolled back and each delivery is committed alone, so the bad one fails
// alone.
func (d *DB) RecordDelivery(ctx context.Context, del validation.Delivery, job *validation.JobSpec) (validation.RecordResult, error) {
	fail := func(err error) (validation.RecordResult, error) {
		return validation.RecordResult{}, fmt.Errorf("record delivery %q: %w", del.ID, err)
	}
	if err := checkDelivery(del, job); err != nil {
		return fail(err)
	}
	if err := d.drv.Failed(); err != nil {
		return fail(err)
	}
	r := &intakeReq{d: del, job: job, stored: encodeBody(del.Body), done: make(chan intakeRes, 1)}
	r.d.Body = nil // the caller may reuse it once this returns, even early
	select {
	case d.queueOf(r) <- r:
	case <-d.quit:
		return fail(ErrClosed)
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	select {
	case res := <-r.done:
		if res.err != nil {
			return fail(res.err)
		}
		return res.res, nil
	case <-ctx.Done():
		// The batch may still commit; a redelivery is then a duplicate.
		return fail(ctx.Err())
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
	if r := del.Rerun; r != nil && (r.Repo == "" || r.JobID < 0 || r.JobID == 0 && r.HeadSHA == "") {
		return fmt.Errorf("incomplete re-run (repo %q, job %d, head %q)", r.Repo, r.JobID, r.HeadSHA)
	}
	return nil
}

// queueOf is the writer queue of a delivery. Each pull request has one
// (a hash of prKey), so one writer records all its deliveries, in the
// order they came, and its new heads fill that writer's batches as a
// chain; a delivery without a job goes by its id.
func (d *DB) queueOf(r *intakeReq) chan *intakeReq {
	h := fnv.New32a()
	if r.job != nil {
		h.Write([]byte(prKey(r.job)))
	} else {
		h.Write([]byte(r.d.ID))
	}
	return d.reqs[h.Sum32()%uint32(len(d.reqs))]
}

// writer takes one pending delivery of its queue, then every other
// delivery already waiting there (up to MaxBatch), and commits them
// together: a group commit, one fsync for the batch. It exits when the
// store closes.
func (d *DB) writer(ctx context.Context, reqs <-chan *intakeReq) {
	defer d.wg.Done()
	for {
		var first *intakeReq
		select {
		case first = <-reqs:
		case <-d.quit:
			return
		}
		batch := append(make([]*intakeReq, 0, 8), first)
	fill:
		for len(batch) < d.opts.MaxBatch {
			select {
			case r := <-reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		res := d.commitRows(ctx, batch)
		for _, r := range batch {
			r.stored.release()
		}
		d.answer(batch, res)
	}
}

// commitRows runs batch in one transaction and, when one delivery failed
// and took the shared transaction with it, each alone, so only the bad one
// fails.
func (d *DB) commitRows(ctx context.Context, batch []*intakeReq) []intakeRes {
	res := make([]intakeRes, len(batch))
	err := d.runBatch(ctx, batch, res)
	var bad *itemError
	switch {
	case errors.As(err, &bad) && len(batch) > 1:
		d.log.Warn("group commit failed on one delivery; committing one by one", logkey.Err, bad.err, logkey.DeliveryID, batch[bad.i].d.ID)
		for i := range batch {
			if err := d.runBatch(ctx, batch[i:i+1], res[i:i+1]); err != nil {
				res[i] = intakeRes{err: err}
			}
		}
	case err != nil:
		if errors.Is(err, ErrNotDurable) {
			d.log.Error("fsync failed: acknowledged nothing of this group commit; intake refused until restart", logkey.Err, err)
		}
		for i := range res {
			res[i] = intakeRes{err: err}
		}
	}
	return res
}

// itemError is one delivery's failure inside a batch.
type itemError struct {
	i   int
	err error
}

func (e *itemError) Error() string { return e.err.Error() }
func (e *itemError) Unwrap() error { return e.err }

// runBatch records a batch in one write transaction (writeTxWith: made
// durable before it returns): all or nothing. A batch that queued a job
// notifies the other replicas with its commit (Driver.Notify). A chain
// that needs the plain statements (errFollowUp) runs the batch again
// without chains.
func (d *DB) runBatch(ctx context.Context, batch []*intakeReq, results []intakeRes) error {
	err := d.runBatchWith(ctx, batch, results, true)
	if errors.Is(err, errFollowUp) {
		err = d.runBatchWith(ctx, batch, results, false)
	}
	return err
}

func (d *DB) runBatchWith(ctx context.Context, batch []*intakeReq, results []intakeRes, withChains bool) error {
	locks, byPR := prLocks(batch)
	return d.writeTxWith(ctx, d.drv.IntakeTx(byPR), func(tx *sql.Tx) error {
		if byPR && len(locks) > 0 {
			if err := d.drv.LockPRs(ctx, tx, locks); err != nil {
				return fmt.Errorf("lock pull requests: %w", err)
			}
		}
		st := d.stmts.in(ctx, tx)
		chainAt, done := map[int][]int{}, make([]bool, len(batch))
		if withChains && byPR {
			for _, g := range chains(batch) {
				chainAt[g[0]] = g
			}
		}
		queued := false
		for i, r := range batch {
			if g, ok := chainAt[i]; ok {
				if err := d.recordChain(ctx, tx, st, batch, g, results); errors.Is(err, errFollowUp) {
					return err
				} else if err != nil {
					return &itemError{i: i, err: err}
				}
				for _, k := range g {
					done[k] = true
					queued = queued || claimable(results[k].res)
				}
			}
			if done[i] {
				continue
			}
			res, err := d.recordTx(ctx, st, r)
			if err != nil {
				return &itemError{i: i, err: err} // the caller logs it, once
			}
			results[i] = intakeRes{res: res}
			queued = queued || claimable(res) // a job it made claimable
		}
		if queued {
			return d.drv.Notify(ctx, tx)
		}
		return nil
	})
}

// answer answers every delivery of a batch.
func (d *DB) answer(batch []*intakeReq, results []intakeRes) {
	for i, r := range batch {
		r.done <- results[i]
	}
}

// prKey names a pull request: deliveries with one key share a writer
// queue (queueOf) and a chain.
func prKey(j *validation.JobSpec) string { return "pr:" + j.Repo + "#" + strconv.Itoa(j.PR) }

// claimable reports whether recording a delivery made a job claimable:
// new, queued again, re-run.
func claimable(res validation.RecordResult) bool {
	return !res.Duplicate && res.JobState == string(StateQueued) || res.Rerun > 0
}

// prLocks are the advisory lock keys of the pull requests a batch's jobs
// belong to, sorted and distinct; byPR is false when a delivery also
// cancels or re-runs jobs (those reach across pull requests, and run
// SERIALIZABLE).
func prLocks(batch []*intakeReq) (keys []int64, byPR bool) {
	for _, r := range batch {
		if r.d.Cancel != nil || r.d.Rerun != nil {
			return nil, false
		}
		if r.job != nil {
			keys = append(keys, LockKey("pr", r.job.Repo+"#"+strconv.Itoa(r.job.PR)))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), true
}

// recordTx writes one delivery inside the batch transaction: the delivery
// row first (its primary key is the dedupe), then its job, the
// supersession of older heads, its cancellation and its re-run. A new job
// for a new head — almost every delivery — costs three statements: insert
// the delivery, insert the job (or look it up), supersede.
func (d *DB) recordTx(ctx context.Context, st boundStmts, r *intakeReq) (validation.RecordResult, error) {
	del, job := r.d, r.job
	var res validation.RecordResult
	now := d.nowMs()
	inserted, err := d.insertDelivery(ctx, st, r)
	if err != nil {
		return res, err
	}
	if !inserted { // the id is already recorded: nothing else is written
		return d.duplicate(ctx, st, del.ID, r.stored)
	}
	if job != nil {
		if res, err = d.recordJob(ctx, st, del, job, now); err != nil {
			return res, err
		}
	}
	if c := del.Cancel; c != nil {
		n, err := cancelJobs(ctx, st.cancel, *c, now)
		if err != nil {
			return res, err
		}
		res.Cancelled = int(n)
	}
	if r := del.Rerun; r != nil {
		rr, err := rerunJobs(ctx, st, *r, now)
		if err != nil {
			return res, err
		}
		res.Rerun += rr.n
		if res.JobID == 0 {
			res.JobID, res.JobState = rr.job, rr.state
		}
	}
	return res, nil
}

// insertDelivery inserts r's delivery row (sqlInsDelivery); false means
// its id is already recorded, and nothing was written.
func (d *DB) insertDelivery(ctx context.Context, st boundStmts, r *intakeReq) (bool, error) {
	n, err := execCount(ctx, st.insDelivery, deliveryArgs(r)...)
	if err != nil {
		return false, fmt.Errorf("insert delivery: %w", err)
	}
	return n > 0, nil
}

// deliveryArgs are r's row's values, in sqlDeliveryRows's order.
func deliveryArgs(r *intakeReq) []any {
	del, job := r.d, r.job
	repo, pr, head, base := del.Repo, del.PR, del.HeadSHA, ""
	if job != nil { // the row carries the job's key: it is the link to the job
		repo, pr, head, base = job.Repo, job.PR, job.HeadSHA, job.BaseRef
	}
	return []any{del.ID, del.Event, del.Action, nullInt(del.InstallationID), repo, nullInt(int64(pr)), head, base,
		ms(del.ReceivedAt), string(del.Status), del.Reason, r.stored.b, int64(r.stored.crc)}
}

// duplicate answers a delivery whose id is already recorded with the job
// it led to. If the recorded body was pruned or damaged (a disk error, an
// edited file), this delivery's body — GitHub's redelivery of the same
// payload — takes its place.
func (d *DB) duplicate(ctx context.Context, st boundStmts, id string, body encodedBody) (validation.RecordResult, error) {
	var jobID, crc sql.NullInt64
	var state sql.NullString
	var old []byte
	if err := st.dupJob.QueryRowContext(ctx, id).Scan(&jobID, &state, &old, &crc); err != nil {
		return validation.RecordResult{}, fmt.Errorf("look up recorded delivery: %w", err)
	}
	res := validation.RecordResult{Duplicate: true, JobID: jobID.Int64, JobState: state.String}
	if old != nil { // nil: pruned, and the redelivery restores it
		if _, err := decodeBody(old, crcOf(crc)); !errors.Is(err, ErrBodyCorrupt) {
			return res, nil // intact
		}
		d.log.Warn("recorded delivery lost its body; the redelivered body replaces it", logkey.DeliveryID, id)
	}
	if _, err := st.healBody.ExecContext(ctx, body.b, int64(body.crc), id); err != nil {
		return res, fmt.Errorf("replace lost body: %w", err)
	}
	return res, nil
}

// recordJob creates the job a delivery asks for, or attaches the delivery
// to the existing job for the same reviewed state, and supersedes older
// heads of the pull request. A new job for a new reviewed state — almost
// every delivery — is inserted at once, queued or (when a newer head was
// received already) superseded; an existing one is looked up and touched.
func (d *DB) recordJob(ctx context.Context, st boundStmts, del validation.Delivery, job *validation.JobSpec, now int64) (validation.RecordResult, error) {
	var res validation.RecordResult
	var created string
	err := st.insJob.QueryRowContext(ctx,
		job.Repo, job.PR, job.HeadSHA, job.HeadRepo, job.BaseRef, nullInt(job.InstallationID), del.ID, job.Trigger,
		ms(job.PRUpdatedAt), staleReason, now).Scan(&res.JobID, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return d.attachJob(ctx, st, job, now)
	case err != nil:
		return res, fmt.Errorf("insert job: %w", err)
	}
	res.JobState, res.JobCreated = created, true
	if created == string(StateQueued) {
		n, err := supersedeOlder(ctx, st, job, res.JobID, now)
		if err != nil {
			return res, err
		}
		res.Superseded = n
	}
	return res, nil
}

// attachJob attaches another trigger to the existing job of a reviewed
// state. A superseded or cancelled job asked for again (a force-push back
// to its head, a reinstalled App) runs again; a dead or failed job asked
// for again (reopened, a push back to its head) runs again as a re-run,
// with fresh attempts and a new publication id; a job whose last run was
// skipped runs again as a re-run when the trigger can change that
// decision (a label, ready for review); any other keeps its state.
func (d *DB) attachJob(ctx context.Context, st boundStmts, job *validation.JobSpec, now int64) (validation.RecordResult, error) {
	var res validation.RecordResult
	updated := ms(job.PRUpdatedAt)
	var id sql.NullInt64
	var cur sql.NullString
	var stale bool
	if err := st.lookupJob.QueryRowContext(ctx, job.Repo, job.PR, job.HeadSHA, job.BaseRef, updated).Scan(&id, &cur, &stale); err != nil {
		return res, fmt.Errorf("look up job: %w", err)
	}
	if !id.Valid {
		return res, fmt.Errorf("look up job of %s#%d at %s: gone", job.Repo, job.PR, job.HeadSHA)
	}
	res.JobID, res.JobState = id.Int64, cur.String
	js := State(cur.String)
	requeue := !stale && (js == StateSuperseded || js == StateCancelled)
	rerun, rerunReason := false, ""
	switch {
	case !stale && (js == StateDead || js == StateFailed):
		rerun, rerunReason = true, fmt.Sprintf("%s: pull request %s after the job ended %s", DefaultRerunReason, job.Trigger, js)
	case !stale && js == StateDone && reevaluates(job.Trigger):
		skipped, err := skippedLastRun(ctx, st, res.JobID)
		if err != nil {
			return res, err
		}
		rerun, rerunReason = skipped, fmt.Sprintf("%s: pull request %s after a skipped run", DefaultRerunReason, job.Trigger)
	}
	if requeue || rerun {
		res.JobState = string(StateQueued)
	}
	if rerun {
		res.Rerun = 1
	}
	if _, err := st.touchJob.ExecContext(ctx, requeue || rerun, nullInt(job.InstallationID), job.HeadRepo, updated, now,
		res.JobID, rerun, rerunReason); err != nil {
		return res, fmt.Errorf("update job %d: %w", res.JobID, err)
	}
	if js := State(res.JobState); !stale && (js == StateQueued || js == StateRunning) {
		n, err := supersedeOlder(ctx, st, job, res.JobID, now)
		if err != nil {
			return res, err
		}
		res.Superseded = n
	}
	return res, nil
}

// supersedeOlder ends the unfinished jobs of the pull request's other
// heads received no later than job, superseded by jobID.
func supersedeOlder(ctx context.Context, st boundStmts, job *validation.JobSpec, jobID, now int64) (int, error) {
	n, err := execCount(ctx, st.supersede, supersedeReason(job.HeadSHA, jobID), now, job.Repo, job.PR, job.HeadSHA, job.BaseRef, ms(job.PRUpdatedAt))
	if err != nil {
		return 0, fmt.Errorf("supersede older heads: %w", err)
	}
	return int(n), nil
}

func supersedeReason(head string, jobID int64) string {
	return fmt.Sprintf("superseded by head %s (job %d)", head, jobID)
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
	// The primary key is the dedupe: a recorded id inserts nothing.
	sqlInsDelivery = sqlDeliveryRows + `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	// The job a recorded delivery led to, through the job key it carries.
	sqlDupJob = `SELECT j.id, j.state, CASE WHEN d.body_pruned_at IS NULL THEN d.body END, d.body_crc32c FROM deliveries d
		LEFT JOIN jobs j ON d.status = 'queued' AND j.repo = d.repo AND j.pr = d.pr
			AND j.head_sha = d.head_sha AND j.base_ref = d.base_ref
		WHERE d.id = ?`
	sqlHealBody = `UPDATE deliveries SET body = ?, body_crc32c = ?, body_pruned_at = NULL WHERE id = ?`
	// staleReason is why a job is superseded as it is made.
	staleReason = "a newer head of this pull request was already received"
	// ?1: requeue, ?7: as a re-run, with reason ?8 (see recordJob).
	sqlTouchJob = `UPDATE jobs SET
		triggers = triggers + 1,
		reruns = reruns + CASE WHEN ?7 THEN 1 ELSE 0 END,
		installation_id = COALESCE(?2, installation_id),
		head_repo = CASE WHEN ?3 <> '' THEN ?3 ELSE head_repo END,
		pr_updated_at = CASE WHEN pr_updated_at > ?4 THEN pr_updated_at ELSE ?4 END,
		state = CASE WHEN ?1 THEN 'queued' ELSE state END,
		reason = CASE WHEN ?7 THEN ?8 WHEN ?1 THEN '' ELSE reason END,
		attempts = CASE WHEN ?1 THEN 0 ELSE attempts END,
		last_error = CASE WHEN ?1 THEN '' ELSE last_error END,
		next_attempt_at = CASE WHEN ?1 THEN ?5 ELSE next_attempt_at END,
		updated_at = ?5
		WHERE id = ?6`
	// The unfinished jobs of the pull request's other heads, received no
	// later. INDEXED BY: only the few unfinished jobs of the PR are looked
	// at, never its whole history.
	sqlSupersede = `UPDATE jobs INDEXED BY jobs_pr SET state = 'superseded', reason = ?1, updated_at = ?2
		WHERE repo = ?3 AND pr = ?4 AND (head_sha <> ?5 OR base_ref <> ?6) AND state IN ('queued', 'running')
			AND pr_updated_at <= ?7`
	// jobs_pr holds only unfinished jobs: a cancellation reads the queue,
	// never the history. %s is the engine's JSON array of repositories
	// (Driver.JSONEach).
	sqlCancel = `UPDATE jobs INDEXED BY jobs_pr SET state = 'cancelled', reason = ?1, updated_at = ?2
		WHERE installation_id = ?3 AND state IN ('queued', 'running')
		AND (?4 = '[]' OR repo IN (SELECT value FROM %s)) AND (pr = ?6 OR ?6 = 0)`
)

// newerHead is the SQL of whether the pull request (repo, pr) has another
// reviewed state (head, base) received after updated; each argument is
// the SQL of a value. It reads the newest of the pull request's other
// states from the end of jobs_pr_updated — usually one index entry — so
// no engine's planner is tempted to scan the table for a row that, for
// the newest head, is not there (PostgreSQL did, for EXISTS).
func newerHead(repo, pr, head, base, updated string) string {
	return `COALESCE((SELECT o.pr_updated_at > ` + updated + ` FROM jobs AS o INDEXED BY jobs_pr_updated
		WHERE o.repo = ` + repo + ` AND o.pr = ` + pr + ` AND (o.head_sha <> ` + head + ` OR o.base_ref <> ` + base + `)
		ORDER BY o.pr_updated_at DESC LIMIT 1), false)`
}

var (
	// The job for this reviewed state, if any, and whether a newer head of
	// the pull request was already received.
	sqlLookupJob = `SELECT j.id, j.state, ` + newerHead("?1", "?2", "?3", "?4", "?5") + `
		FROM (SELECT 1) AS one LEFT JOIN jobs j ON j.repo = ?1 AND j.pr = ?2 AND j.head_sha = ?3 AND j.base_ref = ?4`
	// The job for a new reviewed state, queued — or superseded at once
	// when a newer head of the pull request was already received; nothing
	// when the state has a job. The casts give PostgreSQL the columns'
	// types (SQLite takes them as they are).
	sqlInsJob = `INSERT INTO jobs (repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
			trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at)
		SELECT ?1, CAST(?2 AS BIGINT), ?3, CAST(?4 AS TEXT), ?5, CAST(?6 AS BIGINT), CAST(?7 AS TEXT), CAST(?8 AS TEXT),
			CAST(?9 AS BIGINT), CASE WHEN s.stale THEN 'superseded' ELSE 'queued' END,
			CASE WHEN s.stale THEN CAST(?10 AS TEXT) ELSE '' END, CAST(?11 AS BIGINT), CAST(?11 AS BIGINT), CAST(?11 AS BIGINT)
		FROM (SELECT ` + newerHead("?1", "?2", "?3", "?5", "?9") + ` AS stale) AS s
		WHERE true
		ON CONFLICT (repo, pr, head_sha, base_ref) DO NOTHING
		RETURNING id, state`
)

type intakeStmts struct {
	insDelivery, dupJob, healBody, lookupJob, insJob, touchJob, supersede, cancel *sql.Stmt
	rerunJob, rerunState, rerunHead, lastOutcome, newestUpdate, jobIDs            *sql.Stmt
}

type boundStmts = intakeStmts

// stmts are the statements' places, in intakeSQL's order.
func (s *intakeStmts) stmts() []**sql.Stmt {
	return []**sql.Stmt{&s.insDelivery, &s.dupJob, &s.healBody, &s.lookupJob, &s.insJob, &s.touchJob, &s.supersede,
		&s.cancel, &s.rerunJob, &s.rerunState, &s.rerunHead, &s.lastOutcome, &s.newestUpdate, &s.jobIDs}
}

// intakeSQL is the SQL of the statements, in stmts's order.
func intakeSQL(drv Driver) []string {
	return []string{sqlInsDelivery, sqlDupJob, sqlHealBody, sqlLookupJob, sqlInsJob, sqlTouchJob, sqlSupersede,
		fmt.Sprintf(sqlCancel, drv.JSONEach("?5")), sqlRerunJob, sqlRerunState, sqlRerunHead, sqlLastOutcome,
		sqlNewestUpdate, drv.JobIDs()}
}

func (s *intakeStmts) prepare(ctx context.Context, d *DB) error {
	for i, q := range intakeSQL(d.drv) {
		st, err := d.w.PrepareContext(ctx, q)
		if err != nil {
			return errors.Join(fmt.Errorf("prepare intake statement: %w", err), s.close())
		}
		*s.stmts()[i] = st
	}
	return nil
}

// in binds the statements to a transaction.
func (s *intakeStmts) in(ctx context.Context, tx *sql.Tx) boundStmts {
	var b boundStmts
	to := b.stmts()
	for i, p := range s.stmts() {
		*to[i] = tx.StmtContext(ctx, *p)
	}
	return b
}

func (s *intakeStmts) close() error {
	var errs []error
	for _, p := range s.stmts() {
		if *p != nil {
			errs = append(errs, (*p).Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close intake statements: %w", err)
	}
	return nil
}
