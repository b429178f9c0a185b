package sqlite

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gilf-review/gilf/store"
)

// TestReadyPoisoned: after a failed WAL fsync, Ready reports
// store.ErrNotDurable at once, without waiting for a cached probe to expire.
func TestReadyPoisoned(t *testing.T) {
	db := openInternal(t, store.Options{})
	ctx := context.Background()
	if err := db.Ready(ctx); err != nil {
		t.Fatalf("fresh store: %v", err)
	}
	// A closed descriptor makes the next fsync fail, as a disk error would.
	db.lite().wal.mu.Lock()
	if err := db.lite().wal.f.Close(); err != nil {
		t.Fatal(err)
	}
	db.lite().wal.mu.Unlock()
	if _, err := db.RecordDelivery(ctx, lone("in-flight"), nil); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("delivery: %v, want store.ErrNotDurable", err)
	}
	if err := db.Ready(ctx); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("Ready after a failed fsync: %v, want store.ErrNotDurable", err)
	}
	db.lite().wal.mu.Lock()
	db.lite().wal.f, _ = os.Open(db.lite().wal.path) // for Close
	db.lite().wal.mu.Unlock()
}
