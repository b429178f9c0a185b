package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	if d.engine != EnginePostgres {
		return nil, errors.New("PostgresPlans: PostgreSQL only")
	}
	if _, err := d.w.ExecContext(ctx, `ANALYZE`); err != nil {
		return nil, err
	}
	const repo, head, base, now = "o/r", "0000000000000000000000000000000000000001", "main", int64(1_700_000_000_000)
	one := func(v string) []string { return []string{v} }
	two := func(v string) []string { return []string{v, v} }
	stmts := []struct {
		name string
		q    string
		args []any
	}{
		{"due", sqlDue, []any{now}},
		{"dead leases", sqlDeadLeases, []any{now, 3}},
		{"rescue", sqlRescue, []any{now}},
		{"claim", claimPostgres, []any{"w", now, now}},
		{"record", sqlRecordPostgres, []any{one("x"), one("pull_request"), one("opened"), []*int64{nil}, one(repo), []int64{1},
			one(head), one(base), []int64{now}, one("queued"), one(""), [][]byte{{1}}, one(""), []*int64{nil}, one("opened"), []int64{now},
			staleReason, now}},
		{"record one (pipelined)", roundSQL(true, true), []any{"x", "pull_request", "opened", nil, repo, int64(1), head, base, now,
			"queued", "", []byte{1}, "", nil, "opened", now, staleReason, now}},
		{"chain", sqlChainPostgres, []any{[]string{"x", "y"}, two("pull_request"), two("opened"), []*int64{nil, nil}, two(repo), []int64{1, 1},
			[]string{head, "0000000000000000000000000000000000000002"}, two(base), []int64{now, now}, two("queued"), two(""), [][]byte{{1}, {2}},
			two(""), []*int64{nil, nil}, two("opened"), []int64{now, now + 1}, staleReason, now}},
		{"look up job", sqlLookupJob, []any{repo, 1, head, base, now}},
		{"insert job", sqlInsJob, []any{repo, 1, head, "", base, nil, "x", "opened", now, staleReason, now}},
		{"supersede", sqlSupersede, []any{"r", now, repo, 1, head, base, now}},
		{"recorded delivery's job", sqlDupJob, []any{"x"}},
	}
	plans := make(map[string]string)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		for _, s := range stmts {
			plan, err := explain(ctx, d, mode, s.q, s.args)
			if err != nil {
				return nil, fmt.Errorf("%s (%s): %w", s.name, mode, err)
			}
			plans[s.name+" ("+mode+")"] = plan
		}
	}
	return plans, nil
}

func explain(ctx context.Context, d *DB, mode, q string, args []any) (string, error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		return "", err
	}
	rows, err := tx.QueryContext(ctx, "EXPLAIN "+q, args...)
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

// Pipelined is how many statements (chains and rounds) the intake batches
// d recorded through pgx's pipeline sent (PostgreSQL), or how many chains
// d recorded (SQLite).
func Pipelined(d *DB) int64 { return d.pipelined.Load() }
