package store

// Commands in pull-request comments (issue 33). Intake records a command
// as an issue_comment delivery with status queued and no job; the command
// worker finds it here, claims it by compare-and-set on (status, reason)
// and finishes it with what it did. No table of its own: the delivery row
// is the command, and what a command may spend is counted from the runs
// and deliveries the store already has.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// The statements of the command worker's reads, each on the partial
// index of migration 0010 (deliveries has no other secondary index).
const (
	sqlPendingCommands = `SELECT id, installation_id, repo, pr, received_at, status, reason
		FROM deliveries INDEXED BY deliveries_commands
		WHERE event = 'issue_comment' AND ((status = 'queued' AND received_at >= ?1)
			OR (status = 'running' AND received_at >= ?1 AND received_at < ?2))
		ORDER BY received_at, id LIMIT ?3`
	sqlAnsweredCommands = `SELECT COUNT(*) FROM deliveries INDEXED BY deliveries_commands
		WHERE event = 'issue_comment' AND status = ?4 AND received_at >= ?1 AND repo = ?2 AND pr = ?3`
)

// PendingCommand is a command delivery waiting for the worker (queued),
// or claimed by one that may have died (running).
type PendingCommand struct {
	ID             string
	InstallationID int64
	Repo           string
	PR             int
	ReceivedAt     time.Time
	Status         validation.DeliveryStatus
	Reason         string // the claim's token while running
	Body           []byte
}

// PendingCommands lists, oldest first, at most limit command deliveries
// received since since that are queued, or running and received before
// staleBefore (their worker stopped without finishing). Their bodies are
// read too; one retention pruned is left out.
func (d *DB) PendingCommands(ctx context.Context, since, staleBefore time.Time, limit int) ([]PendingCommand, error) {
	out, err := queryRows(ctx, d.r, func(rows *sql.Rows) (PendingCommand, error) {
		var c PendingCommand
		var inst, pr sql.NullInt64
		var at int64
		err := rows.Scan(&c.ID, &inst, &c.Repo, &pr, &at, &c.Status, &c.Reason)
		c.InstallationID, c.PR, c.ReceivedAt = inst.Int64, int(pr.Int64), fromMs(at)
		return c, err
	}, sqlPendingCommands, ms(since), ms(staleBefore), limit)
	if err != nil {
		return nil, fmt.Errorf("pending commands: %w", err)
	}
	kept := out[:0]
	for _, c := range out {
		sd, err := d.Delivery(ctx, c.ID)
		if err != nil {
			return nil, fmt.Errorf("pending command: %w", err)
		}
		if sd.Body != nil {
			c.Body = sd.Body
			kept = append(kept, c)
		}
	}
	return kept, nil
}

// ClaimCommand takes a pending command for one worker: it moves it from
// the status and reason it was listed with to running with token as its
// reason. ok is false when another worker took it first.
func (d *DB) ClaimCommand(ctx context.Context, c PendingCommand, token string) (bool, error) {
	n, err := d.updateCount(ctx, `UPDATE deliveries SET status = 'running', reason = ?1
		WHERE id = ?2 AND status = ?3 AND reason = ?4 AND event = 'issue_comment'`, token, c.ID, string(c.Status), c.Reason)
	if err != nil {
		return false, fmt.Errorf("claim command %s: %w", c.ID, err)
	}
	return n == 1, nil
}

// FinishCommand records what a command did, if token still holds it;
// ErrLeaseLost when it does not.
func (d *DB) FinishCommand(ctx context.Context, id, token string, status validation.DeliveryStatus, reason string) error {
	n, err := d.updateCount(ctx, `UPDATE deliveries SET status = ?1, reason = ?2
		WHERE id = ?3 AND status = 'running' AND reason = ?4`, string(status), reason, id, token)
	if err == nil && n != 1 {
		err = ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("finish command %s: %w", id, err)
	}
	return nil
}

// updateCount runs one write statement in its own transaction and
// returns how many rows it changed.
func (d *DB) updateCount(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return n, err
}

// PRJob returns the newest job of a pull request at head; found is false
// when there is none.
func (d *DB) PRJob(ctx context.Context, repo string, pr int, head string) (id int64, found bool, err error) {
	err = d.r.QueryRowContext(ctx, `SELECT id FROM jobs WHERE repo = ?1 AND pr = ?2 AND head_sha = ?3
		ORDER BY pr_updated_at DESC, id DESC LIMIT 1`, repo, pr, head).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("job of %s#%d at %s: %w", repo, pr, head, err)
	}
	return id, true, nil
}

// PRActivity is what a pull request spent since a time: when each of its
// runs started, and how many commands were answered.
type PRActivity struct {
	Runs     []time.Time // oldest first
	Commands int
}

// PRActivity counts a pull request's runs and answered commands since
// since (the per-pull-request budget of commands and runs).
func (d *DB) PRActivity(ctx context.Context, repo string, pr int, since time.Time) (PRActivity, error) {
	var a PRActivity
	var err error
	a.Runs, err = queryRows(ctx, d.r, func(rows *sql.Rows) (time.Time, error) {
		at, err := scanOne[int64](rows)
		return fromMs(at), err
	}, `SELECT r.started_at FROM runs r JOIN jobs j ON j.id = r.job_id
		WHERE j.repo = ?1 AND j.pr = ?2 AND r.started_at >= ?3 ORDER BY r.started_at`, repo, pr, ms(since))
	if err != nil {
		return a, fmt.Errorf("runs of %s#%d: %w", repo, pr, err)
	}
	err = d.r.QueryRowContext(ctx, sqlAnsweredCommands, ms(since), repo, pr, string(validation.DeliveryDone)).Scan(&a.Commands)
	if err != nil {
		return a, fmt.Errorf("commands of %s#%d: %w", repo, pr, err)
	}
	return a, nil
}
