package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// StoredDelivery is a recorded delivery with the job it led to.
type StoredDelivery struct {
	validation.Delivery
	JobID int64 // 0 when none
	// BodyPrunedAt is when retention dropped the raw body (Body is then
	// nil); zero while the body is kept.
	BodyPrunedAt time.Time
}

// Delivery reads a recorded delivery, raw body included — unless
// retention pruned it (BodyPrunedAt set, Body nil, no error); ErrNotFound
// when the id was never recorded.
func (d *DB) Delivery(ctx context.Context, id string) (StoredDelivery, error) {
	var s StoredDelivery
	var inst, pr, job, crc, pruned sql.NullInt64
	var at int64
	// The job is found by the key the row carries (migration 0002).
	err := d.r.QueryRowContext(ctx, `SELECT d.id, d.event, d.action, d.installation_id, d.repo, d.pr, d.head_sha,
		d.received_at, d.status, d.reason, j.id, d.body, d.body_crc32c, d.body_pruned_at
		FROM deliveries d LEFT JOIN jobs j ON d.status = 'queued' AND j.repo = d.repo AND j.pr = d.pr
			AND j.head_sha = d.head_sha AND j.base_ref = d.base_ref
		WHERE d.id = ?`, id).Scan(&s.ID, &s.Event, &s.Action, &inst,
		&s.Repo, &pr, &s.HeadSHA, &at, &s.Status, &s.Reason, &job, &s.Body, &crc, &pruned)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("delivery %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("delivery %q: %w", id, err)
	}
	if pruned.Valid {
		s.Body, s.BodyPrunedAt = nil, fromMs(pruned.Int64)
	} else if s.Body, err = decodeBody(s.Body, crcOf(crc)); err != nil {
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

// crcOf is a row's body_crc32c, nil when it has none.
func crcOf(v sql.NullInt64) *uint32 {
	if !v.Valid {
		return nil
	}
	c := uint32(v.Int64)
	return &c
}
