package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gilf-review/gilf/validation"
)

// sqlRecordNew is, on PostgreSQL, a delivery that asks for a job recorded
// as recordTx's three statements would record it — sqlInsDelivery, then
// sqlInsJob when the delivery is new, then sqlSupersede when its job is
// new and queued — in one statement: one round trip instead of three.
// What it buys, measured with bench/intake.sh at c=64 on one pull request
// (every delivery a new head, all taking turns on one writer): 0.04× a
// bare net/http handler without it (p99 122 ms), see recordNew's commit
// for the figure with it. A delivery already recorded, or a reviewed
// state that has its job, takes the plain statements (recordNew).
//
// It returns whether the delivery was inserted, its job's id and state
// (NULL when the reviewed state had its job) and how many jobs the new
// one superseded.
var sqlRecordNew = `WITH d AS (
		INSERT INTO deliveries (id, event, action, installation_id, repo, pr, head_sha, base_ref, received_at, status, reason, body)
		VALUES (?1, ?2, ?3, ?4, CAST(?5 AS TEXT), CAST(?6 AS BIGINT), CAST(?7 AS TEXT), CAST(?8 AS TEXT), ?9, ?10, ?11, ?12)
		ON CONFLICT (id) DO NOTHING RETURNING id),
	j AS (
		INSERT INTO jobs (repo, pr, head_sha, head_repo, base_ref, installation_id, delivery_id,
			trigger_action, pr_updated_at, state, reason, next_attempt_at, created_at, updated_at)
		SELECT ?5, ?6, ?7, CAST(?13 AS TEXT), ?8, CAST(?14 AS BIGINT), ?1, CAST(?15 AS TEXT), CAST(?16 AS BIGINT),
			CASE WHEN s.stale THEN 'superseded' ELSE 'queued' END,
			CASE WHEN s.stale THEN CAST(?17 AS TEXT) ELSE '' END, CAST(?18 AS BIGINT), CAST(?18 AS BIGINT), CAST(?18 AS BIGINT)
		FROM (SELECT ` + newerHead("?5", "?6", "?7", "?8", "?16") + ` AS stale) AS s
		WHERE EXISTS (SELECT 1 FROM d)
		ON CONFLICT (repo, pr, head_sha, base_ref) DO NOTHING
		RETURNING id, state),
	sup AS (
		UPDATE jobs SET state = 'superseded', reason = 'superseded by head ' || ?7 || ' (job ' || j.id || ')', updated_at = ?18
		FROM j
		WHERE j.state = 'queued' AND jobs.repo = ?5 AND jobs.pr = ?6 AND (jobs.head_sha <> ?7 OR jobs.base_ref <> ?8)
			AND jobs.state IN ('queued', 'running') AND jobs.pr_updated_at <= ?16
		RETURNING jobs.id)
	SELECT EXISTS (SELECT 1 FROM d), (SELECT id FROM j), (SELECT state FROM j), (SELECT count(*) FROM sup)`

// recordNew records r (it asks for a job, and cancels and re-runs
// nothing) with sqlRecordNew; a duplicate, or a job that exists, then
// takes recordTx's plain path from where the statement left it.
func (d *DB) recordNew(ctx context.Context, st boundStmts, r *intakeReq, now int64) (validation.RecordResult, error) {
	del, job := r.d, r.job
	var inserted bool
	var id, superseded sql.NullInt64
	var state sql.NullString
	if err := st.recordNew.QueryRowContext(ctx, recordNewArgs(r, now)...).Scan(&inserted, &id, &state, &superseded); err != nil {
		return validation.RecordResult{}, fmt.Errorf("record delivery and job: %w", err)
	}
	switch {
	case !inserted: // the id is already recorded: nothing else is written
		return d.duplicate(ctx, st, del.ID, r.body)
	case !id.Valid: // the reviewed state has its job
		return d.attachJob(ctx, st, job, now)
	}
	return validation.RecordResult{JobID: id.Int64, JobState: state.String, JobCreated: true, Superseded: int(superseded.Int64)}, nil
}

// The pipelined batch's statements, in PostgreSQL's dialect.
var (
	pgRecordNew = postgresSQL(sqlRecordNew)
	pgChain     = postgresSQL(sqlChainPostgres)
	pgLockPRs   = postgresSQL(sqlLockPRs)
)

// followUpCode is the SQLSTATE gilf_settled raises (migration 0003).
const followUpCode = "GF001"

// The parts of sqlChainPostgres: its arrays (?1-?16, one element per
// delivery) as rows of deliveryColumns, and the CTE d that inserts those
// rows into deliveries (a recorded id inserts nothing).
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

// sqlChainPostgres records several new heads of one pull request (the
// arrays of deliveryArrays, in batch order; no reviewed state twice) in one
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
// makes gilf_settled (migration 0003) raise: the batch then runs with the
// plain statements. Its rows are sqlRecordNew's, per delivery in order:
// settled, the job's id, its state as recorded (queued for a record) and
// how many jobs it superseded.
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

// chainArgs are sqlChainPostgres's arguments for the deliveries at idx.
func chainArgs(batch []*intakeReq, idx []int, now int64) []any {
	n := len(idx)
	var (
		ids, events, actions, repos, heads, bases, statuses, reasons = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		headRepos, triggers                                          = make([]string, n), make([]string, n)
		installs, jobInstalls                                        = make([]*int64, n), make([]*int64, n)
		prs, received, updated                                       = make([]int64, n), make([]int64, n), make([]int64, n)
		bodies                                                       = make([][]byte, n)
	)
	for k, i := range idx {
		del, job := batch[i].d, batch[i].job
		ids[k], events[k], actions[k], statuses[k], reasons[k] = del.ID, del.Event, del.Action, string(del.Status), del.Reason
		repos[k], prs[k], heads[k], bases[k] = job.Repo, int64(job.PR), job.HeadSHA, job.BaseRef
		headRepos[k], triggers[k], updated[k], received[k] = job.HeadRepo, job.Trigger, ms(job.PRUpdatedAt), ms(del.ReceivedAt)
		installs[k], jobInstalls[k] = nullable(del.InstallationID), nullable(job.InstallationID)
		bodies[k] = batch[i].stored.b
	}
	return []any{ids, events, actions, installs, repos, prs, heads, bases,
		received, statuses, reasons, bodies, headRepos, jobInstalls, triggers, updated, staleReason, now}
}

