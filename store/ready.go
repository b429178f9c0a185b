package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Readiness limits. Each is a named limit with a test at its boundary.
const (
	// ReadyInterval is how long one answer of Ready is reused: probes of a
	// busy process (a load balancer, Kubernetes, an operator's curl loop)
	// take the writer connection at most once per interval. Poisoning is
	// read on every call; only the write probe is cached.
	ReadyInterval = time.Second
	// ReadyProbeTimeout bounds the write probe; the writer connection
	// waiting longer than this for its turn is itself a reason not to take
	// traffic.
	ReadyProbeTimeout = 2 * time.Second
)

// readyCache is the last write probe's answer.
type readyCache struct {
	turn chan struct{} // one probe at a time; waiters honour their ctx
	mu   sync.Mutex
	at   time.Time // zero: never probed
	err  error
}

// Ready reports whether the store accepts writes: ErrClosed after Close,
// ErrNotDurable after a failed fsync (the store refuses writes until it is
// reopened), else the result of a write probe — a BEGIN IMMEDIATE that
// takes the write lock on the writer connection, then ROLLBACK, bounded by
// ReadyProbeTimeout and reused for ReadyInterval. The probe writes
// nothing, so it says nothing of free space; the caller checks that.
func (d *DB) Ready(ctx context.Context) error {
	if err := d.refusal(); err != nil {
		return err
	}
	select {
	case d.ready.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("store write probe: %w", ctx.Err())
	}
	defer func() { <-d.ready.turn }()
	now := d.opts.Now()
	d.ready.mu.Lock()
	if !d.ready.at.IsZero() && now.Sub(d.ready.at) >= 0 && now.Sub(d.ready.at) < ReadyInterval {
		err := d.ready.err
		d.ready.mu.Unlock()
		return err
	}
	d.ready.mu.Unlock()
	err := d.probeWrite(ctx)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return err // the caller went away: not an answer to keep
	}
	d.ready.mu.Lock()
	d.ready.at, d.ready.err = now, err
	d.ready.mu.Unlock()
	if err == nil {
		// A write that failed meanwhile may have poisoned the store.
		return d.refusal()
	}
	return err
}

// refusal is why every write is refused now, or nil.
func (d *DB) refusal() error {
	select {
	case <-d.quit:
		return ErrClosed
	default:
	}
	return d.drv.Failed()
}

func (d *DB) probeWrite(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyProbeTimeout)
	defer cancel()
	tx, err := d.w.BeginTx(ctx, nil) // SQLite: BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return fmt.Errorf("store write probe: %w", err)
	}
	if err := d.drv.CheckWritable(ctx, tx); err != nil {
		return errors.Join(fmt.Errorf("store write probe: %w", err), rollback(tx))
	}
	if err := tx.Rollback(); err != nil {
		return fmt.Errorf("store write probe: rollback: %w", err)
	}
	return nil
}
