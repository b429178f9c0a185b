package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// testDB is a store and its driver.
type testDB struct {
	*store.DB
	drv  *driver
	path string
}

func (d testDB) lite() *driver { return d.drv }

func openInternal(t testing.TB, opts store.Options) testDB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	db, drv, err := open(context.Background(), path, slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return testDB{db, drv, path}
}

func lone(id string) validation.Delivery {
	return validation.Delivery{ID: id, Event: "ping", Status: validation.DeliveryIgnored, Body: []byte(`{}`), ReceivedAt: time.Now()}
}

// queuedJob records a delivery with a job, so a Claim has work to take.
func queuedJob(t *testing.T, db testDB, id string) {
	t.Helper()
	d := lone(id)
	d.Event, d.Status = "pull_request", validation.DeliveryQueued
	j := &validation.JobSpec{Repo: "o/r", PR: 1, HeadSHA: "0123456789abcdef0123456789abcdef01234567", BaseRef: "main",
		InstallationID: 1, Trigger: "opened", PRUpdatedAt: time.Now()}
	if _, err := db.RecordDelivery(context.Background(), d, j); err != nil {
		t.Fatal(err)
	}
}

// TestFullSyncsBeforeAnswering: with SynchronousFull a delivery is answered
// only after a WAL fsync that followed its commit, and so is every other
// write transaction — with a WAL whose fsync fails, each fails; with
// SynchronousNormal the store never fsyncs the WAL, and both succeed.
func TestFullSyncsBeforeAnswering(t *testing.T) {
	for _, tt := range []struct {
		level store.Synchronous
		sync  bool
	}{
		{store.SynchronousFull, true},
		{store.SynchronousNormal, false},
	} {
		t.Run(string(tt.level), func(t *testing.T) {
			for _, write := range []string{"intake", "claim"} {
				db := openInternal(t, store.Options{Synchronous: tt.level})
				queuedJob(t, db, "d1")
				breakWAL(t, db)
				var err error
				if write == "intake" {
					_, err = db.RecordDelivery(context.Background(), lone("d2"), nil)
				} else {
					_, _, err = db.Claim(context.Background(), "w", time.Minute)
				}
				if synced := errors.Is(err, store.ErrNotDurable); synced != tt.sync || !synced && err != nil {
					t.Fatalf("%s with a WAL whose fsync fails: %v; want an fsync: %v", write, err, tt.sync)
				}
			}
		})
	}
}

// breakWAL closes the descriptor the store fsyncs the WAL with, so the
// next fsync fails, as a disk error would; a new one is in place for
// Close at the end of the test.
func breakWAL(t *testing.T, db testDB) {
	t.Helper()
	w := db.lite().wal
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.f, _ = os.Open(w.path) // for Close
	})
}

// TestFailedWALSyncRefusesWrites: after a failed fsync nothing is
// acknowledged — the delivery in flight, later deliveries and other write
// transactions all fail with store.ErrNotDurable.
func TestFailedWALSyncRefusesWrites(t *testing.T) {
	db := openInternal(t, store.Options{})
	queuedJob(t, db, "ok")
	breakWAL(t, db)
	if _, err := db.RecordDelivery(context.Background(), lone("in-flight"), nil); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("delivery in flight: %v, want store.ErrNotDurable", err)
	}
	if _, err := db.RecordDelivery(context.Background(), lone("later"), nil); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("later delivery: %v, want store.ErrNotDurable", err)
	}
	if _, _, err := db.Claim(context.Background(), "w", time.Minute); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("claim: %v, want store.ErrNotDurable", err)
	}
}

// TestWALReopenedWhenReplaced: when the WAL file was replaced under the
// same name (SQLite deletes it when the last connection closes and makes a
// new one later), the next sync reopens it by name and syncs the new file.
func TestWALReopenedWhenReplaced(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "x.db")
	if err := os.WriteFile(db+"-wal", []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := openWAL(db)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	first := w.f
	if err := os.Remove(db + "-wal"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db+"-wal", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if w.f == first {
		t.Fatal("sync kept the unlinked file")
	}
	got, err := os.ReadFile(w.f.Name())
	if err != nil || string(got) != "new" {
		t.Fatalf("reopened %q, %v", got, err)
	}
	// A file that is still linked is kept.
	kept := w.f
	if err := w.sync(); err != nil || w.f != kept {
		t.Fatalf("linked file replaced (%v)", err)
	}
}

// stream records each lone deliveries of 2 KB (their count) from each of
// 8 goroutines, each pausing 2 ms after every pauseEvery of them (0: never).
func stream(t *testing.T, db testDB, each, pauseEvery int) {
	t.Helper()
	body := make([]byte, 2048)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range each {
				d := lone(fmt.Sprintf("w%d-%d", w, i))
				d.Body = body
				if _, err := db.RecordDelivery(context.Background(), d, nil); err != nil {
					t.Error(err)
					return
				}
				if pauseEvery > 0 && i%pauseEvery == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

// TestBusyCheckpointBytes: under continuous intake, with the
// checkpointer out of the run, the writer checkpoints the WAL itself once
// the WAL is past BusyCheckpointBytes, so it starts over and is cut back
// to that size; with a limit the run's WAL never reaches, the WAL grows
// several times larger.
func TestBusyCheckpointBytes(t *testing.T) {
	run := func(limit int64) (walBytes int64) {
		db := openInternal(t, store.Options{Synchronous: store.SynchronousNormal, CheckpointInterval: time.Hour,
			BusyCheckpointInterval: time.Millisecond, BusyCheckpointBytes: limit})
		stream(t, db, 400, 50) // a steady stream, across many batches
		info, err := os.Stat(db.lite().wal.path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	const small, slack = 64 << 10, 1 << 20 // slack: what a few batches add before the writer looks
	never := run(1 << 40)
	capped := run(small)
	t.Logf("WAL: %d bytes with no reachable limit, %d bytes with %d", never, capped, small)
	if capped > small+slack || capped*3 > never {
		t.Errorf("with a %d-byte limit: WAL %d bytes (%d without); want at most %d bytes and a third",
			small, capped, never, small+slack)
	}
}