// runPipelined records a batch of allNew deliveries on PostgreSQL in two
// round trips instead of one per statement: BEGIN, the pull requests'
// locks and every delivery's sqlRecordNew go out at once through pgx's
// pipeline, and the server runs them one after the other without waiting
// for the client; then the notification and COMMIT. On a loaded machine
// each round trip waits for a CPU for the client's goroutine, with the
// pull request's lock held meanwhile. Measured with bench/intake.sh at
// c=64 on one pull request: 0.02–0.04× a bare net/http handler with one
// round trip per statement, see this function's commit for the figure
// with it. When a delivery was recorded already, or its reviewed state
// has its job, the batch is rolled back and done is false: the caller
// records it with the plain statements. A failed statement is an
// itemError of no delivery in particular (the caller then records each
// delivery alone); a batch that could not begin leaves done false.
func (d *DB) runPipelined(ctx context.Context, batch []*intakeReq, results []intakeRes) (done bool, err error) {
	locks, _ := prLocks(batch)
	conn, err := d.w.Conn(ctx)
	if err != nil {
		return false, nil
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	now := d.nowMs()
	settled := true
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(pgConn)
		if !ok {
			return fmt.Errorf("pipeline: a %T connection", dc)
		}
		pc := c.Conn.Conn()
		b := &pgx.Batch{}
		b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		b.Queue(pgLockPRs, locks)
		groups := pipelineGroups(batch)
		for _, g := range groups {
			if len(g) == 1 {
				b.Queue(pgRecordNew, recordNewArgs(batch[g[0]], now)...)
			} else {
				b.Queue(pgChain, chainArgs(batch, g, now)...)
			}
		}
		br := pc.SendBatch(ctx, b)
		err := readPipelined(br, groups, results, &settled)
		if cerr := br.Close(); settled {
			// Else the follow-up's error again, or none.
			err = errors.Join(err, cerr)
		}
		if errors.As(err, new(*beginError)) {
			// A pooled connection the server ended (a restart, a
			// failover) is found dead when used: the pool drops it.
			return errors.Join(err, driver.ErrBadConn)
		}
		end := "COMMIT"
		if err != nil || !settled {
			end = "ROLLBACK"
		} else if anyClaimable(results) {
			if _, nerr := pc.Exec(ctx, sqlNotifyJobsPG, JobsChannel); nerr != nil {
				end, err = "ROLLBACK", fmt.Errorf("notify: %w", nerr)
			}
		}
		if _, endErr := pc.Exec(ctx, end); endErr != nil {
			// The connection's state is unknown: the pool drops it.
			return errors.Join(err, fmt.Errorf("%s: %w", strings.ToLower(end), endErr), driver.ErrBadConn)
		}
		return err
	})
	switch {
	case errors.As(err, new(*beginError)):
		return false, nil // the plain transaction begins on a fresh connection
	case err != nil:
		return true, &itemError{i: -1, err: fmt.Errorf("record deliveries and jobs: %w", err)}
	}
	return settled, nil
}

// readPipelined reads runPipelined's answers into results; settled turns
// false at the first delivery the plain statements must record.
func readPipelined(br pgx.BatchResults, groups [][]int, results []intakeRes, settled *bool) error {
	if _, err := br.Exec(); err != nil { // nothing of the batch ran
		return &beginError{err: err}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock pull requests: %w", err)
	}
	for _, g := range groups {
		rows, err := br.Query()
		if err != nil {
			return followUp(err, settled)
		}
		for _, i := range g {
			if !rows.Next() {
				rows.Close()
				return followUp(cmp.Or(rows.Err(), errors.New("a delivery without its row")), settled)
			}
			var ok bool
			var id, superseded sql.NullInt64
			var state sql.NullString
			if err := rows.Scan(&ok, &id, &state, &superseded); err != nil {
				rows.Close()
				return err
			}
			if !ok || !id.Valid {
				rows.Close()
				*settled = false
				return nil
			}
			results[i] = intakeRes{res: validation.RecordResult{JobID: id.Int64, JobState: state.String, JobCreated: true, Superseded: int(superseded.Int64)}}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return followUp(err, settled)
		}
	}
	return nil
}

// followUp is err, unless it is gilf_settled's: then settled turns false
// and there is no error.
func followUp(err error, settled *bool) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == followUpCode {
		*settled = false
		return nil
	}
	return err
}

func anyClaimable(results []intakeRes) bool {
	for _, r := range results {
		if claimable(r.res) {
			return true
		}
	}
	return false
}

// recordNewArgs are sqlRecordNew's arguments for r.
func recordNewArgs(r *intakeReq, now int64) []any {
	del, job := r.d, r.job
	return []any{del.ID, del.Event, del.Action, nullable(del.InstallationID),
		job.Repo, job.PR, job.HeadSHA, job.BaseRef, ms(del.ReceivedAt), string(del.Status), del.Reason, r.stored.b,
		job.HeadRepo, nullable(job.InstallationID), job.Trigger, ms(job.PRUpdatedAt), staleReason, now}
}

// nullable is v, or nil for 0 (NULL), for pgx.
func nullable(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}
