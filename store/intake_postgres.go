package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gilf-review/gilf/validation"
)

// On PostgreSQL the deliveries of a batch that ask for a job are recorded
// in rounds: one statement (sqlRecordPostgres) per round records every
// delivery of the round — its row, its new job, the supersession of its
// pull request's older heads — instead of one statement per delivery.
// A round holds at most one delivery of each pull request and of each
// delivery id: the parts of one statement all see the snapshot from
// before it, so two heads of one pull request in one statement would not
// see each other. Later deliveries of the same pull request go in later
// rounds, in the batch's order, so each sees the ones before it exactly as
// one statement per delivery would.
//
// When every delivery of a batch asks for a job with a trigger that
// brings a new reviewed state (allNewHeads), the whole transaction goes
// to the server at once (pipelineBatch), and a pull request with
// several new heads in the batch has them recorded by one statement, a
// chain (sqlChainPostgres), which works out in SQL how one after the
// other would have ended: the deliveries of one busy pull request cost
// one statement, not one each (measured at 64 concurrent new heads of one
// pull request: about 2,300 deliveries/s in rounds, 4,000 in chains).

// pgItem is one delivery of a round and where its result goes.
type pgItem struct {
	i   int // index in the batch
	req *intakeReq
}

// pgRounds splits the batch's deliveries into rounds: each delivery goes
// in the round after the last one holding its pull request or its id, so
// deliveries of one pull request (and of one id) keep their order and no
// round holds two of either. A delivery without a job is in a round too
// (recorded on its own, after the round's statement), so a redelivery of
// its id stays after it.
func pgRounds(batch []*intakeReq) [][]pgItem { return roundsOf(items(batch)) }

// roundsOf splits items into rounds as pgRounds does.
func roundsOf(items []pgItem) [][]pgItem {
	next := make(map[string]int, 2*len(items)) // key -> first round it may go in
	var rounds [][]pgItem
	for _, it := range items {
		keys := []string{"id:" + it.req.d.ID}
		if it.req.job != nil {
			keys = append(keys, prKey(it.req.job))
		}
		round := 0
		for _, k := range keys {
			round = max(round, next[k])
		}
		for _, k := range keys {
			next[k] = round + 1
		}
		if round == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[round] = append(rounds[round], it)
	}
	return rounds
}

func prKey(j *validation.JobSpec) string { return "pr:" + j.Repo + "#" + strconv.Itoa(j.PR) }

// pgStatement is one statement of a pipelined batch: a round, or a chain
// (every delivery of the batch for one pull request, see sqlChainPostgres).
type pgStatement struct {
	items []pgItem
	chain bool
}

// pipelineStatements splits a batch whose deliveries all ask for a job
// into the statements pipelineBatch sends: a chain for each pull request
// with several new heads in the batch (chainsOf), and rounds for the rest.
func pipelineStatements(batch []*intakeReq) []pgStatement {
	chains, rest := chainsOf(batch)
	out := make([]pgStatement, 0, len(chains)+1)
	for _, c := range chains {
		out = append(out, pgStatement{items: c, chain: true})
	}
	for _, round := range roundsOf(rest) {
		out = append(out, pgStatement{items: round})
	}
	return out
}

