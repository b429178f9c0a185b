package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// TestBackupWhileWriting takes a backup through one handle while another
// (serve) keeps recording deliveries: the backup opens as a store, holds
// every delivery acknowledged before it started with its body, and every
// delivery it holds reads back whole.
func TestBackupWhileWriting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "gilf.db")
	serve := openAt(t, path, store.Options{})
	ops := openAt(t, path, store.Options{})
	body := func(i int) string { return fmt.Sprintf(`{"n":%d,"pad":"%0200d"}`, i, i) }

	var mu sync.Mutex
	acked := 0 // deliveries 0..acked-1 are acknowledged
	stop, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := serve.RecordDelivery(ctx, delivery(fmt.Sprintf("d%d", i), []byte(body(i)), time.Now()), nil); err != nil {
				t.Errorf("record d%d: %v", i, err)
				return
			}
			mu.Lock()
			acked = i + 1
			mu.Unlock()
			if i == 49 {
				close(started)
			}
		}
	}()
	// Writes are under way before the backup starts.
	<-started
	mu.Lock()
	before := acked
	mu.Unlock()
	dest := filepath.Join(t.TempDir(), "gilf.db")
	res, err := ops.Backup(ctx, dest)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	mu.Lock()
	after := acked
	mu.Unlock()
	close(stop)
	wg.Wait()
	if res.Deliveries < before || res.Path != dest {
		t.Errorf("backup = %+v; want at least %d deliveries at %s", res, before, dest)
	}
	t.Logf("backup of %d deliveries (%d acknowledged before it, %d after)", res.Deliveries, before, after)

	cp := openAt(t, dest, store.Options{})
	n, err := cp.CountDeliveries(ctx)
	if err != nil || n != res.Deliveries {
		t.Fatalf("backup holds %d deliveries, %v; want %d", n, err, res.Deliveries)
	}
	for i := 0; i < n; i++ {
		d, err := cp.Delivery(ctx, fmt.Sprintf("d%d", i))
		if err != nil {
			t.Fatalf("backup's delivery d%d (of %d): %v", i, n, err)
		}
		if string(d.Body) != body(i) {
			t.Fatalf("backup's delivery d%d body = %q", i, d.Body)
		}
	}
	if _, err := ops.Backup(ctx, dest); err == nil {
		t.Error("a backup over an existing one: no error")
	}
}

// A backup of a pruned store says "pruned" for the pruned bodies.
func TestBackupAfterPrune(t *testing.T) {
	c := newClock()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gilf.db")
	recordAlone(t, path, c, "old", c.Now().Add(-48*time.Hour))
	db := openAt(t, path, store.Options{Now: c.Now})
	record(t, db, delivery("new", []byte(`{"new":1}`), c.Now()), nil)
	if _, err := db.Prune(ctx, c.Now().Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "gilf.db")
	if _, err := db.Backup(ctx, dest); err != nil {
		t.Fatal(err)
	}
	cp := openAt(t, dest, store.Options{})
	if d, err := cp.Delivery(ctx, "old"); err != nil || d.BodyPrunedAt.IsZero() {
		t.Errorf("old in the backup = %+v, %v; want pruned", d, err)
	}
	if d, err := cp.Delivery(ctx, "new"); err != nil || string(d.Body) != `{"new":1}` {
		t.Errorf("new in the backup = %+v, %v", d, err)
	}
}
