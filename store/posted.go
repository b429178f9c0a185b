package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Posted is what gilf posted to GitHub for a job. A zero id means not
// posted (yet).
type Posted struct {
	JobID      int64
	ReviewID   int64
	CheckRunID int64
	HeadSHA    string
	PostedAt   time.Time
}

// MarkPosted records a posted review and/or check run for a job. It merges
// with what is already recorded (a zero id keeps the stored one), so the
// review and the check run may be recorded separately and a repeat is
// harmless. It is not fenced: it records a fact that already happened on
// GitHub, which a rescued worker must see before posting again.
func (d *DB) MarkPosted(ctx context.Context, p Posted) error {
	if p.JobID == 0 || (p.ReviewID == 0 && p.CheckRunID == 0) {
		return fmt.Errorf("mark posted: job %d with review %d and check run %d", p.JobID, p.ReviewID, p.CheckRunID)
	}
	at := ms(p.PostedAt)
	if at == 0 {
		at = d.nowMs()
	}
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO posted_reviews (job_id, review_id, check_run_id, head_sha, posted_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (job_id) DO UPDATE SET
				review_id = COALESCE(excluded.review_id, posted_reviews.review_id),
				check_run_id = COALESCE(excluded.check_run_id, posted_reviews.check_run_id),
				head_sha = CASE WHEN excluded.head_sha <> '' THEN excluded.head_sha ELSE posted_reviews.head_sha END,
				posted_at = excluded.posted_at`,
			p.JobID, nullInt(p.ReviewID), nullInt(p.CheckRunID), p.HeadSHA, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark job %d posted: %w", p.JobID, err)
	}
	return nil
}

// PostedReview returns what was posted for a job, and false when nothing
// was.
func (d *DB) PostedReview(ctx context.Context, jobID int64) (Posted, bool, error) {
	p := Posted{JobID: jobID}
	var review, check sql.NullInt64
	var at int64
	err := d.r.QueryRowContext(ctx, `SELECT review_id, check_run_id, head_sha, posted_at FROM posted_reviews
		WHERE job_id = ?`, jobID).Scan(&review, &check, &p.HeadSHA, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("posted review of job %d: %w", jobID, err)
	}
	p.ReviewID, p.CheckRunID, p.PostedAt = review.Int64, check.Int64, fromMs(at)
	return p, true, nil
}
