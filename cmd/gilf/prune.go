package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gilf-review/gilf/store"
)

// storePruner is the part of the store the pruner uses.
type storePruner interface {
	Prune(ctx context.Context, before time.Time) (store.PruneResult, error)
}

// pruner applies GILF_RETENTION_DAYS: `gilf serve` runs it every
// PruneInterval, `gilf prune` once.
type pruner struct {
	db   storePruner
	log  *slog.Logger
	now  func() time.Time
	keep time.Duration // > 0
	// exclusive, when set, prunes only while no other replica prunes.
	exclusive exclusiveFunc
}

func newPruner(db storePruner, log *slog.Logger, now func() time.Time, keep time.Duration) *pruner {
	return &pruner{db: db, log: log, now: now, keep: keep}
}

// Prune drops what is older than the retention, and logs one line.
func (p *pruner) Prune(ctx context.Context) (store.PruneResult, error) {
	res, err := p.db.Prune(ctx, p.now().Add(-p.keep))
	if err != nil {
		return res, err
	}
	p.log.Info("store pruned", "before", res.Before, "bodies", res.Bodies, "runs", res.Runs, "base_results", res.BaseResults)
	return res, nil
}

// Run prunes at start, then at every tick, until ctx is done. A failed
// prune is logged and the next tick tries again; Run returns only ctx's
// error.
func (p *pruner) Run(ctx context.Context, ticks <-chan time.Time) error {
	return p.exclusive.every(ctx, ticks, "prune", func(ctx context.Context) error {
		_, err := p.Prune(ctx)
		return err
	}, p.log, "store prune failed")
}

// runEvery is serve's pruning goroutine; it returns nil on shutdown.
func (p *pruner) runEvery(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	p.log.Info("store pruner started", "every", every, "retention", p.keep)
	err := p.Run(ctx, t.C)
	p.log.Info("store pruner stopped")
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// runPrune is `gilf prune`: applies GILF_RETENTION_DAYS once, also while
// `gilf serve` runs (the segment serve appends to is kept until it
// restarts).
func runPrune(ctx context.Context, env Env, args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(env.Stderr, "usage: gilf prune (no arguments; GILF_DATA_DIR names the store, GILF_RETENTION_DAYS what to keep)")
		if args[0] == "-h" || args[0] == "--help" {
			return exitOK
		}
		return exitUsage
	}
	cfg, err := Load(env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf prune: configuration:\n%v\n", err)
		return exitUsage
	}
	if cfg.Jobs.RetentionDays == 0 {
		fmt.Fprintln(env.Stdout, "retention is off (GILF_RETENTION_DAYS=0): nothing pruned")
		return exitOK
	}
	db, code := openExistingStore(ctx, env, "gilf prune")
	if db == nil {
		return code
	}
	defer db.Close()
	res, err := newPruner(db, newLogger(env.Stderr, cfg.Log), time.Now, cfg.Jobs.Retention()).Prune(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf prune: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(env.Stdout, "pruned what is older than %s (%d days): %d delivery bodies, step output of %d runs, %d stored base results\n",
		res.Before.Format(time.RFC3339), cfg.Jobs.RetentionDays, res.Bodies, res.Runs, res.BaseResults)
	return exitOK
}
