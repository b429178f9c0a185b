package store

import (
	"context"
	"sync/atomic"
	"time"
)

// FirstStatisticsJobs is the job id from which a PostgreSQL replica makes
// sure the planner has statistics of jobs and deliveries taken on tables
// with rows in them (firstStatistics).
//
// A connection plans a prepared statement once — the pipelined intake's on
// its first run (pipelineSettings), the others after their fifth — and
// keeps the plan until the statistics of a table it reads change.
// Statistics taken while the tables were empty or nearly so — by
// autovacuum, which first analyzes a new table at 50 rows, or by a
// maintenance job — make the cheapest plans ones that read the whole of
// jobs, and autovacuum's next ANALYZE may come a minute later
// (autovacuum_naptime), thousands of jobs later on a busy intake: until
// then every delivery reads every job. Measured in bench/intakeload, whose
// first run on a new database follows a VACUUM (ANALYZE) of its empty
// tables: two sequential scans of jobs per delivery, and about a third of
// the later runs' rate. An ANALYZE past this many jobs has every
// connection plan again (PostgreSQL re-plans a prepared statement whose
// tables' statistics changed), on statistics where the indexes win; below
// it, reading every job costs little. (Statistics never taken make no
// such plans: the planner then counts the table's pages as they are.)
const FirstStatisticsJobs = 1000

// FirstStatisticsTimeout bounds firstStatistics: an ANALYZE that waits so
// long for its lock (behind a long VACUUM, say) gives up, and leaves the
// statistics to autovacuum.
const FirstStatisticsTimeout = time.Minute

const (
	// sqlYoungStatistics: whether the planner's statistics of jobs were
	// never taken (reltuples -1) or counted fewer than ?1 rows.
	sqlYoungStatistics = `SELECT reltuples < ? FROM pg_class WHERE oid = CAST('jobs' AS regclass)`
	sqlFirstStatistics = `ANALYZE jobs, deliveries`
)

// firstStats is a replica's firstStatistics, run once.
type firstStats struct {
	timeout time.Duration // FirstStatisticsTimeout; tests shorten it
	started atomic.Bool
	taken   atomic.Bool   // it ran the ANALYZE
	done    chan struct{} // closed when it is over
}

// noteJobs starts firstStatistics, once, when a batch recorded a job whose
// id is FirstStatisticsJobs or more. The PostgreSQL writer calls it, while
// it holds its own count of d.wg.
func (d *DB) noteJobs(ctx context.Context, results []intakeRes) {
	if d.firstStats.started.Load() {
		return
	}
	for _, r := range results {
		if r.res.JobID >= FirstStatisticsJobs {
			if d.firstStats.started.CompareAndSwap(false, true) {
				d.wg.Add(1)
				go d.firstStatistics(ctx)
			}
			return
		}
	}
}

// firstStatistics analyzes jobs and deliveries when the planner's
// statistics of jobs are missing or were taken on fewer than half of
// FirstStatisticsJobs rows; a replica that starts on a database in use
// finds them taken, and does nothing. It fails alone: autovacuum comes by
// later anyway.
func (d *DB) firstStatistics(ctx context.Context) {
	defer d.wg.Done()
	defer close(d.firstStats.done)
	ctx, cancel := context.WithTimeout(ctx, d.firstStats.timeout)
	defer cancel()
	go func() { // Close does not wait for an ANALYZE
		select {
		case <-d.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	var young bool
	if err := d.w.QueryRowContext(ctx, sqlYoungStatistics, FirstStatisticsJobs/2).Scan(&young); err != nil {
		d.log.Warn("store: reading the planner's statistics of jobs", "err", err)
		return
	}
	if !young {
		return
	}
	start := time.Now()
	if _, err := d.w.ExecContext(ctx, sqlFirstStatistics); err != nil {
		d.log.Warn("store: taking the first planner statistics of jobs and deliveries", "err", err)
		return
	}
	d.firstStats.taken.Store(true)
	d.log.Info("store: took the first planner statistics of jobs and deliveries", "took", time.Since(start).Round(time.Millisecond))
}
