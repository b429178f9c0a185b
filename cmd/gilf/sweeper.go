package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/store"
)

// Redelivery sweeper limits (GILF_REDELIVERY_SWEEP_MS). GitHub never
// redelivers a failed webhook delivery on its own; the sweeper asks it to.
const (
	// MinRedeliverySweep bounds GILF_REDELIVERY_SWEEP_MS from below: each
	// sweep lists deliveries with the App JWT, against the App's rate
	// limit.
	MinRedeliverySweep = time.Minute
	// RedeliveryFirstLookback is how far back the first sweep after start
	// looks: deliveries that failed while gilf was down.
	RedeliveryFirstLookback = time.Hour
	// RedeliverySweepOverlap is subtracted from the start of the last
	// sweep to give the next one's since, so a delivery whose
	// delivered_at (GitHub's clock) falls near the boundary is not
	// missed. Deliveries seen twice are asked for once (the asked set).
	RedeliverySweepOverlap = time.Minute
	// MaxRedeliveriesPerSweep caps the redeliveries one sweep asks for;
	// the rest wait for the next sweep.
	MaxRedeliveriesPerSweep = 50
	// MaxRedeliveryAsked bounds the GUIDs remembered as asked for; the
	// oldest is forgotten first.
	MaxRedeliveryAsked = 10_000
	// MaxDeliveriesPerSweep bounds the deliveries one sweep reads.
	MaxDeliveriesPerSweep = github.DefaultMaxDeliveries
)

// hookDeliveries is the part of the GitHub client the sweeper uses.
type hookDeliveries interface {
	FailedDeliveries(ctx context.Context, since time.Time, limit int) ([]github.HookDelivery, error)
	Redeliver(ctx context.Context, id int64) error
}

// storedDeliveries is the part of the store the sweeper uses.
type storedDeliveries interface {
	Delivery(ctx context.Context, id string) (store.StoredDelivery, error)
}

// sweepCounts is what one sweep did, for its log line and tests.
type sweepCounts struct {
	Failed      int // failed GUIDs listed (no 2xx attempt among those read)
	Stored      int // already in the store: nothing to do
	Asked       int // asked for by an earlier sweep: not asked twice
	Redelivered int // redelivery requested now
	Deferred    int // over the per-sweep cap: left for the next sweep
	Errors      int // store lookups or redelivery requests that failed
}

// sweeper asks GitHub to redeliver webhook deliveries gilf failed to
// store. It is owned by serve: one goroutine runs Run.
type sweeper struct {
	gh     hookDeliveries
	db     storedDeliveries
	log    *slog.Logger
	now    func() time.Time
	perRun int // redeliveries per sweep
	scan   int // deliveries read per sweep

	since time.Time            // the next sweep lists deliveries from here
	asked map[string]time.Time // GUID → when its redelivery was asked for
	// exclusive, when set, runs a sweep only while no other replica runs
	// one (store.DB.Exclusive); unset, every sweep runs.
	exclusive exclusiveFunc
}

// exclusiveFunc runs fn unless another replica runs the task name.
type exclusiveFunc func(ctx context.Context, name string, fn func(context.Context) error) (bool, error)

// once runs fn through ex, or directly when ex is nil.
func (ex exclusiveFunc) once(ctx context.Context, name string, fn func(context.Context) error) error {
	if ex == nil {
		return fn(ctx)
	}
	_, err := ex(ctx, name, fn)
	return err
}

