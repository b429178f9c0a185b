package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
)

// TestReadyProbeCached: Ready takes the write lock to answer, reuses its
// answer for ReadyInterval — not a moment longer — and reports a store
// another connection keeps locked, then ErrClosed after Close.
func TestReadyProbeCached(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "gilf.db")
	db, err := sqlite.Open(context.Background(), path, testLogger(t), store.Options{Now: c.Now, BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // Close is idempotent; the test closes it itself
	ctx := context.Background()
	if err := db.Ready(ctx); err != nil {
		t.Fatalf("fresh store: %v", err)
	}
	release := holdExclusive(t, path)
	c.Advance(store.ReadyInterval - time.Millisecond)
	if err := db.Ready(ctx); err != nil {
		t.Fatalf("inside ReadyInterval: %v, want the cached answer", err)
	}
	c.Advance(time.Millisecond)
	if err := db.Ready(ctx); err == nil {
		t.Fatal("a store locked by another connection is ready")
	}
	release()
	if err := db.Ready(ctx); err == nil {
		t.Fatal("the failed probe was not cached")
	}
	c.Advance(store.ReadyInterval)
	if err := db.Ready(ctx); err != nil {
		t.Fatalf("after the lock went: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ready(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("closed store: %v, want ErrClosed", err)
	}
}

// TestReadyProbeTimeout: a probe whose caller's context ends returns at
// once with the context's error.
func TestReadyProbeTimeout(t *testing.T) {
	c := newClock()
	db, path := openTest(t, c)
	holdExclusive(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := db.Ready(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ready with a locked store and a 50ms context: %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > store.ReadyProbeTimeout {
		t.Fatalf("Ready took %v, want about 50ms", took)
	}
}
