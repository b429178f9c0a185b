package sqlite

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/store"
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
	e := fmt.Errorf("%w: %w", store.ErrNotDurable, err)
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

// Durable makes every commit so far durable: with SynchronousFull it
// fsyncs the WAL; with SynchronousNormal there is nothing to wait for.
// It then checkpoints a WAL grown past BusyCheckpointBytes (looking at
// most every BusyCheckpointInterval): under a steady flow of deliveries
// the checkpointer's own passes never finish (a commit lands while they
// copy), and the WAL would grow without bound. Only past
// BusyCheckpointBytes: below, the checkpointer copies beside the commits
// and no delivery waits (a writer checkpoint every 250 ms made p99 33–37
// ms at 64 concurrent deliveries, one past 256 MiB 23–27 ms). What the
// checkpointer and this buy over SQLite's own autocheckpoint (1,000
// pages, on the commit path), measured with bench/intake.sh -c 64: with
// the autocheckpoint SQLite's p99 was 104 ms, past the floor's 100 ms
// (docs/store.md has the runs).
func (e *driver) Durable() error {
	err := e.wal.failed()
	if e.opts.Synchronous == store.SynchronousFull {
		err = e.wal.sync()
	}
	if now := time.Now().UnixNano(); err == nil && now-e.lastLook.Load() >= int64(e.opts.BusyCheckpointInterval) {
		e.lastLook.Store(now)
		if e.wal.past(e.opts.BusyCheckpointBytes) {
			e.checkpoint(context.Background(), "PASSIVE")
		}
	}
	return err
}

// Failed is why the store refuses writes (a failed fsync of the WAL), or
// nil.
func (e *driver) Failed() error { return e.wal.failed() }
