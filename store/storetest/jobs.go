package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/google/go-cmp/cmp"
)

func testClaimLeaseAndFencing(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	ctx := context.Background()
	if _, ok := Claim(t, db, "w1", time.Minute); ok {
		t.Fatal("claimed from an empty store")
	}
	r := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now()))
	j, ok := Claim(t, db, "w1", time.Minute)
	if !ok {
		t.Fatal("no job claimed")
	}
	want := store.Job{ID: r.JobID, Repo: "Codertocat/Hello-World", PR: 2, HeadSHA: SHA(1),
		HeadRepo: "Codertocat/Hello-World", BaseRef: "master", InstallationID: 1, DeliveryID: "d1",
		Trigger: "opened", Attempts: 1, CreatedAt: c.Now(),
		Lease: store.Lease{JobID: r.JobID, Owner: "w1", Gen: 1, TTL: time.Minute, Expires: c.Now().Add(time.Minute)}}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Fatalf("claimed job (-want +got):\n%s", diff)
	}
	// Nobody else gets it while the lease lives, up to its last millisecond.
	c.Advance(time.Minute - time.Millisecond)
	if _, ok := Claim(t, db, "w2", time.Minute); ok {
		t.Fatal("a live lease was claimed again")
	}
	// A heartbeat extends it.
	l, err := db.Heartbeat(ctx, j.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Expires.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("heartbeat expiry %v, want %v", l.Expires, c.Now().Add(time.Minute))
	}
	c.Advance(time.Minute - time.Millisecond)
	if _, ok := Claim(t, db, "w2", time.Minute); ok {
		t.Fatal("a heartbeated lease was claimed again")
	}
	// At expiry it is rescued, with a higher fencing token.
	c.Advance(time.Millisecond)
	j2, ok := Claim(t, db, "w2", time.Minute)
	if !ok || j2.ID != j.ID || j2.Lease.Gen != 2 || j2.Attempts != 2 {
		t.Fatalf("rescue = %+v, %v; want job %d gen 2 attempt 2", j2, ok, j.ID)
	}
	if j2.LastError == "" {
		t.Fatal("rescue left no trace in LastError")
	}
	// The old holder is fenced out of everything.
	if _, err := db.Heartbeat(ctx, l); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old heartbeat: %v", err)
	}
	if _, err := db.Finish(ctx, l, store.RunRecord{}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old finish: %v", err)
	}
	if _, err := db.Retry(ctx, l, store.Failure{Err: errors.New("x"), Transient: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old retry: %v", err)
	}
	if _, err := db.Finish(ctx, j2.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}}); err != nil {
		t.Fatalf("new finish: %v", err)
	}
	if st := State(t, db, j.ID); st.State != store.StateDone || st.LeaseOwner != "" {
		t.Fatalf("after finish: %+v", st)
	}
	if _, ok := Claim(t, db, "w3", time.Minute); ok {
		t.Fatal("a done job was claimed")
	}
}

