package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// The writer connection runs with PRAGMA synchronous=NORMAL: a commit
// writes its WAL frames and returns without an fsync. With
// SynchronousFull the store then fsyncs the WAL itself (fdatasync) before
// it tells anyone the commit happened: the intake writer after each
// batch, every other write transaction before it returns. An acknowledged
// commit is therefore on disk, exactly as with synchronous=FULL, and a
// failed fsync is caught and handled here (ErrNotDurable) instead of
// inside SQLite. (SQLite's checkpoints sync the WAL and the database
// themselves at NORMAL.)

// ErrNotDurable means an fsync of the WAL failed. The commits since the
// last good sync may not be on disk, and after a failed fsync the kernel
// may have dropped the dirty pages, so a later good sync proves nothing:
// the store refuses every later write until it is opened again.
var ErrNotDurable = errors.New("store: WAL fsync failed; writes refused until the store is reopened")

// poisoned remembers a file's first failed fsync: after one, the kernel
// may have dropped the pages it could not write, so no later sync proves
// anything. Safe for concurrent use.
type poisoned struct{ err atomic.Pointer[error] }

// failed is the first failure, or nil.
func (p *poisoned) failed() error {
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

// fail records err (as ErrNotDurable) unless a failure came first, and
// returns the first one.
func (p *poisoned) fail(err error) error {
	e := fmt.Errorf("%w: %w", ErrNotDurable, err)
	p.err.CompareAndSwap(nil, &e)
	return *p.err.Load()
}

// walFile is the database's WAL, opened by the store for fsync.
type walFile struct {
	path     string
	mu       sync.Mutex
	f        *os.File
	poisoned // by the first failed sync; read without the lock
}

func openWAL(dbPath string) (*walFile, error) {
	w := &walFile{path: dbPath + "-wal"}
	f, err := os.Open(w.path)
	if err != nil {
		return nil, fmt.Errorf("open WAL for sync: %w", err)
	}
	w.f = f
	return w, nil
}

// sync fsyncs the WAL, one sync at a time. If SQLite replaced the file
// (it deletes the WAL when the last connection to the database closes, and
// a later connection makes a new one), the open file is unlinked: it is
// reopened by name first, so the sync reaches the file the commits went
// to.
func (w *walFile) sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.failed(); err != nil {
		return err
	}
	if err := w.reopenIfUnlinked(); err != nil {
		return w.fail(err)
	}
	if err := datasync(w.f); err != nil {
		return w.fail(err)
	}
	return nil
}

// past reports whether the WAL file is larger than n bytes: with
// journal_size_limit(n), whether the WAL grew past n since it last
// started over (SQLite cuts the file back to n then).
func (w *walFile) past(n int64) bool {
	info, err := os.Stat(w.path)
	return err == nil && info.Size() > n
}

func (w *walFile) reopenIfUnlinked() error {
	info, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("stat WAL: %w", err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Nlink > 0 {
		return nil
	}
	f, err := os.Open(w.path)
	if err != nil {
		return fmt.Errorf("reopen WAL: %w", err)
	}
	old := w.f
	w.f = f
	if err := old.Close(); err != nil {
		return fmt.Errorf("close replaced WAL: %w", err)
	}
	return nil
}

func (w *walFile) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("close WAL: %w", err)
	}
	return nil
}

// durable makes every commit so far durable: with SynchronousFull it
// fsyncs the WAL; with SynchronousNormal there is nothing to wait for.
func (e *sqliteEngine) durable() error {
	if e.d.opts.Synchronous != SynchronousFull {
		return e.failed()
	}
	return e.wal.sync()
}

// failed is why the store's own files refuse writes (a failed fsync of
// the WAL or the body log), or nil.
func (e *sqliteEngine) failed() error {
	return errors.Join(e.wal.failed(), e.bodies.failed())
}

// answer syncs the WAL and answers every delivery of a batch — with its
// result, or with the sync's error.
//
// The writer calls it itself, after the commit. A separate syncer
// goroutine overlapping the next batch with this sync measured slower
// (4.0–4.3k against 4.9–5.0k deliveries/s at 64 concurrent on two CPUs): every
// hand-over readied a goroutine onto a P about to block in fsync, and
// with the HTTP goroutines queued the hand-overs cost more than the sync.
// (Writing and syncing the bodies on the writer before the statements
// measured about 10% slower than the appender overlapping them with the
// statements; the commit then waits for them, see bodies.go.)
func (d *DB) answer(batch []*intakeReq, results []intakeRes) {
	var err error
	if anyCommitted(results) {
		if err = d.eng.durable(); err != nil {
			d.log.Error("fsync failed: acknowledged nothing of this group commit; intake refused until restart", "err", err)
		}
	}
	for i, r := range batch {
		res := results[i]
		if res.err == nil && err != nil {
			res = intakeRes{err: err}
		}
		r.done <- res
	}
}

func anyCommitted(results []intakeRes) bool {
	for _, r := range results {
		if r.err == nil {
			return true
		}
	}
	return false
}
