package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

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

// allNew reports whether every delivery of the batch asks for a job and
// cancels and re-runs nothing: sqlRecordNew can record each.
func allNew(batch []*intakeReq) bool {
	for _, r := range batch {
		if r.job == nil || r.d.Cancel != nil || r.d.Rerun != nil {
			return false
		}
	}
	return true
}

// The pipelined batch's statements, in PostgreSQL's dialect.
var (
	pgRecordNew = postgresSQL(sqlRecordNew)
	pgLockPRs   = postgresSQL(sqlLockPRs)
)

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
		for _, r := range batch {
			b.Queue(pgRecordNew, recordNewArgs(r, now)...)
		}
		br := pc.SendBatch(ctx, b)
		err := readPipelined(br, batch, results, &settled)
		err = errors.Join(err, br.Close())
		if errors.As(err, new(*beginError)) {
			// A pooled connection the server ended (a restart, a
			// failover) is found dead when used: the pool drops it.
			return errors.Join(err, driver.ErrBadConn)
		}
		end := "COMMIT"
		if err != nil || !settled {
			end = "ROLLBACK"
		} else if anyClaimable(results) {
			if _, err := pc.Exec(ctx, sqlNotifyJobsPG, JobsChannel); err != nil {
				end, err = "ROLLBACK", fmt.Errorf("notify: %w", err)
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
func readPipelined(br pgx.BatchResults, batch []*intakeReq, results []intakeRes, settled *bool) error {
	if _, err := br.Exec(); err != nil { // nothing of the batch ran
		return &beginError{err: err}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock pull requests: %w", err)
	}
	for i := range batch {
		var inserted bool
		var id, superseded sql.NullInt64
		var state sql.NullString
		if err := br.QueryRow().Scan(&inserted, &id, &state, &superseded); err != nil {
			return err
		}
		if !inserted || !id.Valid {
			*settled = false
			return nil
		}
		results[i] = intakeRes{res: validation.RecordResult{JobID: id.Int64, JobState: state.String, JobCreated: true, Superseded: int(superseded.Int64)}}
	}
	return nil
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