func testRetryBackoffDeadAndFailed(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c) // jitter 0.5, base 30 s, cap 30 min, 5 attempts
	ctx := context.Background()
	r := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now()))
	for attempt := 1; attempt <= store.DefaultMaxAttempts; attempt++ {
		j, ok := Claim(t, db, "w", time.Minute)
		if !ok || j.Attempts != attempt {
			t.Fatalf("attempt %d: claim = %+v, %v", attempt, j, ok)
		}
		cause := fmt.Errorf("fetch tarball: github 502 (attempt %d)", attempt)
		res, err := db.Retry(ctx, j.Lease, store.Failure{Err: cause, Transient: true})
		if err != nil {
			t.Fatal(err)
		}
		if attempt == store.DefaultMaxAttempts {
			if res.State != store.StateDead {
				t.Fatalf("last attempt: state %s, want dead", res.State)
			}
			st := State(t, db, r.JobID)
			if st.State != store.StateDead || st.LastError != cause.Error()+" (attempt 5 of 5)" {
				t.Fatalf("dead job: %+v", st)
			}
			break
		}
		delay := store.Backoff(attempt, store.DefaultRetryBase, store.DefaultRetryCap, 0.5)
		if res.State != store.StateQueued || !res.NextAttemptAt.Equal(c.Now().Add(delay)) {
			t.Fatalf("attempt %d: %+v, want queued at +%v", attempt, res, delay)
		}
		// Not due one millisecond early; due at the time.
		c.Advance(delay - time.Millisecond)
		if _, ok := Claim(t, db, "w", time.Minute); ok {
			t.Fatalf("attempt %d: claimed before its backoff ended", attempt)
		}
		c.Advance(time.Millisecond)
	}
	if _, ok := Claim(t, db, "w", time.Minute); ok {
		t.Fatal("a dead job was claimed")
	}

	t.Run("Retry-After wins over a shorter backoff", func(t *testing.T) {
		r := Record(t, db, Delivery("d2", []byte(`{}`), c.Now()), Spec(SHA(2), c.Now()))
		j, _ := Claim(t, db, "w", time.Minute)
		res, err := db.Retry(ctx, j.Lease, store.Failure{Err: fmt.Errorf("post review: %w", rateLimited{time.Hour}), Transient: true})
		if err != nil || !res.NextAttemptAt.Equal(c.Now().Add(time.Hour)) || j.ID != r.JobID {
			t.Fatalf("retry = %+v, %v; want next attempt in 1h", res, err)
		}
	})
	t.Run("permanent failure ends failed and keeps the run", func(t *testing.T) {
		Record(t, db, Delivery("d3", []byte(`{}`), c.Now()), Spec(SHA(3), c.Now()))
		j, ok := Claim(t, db, "w", time.Minute)
		if !ok {
			t.Fatal("nothing to claim")
		}
		run := &store.RunRecord{Record: validation.Record{Outcome: validation.OutcomeError, Reason: "repository not found"}}
		res, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("github 404"), Run: run})
		if err != nil || res.State != store.StateFailed || res.RunID == 0 {
			t.Fatalf("retry = %+v, %v", res, err)
		}
		if st := State(t, db, j.ID); st.State != store.StateFailed || st.LastError != "github 404" {
			t.Fatalf("failed job: %+v", st)
		}
	})
}

// A job whose worker keeps dying ends dead when its last lease expires.
func testExpiredLastLeaseEndsDead(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	r := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now()))
	for attempt := 1; attempt <= store.DefaultMaxAttempts; attempt++ {
		if j, ok := Claim(t, db, "w", time.Second); !ok || j.Attempts != attempt {
			t.Fatalf("attempt %d: %+v %v", attempt, j, ok)
		}
		c.Advance(time.Second)
	}
	if j, ok := Claim(t, db, "w", time.Second); ok {
		t.Fatalf("claimed after the last attempt: %+v", j)
	}
	st := State(t, db, r.JobID)
	if st.State != store.StateDead || st.LastError == "" {
		t.Fatalf("job: %+v, want dead with a reason", st)
	}
}

func testSupersedeStandalone(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	a := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now()))
	b := Record(t, db, Delivery("d2", []byte(`{}`), c.Now()), Spec(SHA(2), c.Now()))
	// b (same update time) superseded a at intake; supersede b keeping head 3.
	if st := State(t, db, a.JobID); st.State != store.StateSuperseded {
		t.Fatalf("a: %s", st.State)
	}
	n, err := db.Supersede(context.Background(), "Codertocat/Hello-World", 2, SHA(3), "head moved to 3")
	if err != nil || n != 1 {
		t.Fatalf("Supersede = %d, %v; want 1", n, err)
	}
	if st := State(t, db, b.JobID); st.State != store.StateSuperseded || st.Reason != "head moved to 3" {
		t.Fatalf("b: %+v", st)
	}
	if _, err := db.JobState(context.Background(), 999); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
}

// rateLimited is a transient error with a Retry-After.
type rateLimited struct{ after time.Duration }

func (e rateLimited) Error() string             { return "github: 429 rate limited" }
func (e rateLimited) RetryAfter() time.Duration { return e.after }
