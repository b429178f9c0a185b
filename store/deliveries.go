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
	var inst, pr, job, off, n, crc, pruned sql.NullInt64
	var seg sql.NullString
	var at int64
	// The job is found by the key the row carries (migration 0002).
	err := d.r.QueryRowContext(ctx, `SELECT d.id, d.event, d.action, d.installation_id, d.repo, d.pr, d.head_sha,
		d.received_at, d.status, d.reason, j.id, d.body, d.body_segment, d.body_offset, d.body_length, d.body_crc32c,
		d.body_pruned_at FROM deliveries d LEFT JOIN jobs j ON d.status = 'queued' AND j.repo = d.repo AND j.pr = d.pr
			AND j.head_sha = d.head_sha AND j.base_ref = d.base_ref
		WHERE d.id = ?`, id).Scan(&s.ID, &s.Event, &s.Action, &inst,
		&s.Repo, &pr, &s.HeadSHA, &at, &s.Status, &s.Reason, &job, &s.Body, &seg, &off, &n, &crc, &pruned)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("delivery %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("delivery %q: %w", id, err)
	}
	switch {
	case pruned.Valid:
		s.Body, s.BodyPrunedAt = nil, fromMs(pruned.Int64)
	case seg.Valid: // in SQLite's body log
		ref, err := bodyRefOf(seg, off, n, crc)
		if err == nil {
			s.Body, err = d.eng.loggedBody(ref)
		}
		if err != nil {
			return s, fmt.Errorf("delivery %q: %w", id, err)
		}
	default: // in the row
		if s.Body, err = d.eng.rowBody(s.Body); err != nil {
			return s, fmt.Errorf("delivery %q: %w", id, err)
		}
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

// bodyRefOf builds a body reference from a row's columns.
func bodyRefOf(seg sql.NullString, off, n, crc sql.NullInt64) (bodyRef, error) {
	if !seg.Valid || !off.Valid || !n.Valid || !crc.Valid || crc.Int64 < 0 || crc.Int64 > 1<<32-1 {
		return bodyRef{}, fmt.Errorf("%w: incomplete body reference", ErrBodyCorrupt)
	}
	return bodyRef{segment: seg.String, offset: off.Int64, length: n.Int64, crc: uint32(crc.Int64)}, nil
}
