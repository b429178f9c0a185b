package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// TestSameDeliveryConcurrently (F21): the same GUID recorded at once
// through two store handles makes one row and one job; both calls succeed,
// exactly one as a duplicate.
func testSameDeliveryConcurrently(t *testing.T, e Engine) {
	c := NewClock()
	path := e.NewLocation(t)
	opts := store.Options{Now: c.Now, BusyTimeout: 60 * time.Second} // see TestConcurrentWritersNeverBusy
	dbs := []*store.DB{e.OpenAt(t, path, opts), e.OpenAt(t, path, opts)}
	for round := range 10 {
		id := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		res := make([]validation.RecordResult, 4)
		errs := make([]error, 4)
		for i := range 4 {
			wg.Go(func() {
				res[i], errs[i] = dbs[i%2].RecordDelivery(context.Background(), Delivery(id, []byte(`{}`), c.Now()), Spec(SHA(round), c.Now()))
			})
		}
		wg.Wait()
		dups := 0
		for i := range 4 {
			if errs[i] != nil {
				t.Fatalf("round %d call %d: %v", round, i, errs[i])
			}
			if res[i].Duplicate {
				dups++
			}
			if res[i].JobID != res[0].JobID {
				t.Fatalf("round %d: job ids differ: %+v", round, res)
			}
		}
		if dups != 3 {
			t.Fatalf("round %d: %d duplicates, want 3", round, dups)
		}
	}
	if rows, err := dbs[1].CountDeliveries(context.Background()); err != nil || rows != 10 {
		t.Fatalf("deliveries = %d, %v", rows, err)
	}
	stats, err := dbs[0].QueueStats(context.Background())
	jobs := 0
	for _, n := range stats.Jobs {
		jobs += n
	}
	if err != nil || jobs != 10 {
		t.Fatalf("jobs = %v, %v", stats.Jobs, err)
	}
}
