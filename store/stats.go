package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// States are every State a job can be in, in the order of its life.
var States = []State{StateQueued, StateRunning, StateDone, StateFailed, StateDead, StateSuperseded, StateCancelled}

// QueueStats is the queue as an operator watches it, read from the store
// (every replica's jobs).
type QueueStats struct {
	// Jobs counts the jobs in each state; every state of States is
	// present, zero included.
	Jobs map[State]int
	// OldestDue is when the longest-waiting queued job became due (its
	// next attempt time, in the past); zero when no queued job is due. A
	// job waiting out its retry backoff is not due yet.
	OldestDue time.Time
}

// QueueStats counts jobs by state and finds the longest-waiting due job.
func (d *DB) QueueStats(ctx context.Context) (QueueStats, error) {
	s := QueueStats{Jobs: make(map[State]int, len(States))}
	for _, st := range States {
		s.Jobs[st] = 0
	}
	counts, err := queryRows(ctx, d.r, scanPair[State, int], `SELECT state, COUNT(*) FROM jobs GROUP BY state`)
	if err != nil {
		return QueueStats{}, fmt.Errorf("count jobs by state: %w", err)
	}
	for _, c := range counts {
		s.Jobs[c.a] = c.b
	}
	var oldest sql.NullInt64
	if err := d.r.QueryRowContext(ctx, `SELECT MIN(next_attempt_at) FROM jobs INDEXED BY jobs_ready
		WHERE state = 'queued' AND next_attempt_at <= ?`, d.nowMs()).Scan(&oldest); err != nil {
		return QueueStats{}, fmt.Errorf("oldest due job: %w", err)
	}
	if oldest.Valid {
		s.OldestDue = time.UnixMilli(oldest.Int64).UTC()
	}
	return s, nil
}
