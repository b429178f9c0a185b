package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gilf-review/gilf/validation"
)

// RecordBatch records deliveries as one group commit — the batch one
// intake writer would take, in this order — and returns each delivery's
// result and error, as RecordDelivery would. On SQLite it runs on the
// caller's goroutine what the writer runs on its own: the caller must not
// record anything else meanwhile.
func RecordBatch(ctx context.Context, d *DB, dels []validation.Delivery, jobs []*validation.JobSpec) ([]validation.RecordResult, []error, error) {
	batch := make([]*intakeReq, len(dels))
	for i, del := range dels {
		if err := checkDelivery(del, jobs[i]); err != nil {
			return nil, nil, err
		}
		batch[i] = &intakeReq{d: del, job: jobs[i], stored: encodeBody(del.Body), done: make(chan intakeRes, 1)}
	}
	if d.engine == EngineSQLite {
		d.commitBatch(ctx, batch)
	} else {
		d.commitInline(ctx, batch)
	}
	res, errs := make([]validation.RecordResult, len(batch)), make([]error, len(batch))
	for i, r := range batch {
		a := <-r.done
		res[i], errs[i] = a.res, a.err
	}
	return res, errs, nil
}

// PostgresPlans explains intake's and the claims' statements on d
// (PostgreSQL) with sample arguments, under the generic plan (what a
// prepared statement runs after its fifth execution, unless custom plans
// cost less) and a custom one, after an ANALYZE: name -> plan text.
func PostgresPlans(ctx context.Context, d *DB) (map[string]string, error) {
	if err := analyze(ctx, d); err != nil {
		return nil, err
	}
	plans := make(map[string]string)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		if err := explainAll(ctx, d, "SET LOCAL plan_cache_mode = "+mode, mode, false, plans); err != nil {
			return nil, err
		}
	}
	return plans, nil
}

// PostgresPipelinePlans explains the pipelined batch's statements on d
// (PostgreSQL) under the batch's own settings (pipelineSettings), after
// an ANALYZE: name -> plan text.
func PostgresPipelinePlans(ctx context.Context, d *DB) (map[string]string, error) {
	if err := analyze(ctx, d); err != nil {
		return nil, err
	}
	plans := make(map[string]string)
	if err := explainAll(ctx, d, "SELECT "+pipelineSettings, "pipeline settings", true, plans); err != nil {
		return nil, err
	}
	return plans, nil
}

// analyze takes the planner's statistics of d's tables (PostgreSQL).
func analyze(ctx context.Context, d *DB) error {
	if d.engine != EnginePostgres {
		return errors.New("explain: PostgreSQL only")
	}
	_, err := d.w.ExecContext(ctx, `ANALYZE`)
	return err
}

// explainAll explains the sample statements (only the pipelined batch's
// with pipelined) in transactions that first run set, into plans under
// "name (label)".
func explainAll(ctx context.Context, d *DB, set, label string, pipelined bool, plans map[string]string) error {
	const repo, head, base, now = "o/r", "0000000000000000000000000000000000000001", "main", int64(1_700_000_000_000)
	one := func(v string) []string { return []string{v} }
	two := func(v string) []string { return []string{v, v} }
	round := []any{one("x"), one("pull_request"), one("opened"), []*int64{nil}, one(repo), []int64{1},
		one(head), one(base), []int64{now}, one("queued"), one(""), [][]byte{{1}}, one(""), []*int64{nil}, one("opened"), []int64{now},
		staleReason, now}
	stmts := []struct {
		name      string
		q         string
		args      []any
		pipelined bool
	}{
		{"due", sqlDue, []any{now}, false},
		{"dead leases", sqlDeadLeases, []any{now, 3}, false},
		{"rescue", sqlRescue, []any{now}, false},
		{"claim", claimPostgres, []any{"w", now, now}, false},
		{"record", sqlRecordPostgres, round, false},
		{"record (pipelined)", roundSQL(true, false), round, true},
		{"record one (pipelined)", roundSQL(true, true), []any{"x", "pull_request", "opened", nil, repo, int64(1), head, base, now,
			"queued", "", []byte{1}, "", nil, "opened", now, staleReason, now}, true},
		{"chain", sqlChainPostgres, []any{[]string{"x", "y"}, two("pull_request"), two("opened"), []*int64{nil, nil}, two(repo), []int64{1, 1},
			[]string{head, "0000000000000000000000000000000000000002"}, two(base), []int64{now, now}, two("queued"), two(""), [][]byte{{1}, {2}},
			two(""), []*int64{nil, nil}, two("opened"), []int64{now, now + 1}, staleReason, now}, true},
		{"look up job", sqlLookupJob, []any{repo, 1, head, base, now}, false},
		{"insert job", sqlInsJob, []any{repo, 1, head, "", base, nil, "x", "opened", now, staleReason, now}, false},
		{"supersede", sqlSupersede, []any{"r", now, repo, 1, head, base, now}, false},
		{"recorded delivery's job", sqlDupJob, []any{"x"}, false},
	}
	for _, s := range stmts {
		if pipelined && !s.pipelined {
			continue
		}
		plan, err := explain(ctx, d, set, s.q, s.args)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", s.name, label, err)
		}
		plans[s.name+" ("+label+")"] = plan
	}
	return nil
}

// explain is q's plan with args, in a transaction that first runs set.
func explain(ctx context.Context, d *DB, set, q string, args []any) (string, error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, set); err != nil {
		return "", err
	}
	return planText(tx.QueryContext(ctx, "EXPLAIN "+q, args...))
}

// planText is EXPLAIN's answer as text, one line per row.
func planText(rows *sql.Rows, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan.WriteString(line + "\n")
	}
	return plan.String(), rows.Err()
}

// CachedRoundPlan is the plan d's one connection (PostgreSQL, with
// Options.MaxConns 1) keeps for the pipelined round of one delivery, as
// its next pipelined batch would run it: EXPLAIN EXECUTE of that prepared
// statement, under pipelineSettings. The statement must have run.
func CachedRoundPlan(ctx context.Context, d *DB) (string, error) {
	conn, err := d.w.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var name string
	if err := conn.QueryRowContext(ctx, `SELECT name FROM pg_prepared_statements WHERE statement = ?`, pgRecordOneSQL).Scan(&name); err != nil {
		return "", fmt.Errorf("the round's prepared statement: %w", err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT "+pipelineSettings); err != nil {
		return "", err
	}
	const args = `('x', 'pull_request', 'opened', NULL, 'o/r', 1, '0000000000000000000000000000000000000001', 'main',
		1700000000000, 'queued', '', '\\x01', '', NULL, 'opened', 1700000000000, 'stale', 1700000000000)`
	return planText(tx.QueryContext(ctx, "EXPLAIN EXECUTE "+pgx.Identifier{name}.Sanitize()+args))
}

// SetFirstStatisticsTimeout replaces FirstStatisticsTimeout for d, before
// its intake records job FirstStatisticsJobs.
func SetFirstStatisticsTimeout(d *DB, t time.Duration) { d.firstStats.timeout = t }

// FirstStatistics reports whether d (PostgreSQL) started its
// firstStatistics, and whether it ran the ANALYZE; done is closed when it
// is over.
func FirstStatistics(d *DB) (started, taken bool, done <-chan struct{}) {
	return d.firstStats.started.Load(), d.firstStats.taken.Load(), d.firstStats.done
}

// Pipelined is how many statements (chains and rounds) the intake batches
// d recorded through pgx's pipeline sent (PostgreSQL), or how many chains
// d recorded (SQLite).
func Pipelined(d *DB) int64 { return d.pipelined.Load() }