// chainsOf picks the chains of a batch: the deliveries of each pull
// request with several of them, all with triggers that bring new reviewed
// states (newState), no reviewed state twice (the second would attach),
// in batch order; rest is every other delivery, in batch order. A batch
// that names one delivery id twice has a duplicate, which needs a
// follow-up: it has no chains.
func chainsOf(batch []*intakeReq) (chains [][]pgItem, rest []pgItem) {
	ids := make(map[string]bool, len(batch))
	groups := make(map[string][]pgItem)
	var order []string
	for i, r := range batch {
		it := pgItem{i: i, req: r}
		if ids[r.d.ID] {
			return nil, items(batch)
		}
		ids[r.d.ID] = true
		if r.job == nil || r.d.Cancel != nil || r.d.Rerun != nil {
			rest = append(rest, it)
			continue
		}
		k := prKey(r.job)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	for _, k := range order {
		if g := groups[k]; len(g) >= 2 && chainable(g) {
			chains = append(chains, g)
		} else {
			rest = append(rest, g...)
		}
	}
	slices.SortFunc(rest, func(a, b pgItem) int { return a.i - b.i }) // batch order
	return chains, rest
}

// items is the batch as items, in order.
func items(batch []*intakeReq) []pgItem {
	out := make([]pgItem, len(batch))
	for i, r := range batch {
		out[i] = pgItem{i: i, req: r}
	}
	return out
}

// chainable reports whether a pull request's deliveries can be a chain:
// every trigger brings a new reviewed state, and no two deliveries ask
// for the same one (head and base).
func chainable(g []pgItem) bool {
	seen := make(map[[2]string]bool, len(g))
	for _, it := range g {
		k := [2]string{it.req.job.HeadSHA, it.req.job.BaseRef}
		if seen[k] || !newState(it.req.job.Trigger) {
			return false
		}
		seen[k] = true
	}
	return true
}

// recordRounds records the batch round by round (see pgRounds) inside the
// caller's transaction, filling results; it reports whether a delivery
// made a job claimable. A failed statement is an itemError of its
// delivery when it recorded one, else of no delivery in particular (-1),
// and the caller commits one by one.
func (d *DB) recordRounds(ctx context.Context, st boundStmts, batch []*intakeReq, results []intakeRes) (queued bool, err error) {
	for _, round := range pgRounds(batch) {
		var bulk []pgItem
		for _, it := range round {
			if it.req.job != nil {
				bulk = append(bulk, it)
			}
		}
		if len(bulk) > 0 { // one statement for the round
			res, err := d.recordPostgres(ctx, st, bulk)
			if err != nil {
				at := -1
				if len(bulk) == 1 {
					at = bulk[0].i
				}
				return false, &itemError{i: at, err: err}
			}
			for k, it := range bulk {
				results[it.i] = intakeRes{res: res[k]}
			}
		}
		for _, it := range round {
			if it.req.job != nil {
				continue
			}
			res, err := d.recordTx(ctx, st, it.req, nil)
			if err != nil {
				return false, &itemError{i: it.i, err: err}
			}
			results[it.i] = intakeRes{res: res}
		}
	}
	return anyClaimable(results), nil
}

// anyClaimable reports whether a delivery made a job claimable.
func anyClaimable(results []intakeRes) bool {
	for _, r := range results {
		if claimable(r.res) {
			return true
		}
	}
	return false
}

// allNewHeads reports whether every delivery of the batch asks for a job
// with a trigger that usually brings a reviewed state of its own (see
// newState): only such a batch is pipelined, since a delivery that
// attaches to an existing job rolls the pipelined batch back.
func allNewHeads(batch []*intakeReq) bool {
	for _, r := range batch {
		if r.job == nil || !newState(r.job.Trigger) {
			return false
		}
	}
	return true
}

// newState reports the triggers that usually come with a reviewed state
// that has no job yet: a pull request opened, a push to it, its base
// branch changed. The others (reopened, ready for review, a label) come
// for a head that has one, and attach to it.
func newState(trigger string) bool {
	switch trigger {
	case "opened", "synchronize", "edited":
		return true
	}
	return false
}

// claimable reports whether recording a delivery made a job claimable:
// new, queued again, re-run.
func claimable(res validation.RecordResult) bool {
	return !res.Duplicate && res.JobState == string(StateQueued) || res.Rerun > 0
}

// recordPostgres records the deliveries of one round (each asks for a
// job; no two share a pull request or an id) in one statement, as the
// statements of recordTx and recordJob would one after the other; a
// duplicate delivery and an existing job then take the shared path, in
// the round's order.
func (d *DB) recordPostgres(ctx context.Context, st boundStmts, items []pgItem) ([]validation.RecordResult, error) {
	now := d.nowMs()
	rows, err := st.recordPG.QueryContext(ctx, roundArgs(items, now)...)
	if err != nil {
		return nil, fmt.Errorf("record deliveries and jobs: %w", err)
	}
	got, err := readRound(rows, len(items))
	if err := errors.Join(err, rows.Close()); err != nil {
		return nil, fmt.Errorf("record deliveries and jobs: %w", err)
	}
	out := make([]validation.RecordResult, len(items))
	for k, r := range got {
		switch {
		case !r.inserted: // the id is already recorded: nothing else was written
			out[k], err = d.duplicate(ctx, st, items[k].req.d.ID, bodyRef{})
		case !r.id.Valid: // the reviewed state has its job
			out[k], err = d.attachJob(ctx, st, items[k].req.job, now)
		default:
			out[k] = r.result()
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// roundRow is sqlRecordPostgres's answer for one delivery.
type roundRow struct {
	inserted   bool
	id         sql.NullInt64
	state      sql.NullString
	superseded int
}

// roundRows is what database/sql's rows and pgx's both offer.
type roundRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// readRound reads a round statement's rows: n, one per delivery in order.
// The caller closes rows.
func readRound(rows roundRows, n int) ([]roundRow, error) {
	got := make([]roundRow, 0, n)
	for rows.Next() {
		var r roundRow
		if err := rows.Scan(&r.inserted, &r.id, &r.state, &r.superseded); err != nil {
			return nil, err
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(got) != n {
		return nil, fmt.Errorf("%d results for %d deliveries", len(got), n)
	}
	return got, nil
}

// settled reports whether the row is the delivery's whole answer: a new
// delivery with a new job (a duplicate or an existing job takes the
// shared path after the statement).
func (r roundRow) settled() bool { return r.inserted && r.id.Valid }

func (r roundRow) result() validation.RecordResult {
	return validation.RecordResult{JobID: r.id.Int64, JobState: r.state.String, JobCreated: true, Superseded: r.superseded}
}

// roundArgs are sqlRecordPostgres's arguments for a round: one array per
// column, one element per delivery.
func roundArgs(items []pgItem, now int64) []any {
	n := len(items)
	var (
		ids, events, actions, repos, heads, bases, statuses, reasons = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		headRepos, triggers                                          = make([]string, n), make([]string, n)
		installs, jobInstalls                                        = make([]*int64, n), make([]*int64, n)
		prs, received, updated                                       = make([]int64, n), make([]int64, n), make([]int64, n)
		bodies                                                       = make([][]byte, n)
	)
	for k, it := range items {
		del, job := it.req.d, it.req.job
		ids[k], events[k], actions[k], statuses[k], reasons[k] = del.ID, del.Event, del.Action, string(del.Status), del.Reason
		repos[k], prs[k], heads[k], bases[k] = job.Repo, int64(job.PR), job.HeadSHA, job.BaseRef
		headRepos[k], triggers[k], updated[k], received[k] = job.HeadRepo, job.Trigger, ms(job.PRUpdatedAt), ms(del.ReceivedAt)
		installs[k], jobInstalls[k] = nullable(del.InstallationID), nullable(job.InstallationID)
		bodies[k] = it.req.stored.b
	}
	return []any{ids, events, actions, installs, repos, prs, heads, bases,
		received, statuses, reasons, bodies, headRepos, jobInstalls, triggers, updated, staleReason, now}
}

// oneArgs are roundSQL's arguments for a round of one delivery, as plain
// values in roundArgs's order.
func oneArgs(it pgItem, now int64) []any {
	del, job := it.req.d, it.req.job
	return []any{del.ID, del.Event, del.Action, nullable(del.InstallationID), job.Repo, int64(job.PR), job.HeadSHA, job.BaseRef,
		ms(del.ReceivedAt), string(del.Status), del.Reason, it.req.stored.b, job.HeadRepo, nullable(job.InstallationID), job.Trigger,
		ms(job.PRUpdatedAt), staleReason, now}
}

// errFollowUp means a pipelined batch (or a chain, on SQLite) met a
// delivery whose answer needs a statement of its own (a duplicate, an
// existing job): the transaction was rolled back, and the batch runs again
// round by round (one by one, on SQLite).
var errFollowUp = errors.New("a delivery of the pipelined batch needs a follow-up")

// followUpCode is the SQLSTATE gilf_settled raises (migration 0003).
const followUpCode = "GF001"

// The statements around a batch's rounds. sqlLockPRs takes the pull
// requests' advisory locks in one order, so two batches do not wait for
// each other's (a deadlock PostgreSQL broke anyway would run the batch
// again). The same statement gives the transaction pipelineSettings.
const (
	sqlLockPRs = `SELECT ` + pipelineSettings + `, pg_advisory_xact_lock(k)
		FROM (SELECT unnest(CAST(? AS BIGINT[])) AS k ORDER BY k) AS l`
	// pipelineSettings are the pipelined batch's, for its transaction
	// alone (set_config's third argument), so that a pooler's next client
	// does not inherit them: its prepared statements run on their generic
	// plans. A custom plan of a round's statement costs more to make than
	// to run (measured: about 1 ms to plan a one-delivery round that runs
	// in 0.2 ms), and the server keeps choosing one when its estimates of
	// the arrays favour it. A generic plan is made on the statistics of its
	// day: see firstStatistics. TestPostgresQueryPlans checks the plans.
	pipelineSettings = `set_config('plan_cache_mode', 'force_generic_plan', true)`
	sqlNotifyJobs    = `SELECT pg_notify(?, '')`
)

// The pipelined batch's statements, in PostgreSQL's dialect (database/sql's
// are rewritten by pgConn).
var (
	pgBeginReadCommitted = "BEGIN ISOLATION LEVEL READ COMMITTED"
	pgLockPRs            = postgresSQL(sqlLockPRs)
	pgNotifyJobs         = postgresSQL(sqlNotifyJobs)
	pgRecordSettledSQL   = postgresSQL(roundSQL(true, false))
	pgRecordOneSQL       = postgresSQL(roundSQL(true, true))
	pgChainSQL           = postgresSQL(sqlChainPostgres)
)

// pipelineBatch records a batch whose deliveries all ask for a job with a
// new reviewed state (allNewHeads) as one transaction sent in one go
// through pgx's pipeline: BEGIN, the pull requests' locks, every chain's
// and round's statement, the notification, COMMIT. The
// server runs it without waiting for the client, so a pull request's lock
// is held only while the server works — never across a round trip to a
// client whose goroutine may wait for a CPU (measured on one pull request:
// the lock waits were most of intake's time when the client answered each
// step). A delivery that needs a follow-up makes its round's statement
// fail with followUpCode (gilf_settled): the transaction rolls back and
// the call returns errFollowUp. A batch that could not begin (a pooled
// connection the server closed, say) is a beginError, and runBatch runs it
// as an ordinary transaction. Any other failure is an itemError of no
// delivery in particular. The notification goes out with every such batch:
// almost every new head makes its job claimable, and a wake-up that finds
// nothing costs an idle replica one claim.
func (d *DB) pipelineBatch(ctx context.Context, locks []int64, batch []*intakeReq, results []intakeRes) (err error) {
	stmts := pipelineStatements(batch)
	conn, err := d.w.Conn(ctx)
	if err != nil {
		return &beginError{err: err, pipeline: true}
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	now := d.nowMs()
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(pgConn)
		if !ok {
			return fmt.Errorf("pipeline: a %T connection", dc)
		}
		pc := c.Conn.Conn()
		b := &pgx.Batch{}
		b.Queue(pgBeginReadCommitted)
		b.Queue(pgLockPRs, locks)
		for _, st := range stmts {
			switch {
			case st.chain:
				b.Queue(pgChainSQL, roundArgs(st.items, now)...)
			case len(st.items) == 1:
				b.Queue(pgRecordOneSQL, oneArgs(st.items[0], now)...)
			default:
				b.Queue(pgRecordSettledSQL, roundArgs(st.items, now)...)
			}
		}
		b.Queue(pgNotifyJobs, JobsChannel)
		b.Queue("COMMIT")
		br := pc.SendBatch(ctx, b)
		err := readPipelined(br, stmts, results)
		if err == nil {
			err = br.Close()
		} else {
			_ = br.Close() // reports the same error again
		}
		if err != nil && pc.PgConn().TxStatus() != 'I' {
			if _, rbErr := pc.Exec(ctx, "ROLLBACK"); rbErr != nil {
				// The connection's state is unknown: the pool drops it.
				return errors.Join(err, fmt.Errorf("rollback: %w", rbErr), driver.ErrBadConn)
			}
		}
		return err
	})
	var pe *pgconn.PgError
	switch {
	case err == nil:
		d.pipelined.Add(int64(len(stmts)))
		return nil
	case errors.As(err, &pe) && pe.Code == followUpCode:
		return errFollowUp
	case errors.As(err, new(*beginError)):
		return err
	default:
		return &itemError{i: -1, err: fmt.Errorf("record deliveries and jobs: %w", err)}
	}
}

// readPipelined reads a pipelined batch's answers in the order
// pipelineBatch queued them, filling results from the statements' rows.
func readPipelined(br pgx.BatchResults, stmts []pgStatement, results []intakeRes) error {
	if _, err := br.Exec(); err != nil { // nothing of the batch ran
		return &beginError{err: err, pipeline: true}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock pull requests: %w", err)
	}
	for _, st := range stmts {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		got, err := readRound(rows, len(st.items))
		rows.Close()
		if err != nil {
			return err
		}
		for k, r := range got {
			it := st.items[k]
			if !r.settled() { // gilf_settled raised first: cannot happen
				return fmt.Errorf("delivery %s: unsettled answer from a pipelined statement", it.req.d.ID)
			}
			results[it.i] = intakeRes{res: r.result()}
		}
	}
	for _, what := range []string{"notify", "commit"} {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// nullable is v as a nullable array element: 0 (unknown) is NULL.
func nullable(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// sqlRecordPostgres is, for each delivery of a round (the arrays ?1–?16,
// one element per delivery), sqlInsDelivery, then (when the delivery is
// new) sqlInsJob, then (when the job is new and queued) sqlSupersede, as
// one statement: one round trip for a round instead of three per delivery.
// Every part sees the snapshot from before the statement, as the sequence
// would for what it reads (a new job is its own head, which the
// supersession leaves alone; no other delivery of the round shares its
// pull request). It returns, per delivery in order, whether it was
// inserted, its new job's id and state (NULL when the state already had a
// job) and how many jobs the new one superseded.
var sqlRecordPostgres = roundSQL(false, false)

// The parts of roundSQL and sqlChainPostgres: a round's arrays (?1-?16,
// one element per delivery) as rows of deliveryColumns, and the CTE d
// that inserts those rows into deliveries (a recorded id inserts nothing).
const (
	deliveryArrays = `unnest(CAST(?1 AS TEXT[]), CAST(?2 AS TEXT[]), CAST(?3 AS TEXT[]), CAST(?4 AS BIGINT[]),
			CAST(?5 AS TEXT[]), CAST(?6 AS BIGINT[]), CAST(?7 AS TEXT[]), CAST(?8 AS TEXT[]), CAST(?9 AS BIGINT[]),
			CAST(?10 AS TEXT[]), CAST(?11 AS TEXT[]), CAST(?12 AS BYTEA[]), CAST(?13 AS TEXT[]), CAST(?14 AS BIGINT[]),
			CAST(?15 AS TEXT[]), CAST(?16 AS BIGINT[]))
			WITH ORDINALITY`
	deliveryColumns = `id, event, action, installation_id, repo, pr, head_sha, base_ref, received_at,
		status, reason, body, head_repo, job_installation_id, trigger_action, pr_updated_at, n`
	insertDeliveries = `d AS (
		INSERT INTO deliveries (id, event, action, installation_id, repo, pr, head_sha, base_ref,
			received_at, status, reason, body)
		SELECT id, event, action, installation_id, repo, pr, head_sha, base_ref, received_at, status, reason, body
		FROM i
		ON CONFLICT (id) DO NOTHING RETURNING id),`
)

// roundSQL is the round statement; with settled, its first column is
// gilf_settled of whether the delivery is settled (inserted with its new
// job), which raises for one that is not (pipelineBatch). With one, the
// round's one delivery comes as plain values (oneArgs) instead of arrays
// to unnest: the same statement, with less for the server to decode and
// to plan around.
func roundSQL(settled, one bool) string {
	first := "i.id IN (SELECT id FROM d)"
	if settled {
		first = "gilf_settled(i.id IN (SELECT id FROM d) AND j.id IS NOT NULL)"
	}
	rows := deliveryArrays
	if one {
		rows = `(VALUES (CAST(?1 AS TEXT), CAST(?2 AS TEXT), CAST(?3 AS TEXT), CAST(?4 AS BIGINT),
			CAST(?5 AS TEXT), CAST(?6 AS BIGINT), CAST(?7 AS TEXT), CAST(?8 AS TEXT), CAST(?9 AS BIGINT),
			CAST(?10 AS TEXT), CAST(?11 AS TEXT), CAST(?12 AS BYTEA), CAST(?13 AS TEXT), CAST(?14 AS BIGINT),
			CAST(?15 AS TEXT), CAST(?16 AS BIGINT), CAST(1 AS BIGINT)))`
	}
	return `WITH i AS (
		SELECT t.*, ` + newerHead("t.repo", "t.pr", "t.head_sha", "t.base_ref", "t.pr_updated_at") + ` AS stale
		FROM ` + rows + ` AS t (` + deliveryColumns + `)),
	` + insertDeliveries + `
	j AS (
		INSERT INTO jobs (repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
			trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at)
		SELECT i.repo, i.pr, i.head_sha, i.head_repo, i.base_ref, i.job_installation_id, i.id, i.trigger_action,
			i.pr_updated_at, CASE WHEN i.stale THEN 'superseded' ELSE 'queued' END,
			CASE WHEN i.stale THEN CAST(?17 AS TEXT) ELSE '' END, CAST(?18 AS BIGINT), CAST(?18 AS BIGINT), CAST(?18 AS BIGINT)
		FROM i
		WHERE i.id IN (SELECT id FROM d)
		ON CONFLICT (repo, pr, head_sha, base_ref) DO NOTHING
		RETURNING id, state, delivery_id, repo, pr, head_sha, base_ref, pr_updated_at),
	sup AS (
		UPDATE jobs SET state = 'superseded',
			reason = 'superseded by head ' || j.head_sha || ' (job ' || j.id || ')', updated_at = ?18
		FROM j
		WHERE jobs.repo = j.repo AND jobs.pr = j.pr AND (jobs.head_sha <> j.head_sha OR jobs.base_ref <> j.base_ref)
			AND jobs.state IN ('queued', 'running') AND jobs.pr_updated_at <= j.pr_updated_at AND j.state = 'queued'
		RETURNING j.id AS by_job)
	SELECT ` + first + `, j.id, j.state, (SELECT count(*) FROM sup WHERE sup.by_job = j.id)
	FROM i LEFT JOIN j ON j.delivery_id = i.id
	ORDER BY i.n`
}

// sqlChainPostgres records several new heads of one pull request (the
// arrays of roundSQL, in batch order; no reviewed state twice) in one
// statement, ending as roundSQL's statements would one after the other:
//
//   - A delivery is stale when the pull request's newest update time —
//     of its jobs before the statement, or of an earlier delivery of the
//     chain — is later than its own: its job is born superseded.
//   - Every other delivery (a "record": its update time is the newest so
//     far) is queued when it is recorded, and supersedes every unfinished
//     job then older than it: the first record, the pull request's
//     unfinished jobs from before the statement (all of them: none is
//     newer than it); each later record, the record before it — the only
//     job left unfinished. So a record is born superseded by the next one,
//     named in its reason, and the last record stays queued.
//   - Job ids are drawn in batch order, as one insert after the other
//     would draw them (nextval is evaluated after the ORDER BY).
//
// A delivery already recorded, or a reviewed state that has its job,
// makes gilf_settled raise: the batch then runs round by round. The rows
// are roundSQL's: per delivery in order, settled, the job's id, its state
// as recorded (queued for a record) and how many jobs it superseded.
var sqlChainPostgres = `WITH i AS (
		SELECT t.*
		FROM ` + deliveryArrays + ` AS t (` + deliveryColumns + `)),
	newest AS (
		SELECT (SELECT o.pr_updated_at FROM jobs AS o INDEXED BY jobs_pr_updated
			WHERE o.repo = f.repo AND o.pr = f.pr ORDER BY o.pr_updated_at DESC LIMIT 1) AS at
		FROM (SELECT repo, pr FROM i WHERE n = 1) AS f),
	ids AS (
		SELECT s.*, nextval('jobs_id_seq') AS job_id
		FROM (SELECT i.*, COALESCE(GREATEST((SELECT at FROM newest),
				max(i.pr_updated_at) OVER (ORDER BY i.n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) > i.pr_updated_at,
				false) AS stale
			FROM i) AS s
		ORDER BY s.n),
	rec AS (
		SELECT n, repo, pr, head_sha, base_ref, pr_updated_at, job_id,
			lag(job_id) OVER w IS NOT NULL AS later, lead(job_id) OVER w AS next_id, lead(head_sha) OVER w AS next_head
		FROM ids WHERE NOT stale
		WINDOW w AS (ORDER BY n)),
	` + insertDeliveries + `
	j AS (
		INSERT INTO jobs (id, repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
			trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at)
		SELECT ids.job_id, ids.repo, ids.pr, ids.head_sha, ids.head_repo, ids.base_ref, ids.job_installation_id, ids.id,
			ids.trigger_action, ids.pr_updated_at,
			CASE WHEN ids.stale OR rec.next_id IS NOT NULL THEN 'superseded' ELSE 'queued' END,
			CASE WHEN ids.stale THEN CAST(?17 AS TEXT)
				WHEN rec.next_id IS NOT NULL THEN 'superseded by head ' || rec.next_head || ' (job ' || rec.next_id || ')'
				ELSE '' END,
			CAST(?18 AS BIGINT), CAST(?18 AS BIGINT), CAST(?18 AS BIGINT)
		FROM ids LEFT JOIN rec ON rec.n = ids.n
		WHERE ids.id IN (SELECT id FROM d)
		ON CONFLICT (repo, pr, head_sha, base_ref) DO NOTHING
		RETURNING id, delivery_id),
	sup AS (
		UPDATE jobs SET state = 'superseded',
			reason = 'superseded by head ' || f.head_sha || ' (job ' || f.job_id || ')', updated_at = ?18
		FROM (SELECT * FROM rec WHERE NOT later) AS f
		WHERE jobs.repo = f.repo AND jobs.pr = f.pr AND (jobs.head_sha <> f.head_sha OR jobs.base_ref <> f.base_ref)
			AND jobs.state IN ('queued', 'running') AND jobs.pr_updated_at <= f.pr_updated_at
		RETURNING jobs.id)
	SELECT gilf_settled(ids.id IN (SELECT id FROM d) AND j.id IS NOT NULL), j.id,
		CASE WHEN ids.stale THEN 'superseded' ELSE 'queued' END,
		CASE WHEN ids.stale THEN 0 WHEN rec.later THEN 1 ELSE (SELECT count(*) FROM sup) END
	FROM ids LEFT JOIN j ON j.delivery_id = ids.id LEFT JOIN rec ON rec.n = ids.n
	ORDER BY ids.n`
