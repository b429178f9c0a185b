package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Intake on SQLite is a group commit with the bodies on the side. The
// writer takes every delivery waiting, reserves room for their bodies in
// the body log and hands the bodies to the appender goroutine, which
// writes and fsyncs them while the writer runs the batch's statements in
// one transaction; the writer waits for the bodies, commits, fsyncs the
// WAL and answers the callers.

// betweenBatches checkpoints the WAL past BusyCheckpointBytes, at most
// every BusyCheckpointInterval.
func (e *sqliteEngine) betweenBatches(ctx context.Context) {
	if time.Since(e.lastLook) < e.d.opts.BusyCheckpointInterval {
		return
	}
	// Between two batches no commit races the checkpoint, so it
	// copies the whole WAL and the next batch starts the WAL
	// over instead of growing it: under a steady flow of
	// deliveries the checkpointer's own passes never finish
	// (a commit lands while they copy), and the WAL grows
	// without bound. Only past BusyCheckpointBytes: below, the
	// checkpointer copies beside the commits and no delivery
	// waits (a writer checkpoint every 250 ms made p99 33–37 ms
	// at 64 concurrent deliveries, one past 256 MiB 23–27 ms).
	e.lastLook = time.Now()
	if e.wal.past(e.d.opts.BusyCheckpointBytes) {
		e.checkpoint(ctx, "PASSIVE")
	}
}

// writerDone closes the appender's queue: the one writer fed it.
func (e *sqliteEngine) writerDone() { close(e.appends) }

// commit reserves the batch's bodies, has the appender write them,
// runs the batch in one transaction that commits once the bodies are
// durable, and answers the batch once the commit is on disk too.
func (e *sqliteEngine) commit(ctx context.Context, batch []*intakeReq) {
	d := e.d
	results := make([]intakeRes, len(batch))
	live := make([]*intakeReq, 0, len(batch))
	liveAt := make([]int, 0, len(batch))
	for i, r := range batch {
		ref, err := e.bodies.reserve(int64(len(r.stored.b)), r.stored.crc)
		if err != nil { // fails alone: nothing of it is written
			results[i] = intakeRes{err: err}
			continue
		}
		r.body = ref
		live = append(live, r)
		liveAt = append(liveAt, i)
	}
	written := make(chan []error, 1)
	e.appends <- appendJob{batch: live, done: written}
	if old := e.bodies.takeRetired(); len(old) > 0 {
		// After the batch that may still write to them.
		e.appends <- appendJob{retire: old}
	}
	// The bodies are written and synced while the statements run; the
	// transaction commits only once they are durable, so no row — in
	// the WAL, or copied into the database by a checkpoint — names a
	// body that is not on disk. A delivery whose body failed fails alone,
	// without its row.
	var bodyErr map[*intakeReq]error
	bodies := func() {
		if bodyErr == nil {
			errs := <-written
			bodyErr = make(map[*intakeReq]error, len(live))
			for k, err := range errs {
				bodyErr[live[k]] = err
				if err != nil {
					d.log.Error("delivery body not stored; answered with the error", "delivery_id", live[k].d.ID, "err", err)
				}
			}
		}
	}
	ready := func(rows []*intakeReq) error {
		bodies()
		for i, r := range rows {
			if err := bodyErr[r]; err != nil {
				return &itemError{i: i, err: err}
			}
		}
		return nil
	}
	if len(live) > 0 {
		res := d.commitRows(ctx, live, make([]intakeRes, len(live)), ready)
		for k, i := range liveAt {
			results[i] = res[k]
		}
	}
	bodies() // a batch that failed before its commit waits for them too
	d.answer(batch, results)
}

// appendJob is a batch of reserved bodies for the appender; done gets one
// error (or nil) per body. A job with retire set instead names segments
// the writer rotated out: the appender closes them once every earlier
// job's bodies are written and synced.
type appendJob struct {
	batch  []*intakeReq
	done   chan []error
	retire []*segment
}

// appender writes reserved bodies and makes them durable: it takes every
// batch queued for it, writes their bodies one after the other, fsyncs the
// segment once (with SynchronousFull) and answers each batch. It runs while
// the writer executes the same batches' statements, so the fsync is
// usually over before the writer is ready to commit. It exits
// when the writer closes its queue.
func (e *sqliteEngine) appender() {
	d := e.d
	defer d.wg.Done()
	var group []appendJob
	for job := range e.appends {
		group = append(group[:0], job)
	drain:
		for {
			select {
			case job, ok := <-e.appends:
				if !ok {
					break drain
				}
				group = append(group, job)
			default:
				break drain
			}
		}
		errs := make([][]error, len(group))
		var wrote []*segment // the segments written to, once each
		for g, job := range group {
			errs[g] = make([]error, len(job.batch))
			for i, r := range job.batch {
				errs[g][i] = e.bodies.write(r.stored.b, r.body)
				r.stored.release()
				if errs[g][i] == nil && !slices.Contains(wrote, r.body.seg) {
					wrote = append(wrote, r.body.seg)
				}
			}
		}
		if len(wrote) > 0 && d.opts.Synchronous == SynchronousFull {
			if err := e.bodies.sync(wrote...); err != nil {
				d.log.Error("body log fsync failed: intake refused until restart", "err", err)
				for g := range errs {
					for i := range errs[g] {
						errs[g][i] = cmp.Or(errs[g][i], err)
					}
				}
			}
		}
		// Every body of a retired segment is in an earlier job: written
		// and synced by now. Closed before answering, so a caller that got
		// its answer finds the segments retired before its batch unlocked.
		for _, job := range group {
			for _, seg := range job.retire {
				if err := seg.close(); err != nil {
					d.log.Warn("closing a rotated body log segment failed", "segment", seg.name, "err", err)
				}
			}
		}
		for g, job := range group {
			if job.done != nil {
				job.done <- errs[g]
			}
		}
	}
}
