package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// testJobAttempts: each attempt at a job keeps its own error, whichever
// statement ended it (a retry, a dead lease rescued, a cancel, a finish),
// and a re-run starts its attempts over beside the old ones.
func testJobAttempts(t *testing.T, e Engine) {
	loc := e.NewLocation(t)
	c := NewClock()
	db := e.OpenAt(t, loc, store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }, MaxAttempts: 3})
	ctx := context.Background()
	id := Record(t, db, Delivery("11111111-0000-0000-0000-000000000001", Payload(t), c.Now()), Spec(SHA(1), c.Now())).JobID

	// Attempt 1: a transient error, retried.
	j, ok := Claim(t, db, "w1", time.Minute)
	if !ok || j.ID != id {
		t.Fatalf("claim: %v %+v", ok, j)
	}
	if _, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("github: 502 Bad Gateway"), Transient: true}); err != nil {
		t.Fatal(err)
	}
	// Attempt 2: the worker dies; its lease is rescued by the next claim.
	c.Advance(time.Hour)
	j, _ = Claim(t, db, "w2", time.Minute)
	c.Advance(2 * time.Minute)
	// Attempt 3: claimed after the rescue; it fails for good.
	j, ok = Claim(t, db, "w3", time.Minute)
	if !ok || j.Attempts != 3 {
		t.Fatalf("third claim: %v %+v", ok, j)
	}
	if _, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("pull request 2 not found"), Transient: false}); err != nil {
		t.Fatal(err)
	}
	// A re-run: attempt 1 again, cancelled while it runs.
	if _, err := db.RetryJob(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	j, _ = Claim(t, db, "w4", time.Minute)
	if state, ok, err := db.CancelQueuedJob(ctx, id, "stopped by hand"); err != nil || !ok || state != "cancelled" {
		t.Fatalf("cancel: %q %v %v", state, ok, err)
	}
	if state, ok, err := db.CancelQueuedJob(ctx, id, ""); err != nil || ok || state != "cancelled" {
		t.Errorf("second cancel: %q %v %v, want cancelled and not cancelled again", state, ok, err)
	}
	if _, _, err := db.CancelQueuedJob(ctx, 999, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel of no job: %v, want ErrNotFound", err)
	}

	d, err := db.JobDetail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		rerun, attempt int
		owner, result  string
		err, reason    string
		ended          bool
	}
	want := []row{
		{1, 1, "w4", "cancelled", "", "stopped by hand", true},
		{0, 3, "w3", "failed", "pull request 2 not found", "", true},
		{0, 2, "w2", "queued", "lease of w2 expired on attempt 2", "", true},
		{0, 1, "w1", "queued", "github: 502 Bad Gateway", "", true},
	}
	if len(d.History) != len(want) {
		t.Fatalf("history: %+v, want %d attempts", d.History, len(want))
	}
	for i, w := range want {
		a := d.History[i]
		got := row{a.Rerun, a.Attempt, a.Owner, a.Result, a.Error, a.Reason, !a.Ended.IsZero()}
		if got != w {
			t.Errorf("attempt %d: %+v, want %+v", i, got, w)
		}
		if a.Started.IsZero() || a.Ended.Before(a.Started) {
			t.Errorf("attempt %d: started %v ended %v", i, a.Started, a.Ended)
		}
	}
	if d.State != "cancelled" || d.Reruns != 1 || len(d.Runs) != 0 {
		t.Errorf("job: %+v", d.JobView)
	}

	// A running attempt has no end; a finished one links its run.
	id2 := Record(t, db, Delivery("11111111-0000-0000-0000-000000000002", Payload(t), c.Now()), Spec(SHA(2), c.Now())).JobID
	j, _ = Claim(t, db, "w5", time.Minute)
	m, err := db.JobAttempts(ctx, []int64{id2})
	if err != nil || len(m[id2]) != 1 || !m[id2][0].Ended.IsZero() || m[id2][0].Result != "" {
		t.Fatalf("running attempt: %v %+v", err, m)
	}
	runID, err := db.Finish(ctx, j.Lease, store.RunRecord{})
	if err != nil {
		t.Fatal(err)
	}
	d, err = db.JobDetail(ctx, id2)
	if err != nil || len(d.History) != 1 || d.History[0].Result != "done" || len(d.Runs) != 1 || d.Runs[0] != runID {
		t.Errorf("finished job: %v %+v", err, d)
	}
	if _, err := db.JobDetail(ctx, 12345); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no such job: %v", err)
	}
}