// every runs fn through ex at once, then at every tick, until ctx is
// done. A failure is logged (failed) and the next tick tries again; it
// returns only ctx's error.
func (ex exclusiveFunc) every(ctx context.Context, ticks <-chan time.Time, name string, fn func(context.Context) error, log *slog.Logger, failed string) error {
	for {
		if err := ex.once(ctx, name, fn); err != nil && ctx.Err() == nil {
			log.Warn(failed, logkey.Err, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticks:
		}
	}
}

func newSweeper(gh hookDeliveries, db storedDeliveries, log *slog.Logger, now func() time.Time) *sweeper {
	return &sweeper{
		gh: gh, db: db, log: log, now: now,
		perRun: MaxRedeliveriesPerSweep, scan: MaxDeliveriesPerSweep,
		asked: make(map[string]time.Time),
	}
}

// Run sweeps once at start, then at every tick, until ctx is done. A
// failed sweep is logged and the next tick tries again; Run returns only
// ctx's error.
func (s *sweeper) Run(ctx context.Context, ticks <-chan time.Time) error {
	return s.exclusive.every(ctx, ticks, "redelivery-sweep", func(ctx context.Context) error {
		_, err := s.Sweep(ctx)
		return err
	}, s.log, "redelivery sweep failed")
}

// Sweep lists the deliveries that failed since the last sweep (the last
// RedeliveryFirstLookback on the first), and asks GitHub to redeliver
// each one whose GUID is neither stored nor asked for before, at most
// perRun of them, oldest first. It logs one line with the counts.
func (s *sweeper) Sweep(ctx context.Context) (sweepCounts, error) {
	var n sweepCounts
	start := s.now()
	since := s.since
	if since.IsZero() {
		since = start.Add(-RedeliveryFirstLookback)
	}
	failed, err := s.gh.FailedDeliveries(ctx, since, s.scan)
	if err != nil {
		return n, fmt.Errorf("list failed deliveries since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	n.Failed = len(failed)
	// The next sweep starts where this one began, less the overlap, or
	// earlier: at the oldest delivery left over (cap, errors).
	next := start.Add(-RedeliverySweepOverlap)
	keep := func(d github.HookDelivery) {
		if d.DeliveredAt.Before(next) {
			next = d.DeliveredAt
		}
	}
	// Oldest first: the longest-lost deliveries go first.
	for i := len(failed) - 1; i >= 0 && ctx.Err() == nil; i-- {
		d := failed[i]
		if _, ok := s.asked[d.GUID]; ok {
			n.Asked++
			continue
		}
		_, err := s.db.Delivery(ctx, d.GUID)
		switch {
		case err == nil:
			n.Stored++
			continue
		case !errors.Is(err, store.ErrNotFound):
			n.Errors++
			keep(d)
			s.log.Warn("redelivery sweep: store lookup failed", logkey.DeliveryID, d.GUID, logkey.Err, err)
			continue
		}
		if n.Redelivered >= s.perRun {
			n.Deferred++
			keep(d)
			continue
		}
		if err := s.gh.Redeliver(ctx, d.ID); err != nil {
			n.Errors++
			keep(d)
			s.log.Warn("redelivery sweep: redeliver failed", logkey.DeliveryID, d.GUID, "delivery_attempt", d.ID, logkey.Err, err)
			continue
		}
		n.Redelivered++
		s.remember(d.GUID, start)
		s.log.Info("asked GitHub to redeliver", logkey.DeliveryID, d.GUID, "delivery_attempt", d.ID,
			logkey.Event, d.Event, logkey.Action, d.Action, "status_code", d.StatusCode, "delivered_at", d.DeliveredAt)
	}
	if err := ctx.Err(); err != nil {
		return n, fmt.Errorf("redelivery sweep: %w", err)
	}
	s.since = next
	s.log.Info("redelivery sweep", "since", since, "failed", n.Failed, "stored", n.Stored,
		"asked_before", n.Asked, "redelivered", n.Redelivered, "deferred", n.Deferred, "errors", n.Errors)
	return n, nil
}

// remember marks guid as asked for, forgetting the oldest entry when the
// set is full.
func (s *sweeper) remember(guid string, at time.Time) {
	if len(s.asked) >= MaxRedeliveryAsked {
		var oldest string
		var oldestAt time.Time
		for g, t := range s.asked {
			if oldest == "" || t.Before(oldestAt) {
				oldest, oldestAt = g, t
			}
		}
		delete(s.asked, oldest)
	}
	s.asked[guid] = at
}

// runEvery runs the sweeper on a ticker of period every until ctx is
// done; it is serve's goroutine and returns nil on shutdown.
func (s *sweeper) runEvery(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	s.log.Info("redelivery sweeper started", "every", every)
	err := s.Run(ctx, t.C)
	s.log.Info("redelivery sweeper stopped")
	if ctx.Err() != nil {
		return nil
	}
	return err
}
