package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The dashboard's reads of runs (readmodels.go has the types).

// sqlRunColumns are the columns of a RunSummary, in scanSummary's
// order; the query joins runs r to jobs j.
const sqlRunColumns = `r.id, r.job_id, j.repo, j.pr, j.head_sha, r.outcome, r.reason, r.refusal, r.executor, r.tier,
	r.started_at, r.finished_at,
	(SELECT COUNT(*) FROM findings f WHERE f.run_id = r.id),
	(SELECT SUM(c.usd) FROM cost_spans c WHERE c.run_id = r.id)`

func scanSummary(sc interface{ Scan(...any) error }) (RunSummary, error) {
	var s RunSummary
	var started, finished int64
	var usd sql.NullFloat64
	if err := sc.Scan(&s.ID, &s.JobID, &s.Repo, &s.PR, &s.HeadSHA, &s.Outcome, &s.Reason, &s.Refusal, &s.Executor,
		&s.Tier, &started, &finished, &s.Findings, &usd); err != nil {
		return s, err
	}
	s.Started, s.Finished = fromMs(started), fromMs(finished)
	if usd.Valid {
		v := usd.Float64
		s.USD = &v
	}
	return s, nil
}

// RunList reads one page of runs, newest first, filtered by q.
func (d *DB) RunList(ctx context.Context, q RunQuery) (RunPage, error) {
	limit := q.PageLimit()
	var to int64
	if !q.To.IsZero() {
		to = q.To.UnixMilli()
	}
	rows, err := d.r.QueryContext(ctx, `SELECT `+sqlRunColumns+` FROM runs r JOIN jobs j ON j.id = r.job_id
		WHERE (?1 = '' OR j.repo = ?1) AND (?2 = '' OR r.outcome = ?2) AND (?3 = '' OR r.executor = ?3)
			AND r.finished_at >= ?4 AND (r.finished_at < ?5 OR ?5 = 0) AND (r.id < ?6 OR ?6 = 0)
			AND (r.job_id = ?8 OR ?8 = 0)
		ORDER BY r.id DESC LIMIT ?7`,
		q.Repo, string(q.Outcome), q.Executor, ms(q.From), to, q.Before, limit+1, q.Job)
	if err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	page := RunPage{Runs: []RunSummary{}}
	for rows.Next() {
		s, err := scanSummary(rows)
		if err != nil {
			return RunPage{}, fmt.Errorf("list runs: %w", err)
		}
		page.Runs = append(page.Runs, s)
	}
	if err := rows.Err(); err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = page.Runs[limit-1].ID
	}
	return page, nil
}

// RunView reads one run with its record, artifacts and shadow
// comparison; ErrNotFound when there is none.
func (d *DB) RunView(ctx context.Context, id int64) (RunView, error) {
	var v RunView
	var record string
	row := d.r.QueryRowContext(ctx, `SELECT `+sqlRunColumns+`, r.record FROM runs r JOIN jobs j ON j.id = r.job_id
		WHERE r.id = ?`, id)
	var err error
	v.RunSummary, err = scanSummary(scanAlso{row, &record})
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("run %d: %w", id, err)
	}
	if err := json.Unmarshal([]byte(record), &v.Record); err != nil {
		return v, fmt.Errorf("run %d: decode record: %w", id, err)
	}
	if v.Artifacts, err = d.runArtifacts(ctx, id); err != nil {
		return v, fmt.Errorf("run %d: %w", id, err)
	}
	sh, ok, err := d.runShadow(ctx, id)
	if err != nil {
		return v, fmt.Errorf("run %d: %w", id, err)
	}
	if ok {
		v.Shadow = &sh
	}
	return v, nil
}

// scanAlso scans a row into a summary's columns and then more.
type scanAlso struct {
	row  *sql.Row
	more any
}

func (s scanAlso) Scan(dest ...any) error { return s.row.Scan(append(dest, s.more)...) }

func (d *DB) runArtifacts(ctx context.Context, id int64) ([]ArtifactView, error) {
	rows, err := d.r.QueryContext(ctx, `SELECT key, kind, bytes, sha256, status, url, error FROM artifacts
		WHERE run_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	defer rows.Close()
	out := []ArtifactView{}
	for rows.Next() {
		var a ArtifactView
		if err := rows.Scan(&a.Key, &a.Kind, &a.Bytes, &a.SHA256, &a.Status, &a.URL, &a.Err); err != nil {
			return nil, fmt.Errorf("artifacts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	return out, nil
}

// runShadow reads a run's shadow comparison; false when no shadow lane ran.
func (d *DB) runShadow(ctx context.Context, id int64) (ShadowView, bool, error) {
	var s ShadowView
	var wall int64
	var usd sql.NullFloat64
	var detail string
	err := d.r.QueryRowContext(ctx, `SELECT executor, outcome, error, steps_agreed, steps_total, wall_ms, usd, detail
		FROM shadow_telemetry WHERE run_id = ? ORDER BY id LIMIT 1`, id).Scan(
		&s.Executor, &s.Outcome, &s.Err, &s.StepsAgreed, &s.StepsTotal, &wall, &usd, &detail)
	if errors.Is(err, sql.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("shadow telemetry: %w", err)
	}
	s.Wall = time.Duration(wall) * time.Millisecond
	if usd.Valid {
		v := usd.Float64
		s.USD = &v
	}
	var dj struct {
		Steps []ShadowStep `json:"steps"`
	}
	if err := json.Unmarshal([]byte(detail), &dj); err != nil {
		return s, false, fmt.Errorf("shadow telemetry: decode detail: %w", err)
	}
	s.Steps = dj.Steps
	if s.Steps == nil {
		s.Steps = []ShadowStep{}
	}
	return s, true, nil
}
