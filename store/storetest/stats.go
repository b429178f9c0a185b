package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/google/go-cmp/cmp"
)

// TestQueueStats: jobs are counted in every state, zero included, and the
// oldest due job is the longest-waiting queued one that is due — not a
// job waiting out its retry backoff.
func testQueueStats(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	ctx := context.Background()
	stats := func() store.QueueStats {
		t.Helper()
		s, err := db.QueueStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	counts := func(queued, running int) map[store.State]int {
		m := map[store.State]int{}
		for _, s := range store.States {
			m[s] = 0
		}
		m[store.StateQueued], m[store.StateRunning] = queued, running
		return m
	}
	if got := stats(); !got.OldestDue.IsZero() || cmp.Diff(counts(0, 0), got.Jobs) != "" {
		t.Fatalf("empty store: %+v", got)
	}
	var at []time.Time
	for i := range 3 {
		at = append(at, c.Now())
		js := Spec(SHA(i), c.Now())
		js.PR = 10 + i // three pull requests: one head does not supersede another
		Record(t, db, Delivery("d"+string(rune('a'+i)), []byte(`{}`), c.Now()), js)
		c.Advance(10 * time.Second)
	}
	got := stats()
	if diff := cmp.Diff(counts(3, 0), got.Jobs); diff != "" || !got.OldestDue.Equal(at[0]) {
		t.Fatalf("three queued: oldest due %v, want %v; jobs (-want +got):\n%s", got.OldestDue, at[0], diff)
	}
	j, ok := Claim(t, db, "w", time.Minute)
	if !ok {
		t.Fatal("nothing to claim")
	}
	got = stats()
	if diff := cmp.Diff(counts(2, 1), got.Jobs); diff != "" || !got.OldestDue.Equal(at[1]) {
		t.Fatalf("one claimed: oldest due %v, want %v; jobs (-want +got):\n%s", got.OldestDue, at[1], diff)
	}
	if _, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("502"), Transient: true}); err != nil {
		t.Fatal(err)
	}
	got = stats()
	if diff := cmp.Diff(counts(3, 0), got.Jobs); diff != "" || !got.OldestDue.Equal(at[1]) {
		t.Fatalf("one backing off: oldest due %v, want %v (the backing-off job is not due); jobs (-want +got):\n%s", got.OldestDue, at[1], diff)
	}
}
