package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
)

func TestRecordDeliveryWithoutInstallation(t *testing.T) {
	c := newClock()
	db, path := openTest(t, c)
	d := delivery("no-inst", []byte(`{}`), c.Now())
	d.InstallationID = 0
	j := spec(sha(1), c.Now())
	j.InstallationID = 0
	res := record(t, db, d, j)
	got, ok := claim(t, db, "w", time.Minute)
	if !ok || got.ID != res.JobID || got.InstallationID != 0 {
		t.Fatalf("claim = %+v, %v; want job %d without installation", got, ok, res.JobID)
	}
	raw := rawDB(t, path)
	var inst sql.NullInt64
	if err := raw.QueryRow(`SELECT installation_id FROM jobs WHERE id = ?`, res.JobID).Scan(&inst); err != nil {
		t.Fatal(err)
	}
	if inst.Valid {
		t.Fatalf("installation_id = %d, want NULL", inst.Int64)
	}
}

// TestRecordDeliveryBadItemFailsAlone: a delivery that SQLite refuses
// (here a trigger raises on one id) fails its own call only; the others in
// the same batch commit.
func TestRecordDeliveryBadItemFailsAlone(t *testing.T) {
	for _, maxBatch := range []int{1, store.DefaultMaxBatch} {
		t.Run(fmt.Sprintf("MaxBatch=%d", maxBatch), func(t *testing.T) { testBadItemFailsAlone(t, maxBatch) })
	}
}

func testBadItemFailsAlone(t *testing.T, maxBatch int) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "gilf.db")
	db := openAt(t, path, store.Options{Now: c.Now, MaxBatch: maxBatch})
	raw := rawDB(t, path)
	if _, err := raw.Exec(`CREATE TRIGGER poison BEFORE INSERT ON deliveries WHEN NEW.id = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned delivery'); END`); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("ok-%d", i)
			if i == n/2 {
				id = "poison"
			}
			_, errs[i] = db.RecordDelivery(context.Background(), delivery(id, []byte(`{}`), c.Now()), spec(sha(i), c.Now()))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if (i == n/2) != (err != nil) {
			t.Errorf("delivery %d: err = %v", i, err)
		}
	}
	if got, err := db.CountDeliveries(context.Background()); err != nil || got != n-1 {
		t.Fatalf("deliveries = %d, %v; want %d", got, err, n-1)
	}
	var jobs int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&jobs); err != nil || jobs != n-1 {
		t.Fatalf("jobs = %d, %v; want %d (the poisoned delivery's job rolled back)", jobs, err, n-1)
	}
}

// TestCloseStopsWriter: Close waits for the group-commit goroutine and the
// pools; no goroutine of the store outlives it.
func TestCloseStopsWriter(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newClock()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/g.db", testLogger(t), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	record(t, db, delivery("d", []byte(`{}`), c.Now()), nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
