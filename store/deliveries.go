package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// StoredDelivery is a recorded delivery with the job it led to.
type StoredDelivery struct {
	validation.Delivery
	JobID int64 // 0 when none
}

// Delivery reads a recorded delivery, raw body included; ErrNotFound when
// the id was never recorded.
func (d *DB) Delivery(ctx context.Context, id string) (StoredDelivery, error) {
	var s StoredDelivery
	var inst, pr, job sql.NullInt64
	var at int64
	err := d.r.QueryRowContext(ctx, `SELECT id, event, action, installation_id, repo, pr, head_sha, received_at,
		status, reason, job_id, body FROM deliveries WHERE id = ?`, id).Scan(&s.ID, &s.Event, &s.Action, &inst,
		&s.Repo, &pr, &s.HeadSHA, &at, &s.Status, &s.Reason, &job, &s.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("delivery %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("delivery %q: %w", id, err)
	}
	s.InstallationID, s.PR, s.JobID, s.ReceivedAt = inst.Int64, int(pr.Int64), job.Int64, fromMs(at)
	return s, nil
}

// CountDeliveries returns how many deliveries are recorded.
func (d *DB) CountDeliveries(ctx context.Context) (int, error) {
	var n int
	if err := d.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count deliveries: %w", err)
	}
	return n, nil
}
