package store

import (
	"context"
	"database/sql"
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
	d.answer(batch, d.commitRows(ctx, batch))
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
		if err := explainAll(ctx, d, "SET LOCAL plan_cache_mode = "+mode, mode, plans); err != nil {
			return nil, err
		}
	}
	return plans, nil
}

// analyze takes the planner's statistics of d's tables (PostgreSQL).
func analyze(ctx context.Context, d *DB) error {
	if d.Engine() != EnginePostgres {
		return errors.New("explain: PostgreSQL only")
	}
	_, err := d.w.ExecContext(ctx, `ANALYZE`)
	return err
}

// explainAll explains the sample statements in transactions that first
// run set, into plans under "name (label)".
func explainAll(ctx context.Context, d *DB, set, label string, plans map[string]string) error {
	const repo, head, base, now = "o/r", "0000000000000000000000000000000000000001", "main", int64(1_700_000_000_000)
	stmts := []struct {
		name string
		q    string
		args []any
	}{
		{"due", sqlDue, []any{now}},
		{"dead leases", sqlDeadLeases, []any{now, 3}},
		{"rescue", sqlRescue, []any{now}},
		{"claim", fmt.Sprintf(sqlClaim, " FOR UPDATE SKIP LOCKED"), []any{"w", now, now}},
		{"look up job", sqlLookupJob, []any{repo, 1, head, base, now}},
		{"insert job", sqlInsJob, []any{repo, 1, head, "", base, nil, "x", "opened", now, staleReason, now}},
		{"supersede", sqlSupersede, []any{"r", now, repo, 1, head, base, now}},
		{"recorded delivery's job", sqlDupJob, []any{"x"}},
	}
	for _, s := range stmts {
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
