package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/google/go-cmp/cmp"
)

// A new delivery for the head of a job that ended dead or failed queues
// the job again as a re-run: attempts start over and the run publishes
// under a new id.
func testNewDeliveryRequeuesDeadAndFailedJobs(t *testing.T, e Engine) {
	for _, tt := range []struct {
		name      string
		transient bool
		ended     store.State
		trigger   string
	}{
		{"dead, reopened", true, store.StateDead, "reopened"},
		{"dead, synchronize", true, store.StateDead, "synchronize"},
		{"failed, reopened", false, store.StateFailed, "reopened"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			db := e.OpenAt(t, e.NewLocation(t), store.Options{Now: c.Now, MaxAttempts: 1, Jitter: func() float64 { return 0.5 }})
			ctx := context.Background()
			id := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now())).JobID
			j, ok := Claim(t, db, "w", time.Minute)
			if !ok || j.ID != id {
				t.Fatalf("claim = %+v, %v; want job %d", j, ok, id)
			}
			if r, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("github: 502"), Transient: tt.transient}); err != nil || r.State != tt.ended {
				t.Fatalf("retry = %+v, %v; want %s", r, err, tt.ended)
			}

			c.Advance(time.Minute)
			again := Spec(SHA(1), c.Now())
			again.Trigger = tt.trigger
			d := Delivery("d2", []byte(`{}`), c.Now())
			d.Action = tt.trigger
			res := Record(t, db, d, again)
			if diff := cmp.Diff(validation.RecordResult{JobID: id, JobState: "queued", Rerun: 1}, res); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			want := rerunState{State: store.StateQueued, Attempts: 0, Reruns: 1,
				Reason: store.DefaultRerunReason + ": pull request " + tt.trigger + " after the job ended " + string(tt.ended)}
			if diff := cmp.Diff(want, rerunStateOf(t, db, id)); diff != "" {
				t.Errorf("job (-want +got):\n%s", diff)
			}
			j, ok = Claim(t, db, "w", time.Minute)
			if !ok || j.ID != id || j.Rerun != 1 || j.Attempts != 1 {
				t.Fatalf("claim after re-queue = %+v, %v; want job %d, rerun 1, attempt 1", j, ok, id)
			}
			if got, want := validation.PublicationID(j.ID, j.Rerun), validation.PublicationID(id, 0); got == want {
				t.Errorf("publication id %q unchanged by the re-run", got)
			}
		})
	}
}

// A delivery older than a newer head does not revive a dead job: it is
// superseded, not re-run.
func testStaleDeliveryLeavesDeadJobDead(t *testing.T, e Engine) {
	c := NewClock()
	db := e.OpenAt(t, e.NewLocation(t), store.Options{Now: c.Now, MaxAttempts: 1, Jitter: func() float64 { return 0.5 }})
	ctx := context.Background()
	t0 := c.Now()
	id := Record(t, db, Delivery("d1", []byte(`{}`), t0), Spec(SHA(1), t0)).JobID
	j, _ := Claim(t, db, "w", time.Minute)
	if _, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("github: 502"), Transient: true}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	Record(t, db, Delivery("d2", []byte(`{}`), c.Now()), Spec(SHA(2), c.Now()))
	// A late delivery for the first head, stamped before the second.
	res := Record(t, db, Delivery("d3", []byte(`{}`), c.Now()), Spec(SHA(1), t0))
	if res.JobID != id || res.JobState != string(store.StateDead) || res.Rerun != 0 {
		t.Errorf("record = %+v; want job %d left dead", res, id)
	}
	if st := State(t, db, id); st.State != store.StateDead || st.Reruns != 0 {
		t.Errorf("job = %+v; want dead, no re-run", st)
	}
}
