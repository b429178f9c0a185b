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

func testListJobs(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	a := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now())).JobID
	c.Advance(time.Second)
	other := Spec(SHA(2), c.Now())
	other.Repo, other.PR = "octo/other", 7
	b := Record(t, db, Delivery("d2", []byte(`{}`), c.Now()), other).JobID
	c.Advance(time.Second)
	finish(t, db, a, validation.OutcomePassed) // a is now the most recently updated

	ids := func(f store.JobFilter) []int64 {
		t.Helper()
		js, err := db.ListJobs(context.Background(), f)
		if err != nil {
			t.Fatalf("ListJobs(%+v): %v", f, err)
		}
		out := []int64{}
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		f    store.JobFilter
		want []int64
	}{
		{"all, newest first", store.JobFilter{}, []int64{a, b}},
		{"state", store.JobFilter{State: store.StateQueued}, []int64{b}},
		{"repo", store.JobFilter{Repo: "octo/other"}, []int64{b}},
		{"limit", store.JobFilter{Limit: 1}, []int64{a}},
		{"none", store.JobFilter{State: store.StateDead}, []int64{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ids(tt.f)); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
	js, err := db.ListJobs(context.Background(), store.JobFilter{State: store.StateDone})
	if err != nil || len(js) != 1 {
		t.Fatalf("ListJobs = %+v, %v", js, err)
	}
	if j := js[0]; j.Repo != "Codertocat/Hello-World" || j.PR != 2 || j.HeadSHA != SHA(1) || j.Attempts != 1 || !j.UpdatedAt.Equal(c.Now()) {
		t.Errorf("job = %+v", j)
	}
	if _, err := db.ListJobs(context.Background(), store.JobFilter{State: "zombie"}); err == nil {
		t.Error("ListJobs with an unknown state: no error")
	}
}

func testRetryJob(t *testing.T, e Engine) {
	c := NewClock()
	db := e.OpenAt(t, e.NewLocation(t), store.Options{Now: c.Now, MaxAttempts: 1, Jitter: func() float64 { return 0.5 }})
	ctx := context.Background()
	id := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now())).JobID

	if _, err := db.RetryJob(ctx, id, ""); !errors.Is(err, store.ErrWrongState) {
		t.Errorf("retry of a queued job = %v; want ErrWrongState", err)
	}
	if _, err := db.RetryJob(ctx, 999, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retry of an unknown job = %v; want ErrNotFound", err)
	}
	j, _ := Claim(t, db, "w", time.Minute)
	if _, err := db.RetryJob(ctx, id, ""); !errors.Is(err, store.ErrWrongState) {
		t.Errorf("retry of a running job = %v; want ErrWrongState", err)
	}
	if _, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("github: 502"), Transient: true}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	st, err := db.RetryJob(ctx, id, "")
	if err != nil {
		t.Fatalf("retry of a dead job: %v", err)
	}
	want := rerunState{State: store.StateQueued, Reason: store.DefaultRerunReason, Reruns: 1}
	if diff := cmp.Diff(want, rerunState{st.State, st.Reason, st.Attempts, st.LastError, st.Reruns}); diff != "" {
		t.Errorf("retried job (-want +got):\n%s", diff)
	}
	if j, ok := Claim(t, db, "w", time.Minute); !ok || j.ID != id || j.Rerun != 1 {
		t.Fatalf("claim = %+v, %v; want the re-run", j, ok)
	}

	// A job whose pull request moved on to a newer head is not revived.
	c.Advance(time.Minute)
	Record(t, db, Delivery("d2", []byte(`{}`), c.Now()), Spec(SHA(2), c.Now()))
	if st := State(t, db, id); st.State != store.StateSuperseded {
		t.Fatalf("old head = %s; want superseded", st.State)
	}
	if _, err := db.RetryJob(ctx, id, ""); !errors.Is(err, store.ErrNotNewest) {
		t.Errorf("retry of an old head = %v; want ErrNotNewest", err)
	}
}

// An operator cancels through a second handle on the file, as `gilf jobs
// cancel` does while `gilf serve` runs: the worker's lease is gone at its
// next heartbeat, and its result is not kept.
func testCancelJobFromAnotherHandle(t *testing.T, e Engine) {
	c := NewClock()
	path := e.NewLocation(t)
	serve := e.OpenAt(t, path, store.Options{Now: c.Now})
	ops := e.OpenAt(t, path, store.Options{Now: c.Now})
	ctx := context.Background()
	running := Record(t, serve, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now())).JobID
	j, ok := Claim(t, serve, "w", time.Minute)
	if !ok || j.ID != running {
		t.Fatalf("claim = %+v, %v", j, ok)
	}
	other := Spec(SHA(2), c.Now())
	other.PR = 3
	queued := Record(t, serve, Delivery("d2", []byte(`{}`), c.Now()), other).JobID

	for _, id := range []int64{running, queued} {
		st, err := ops.CancelJob(ctx, id, "")
		if err != nil {
			t.Fatalf("cancel job %d: %v", id, err)
		}
		if st.State != store.StateCancelled || st.Reason != "cancelled by an operator" || st.LeaseOwner != "" {
			t.Errorf("cancelled job %d = %+v", id, st)
		}
	}
	if _, err := serve.Heartbeat(ctx, j.Lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("heartbeat after cancel = %v; want ErrLeaseLost", err)
	}
	if _, err := serve.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("finish after cancel = %v; want ErrLeaseLost", err)
	}
	if _, ok := Claim(t, serve, "w", time.Minute); ok {
		t.Error("a cancelled job was claimed")
	}
	if _, err := ops.CancelJob(ctx, running, ""); !errors.Is(err, store.ErrWrongState) {
		t.Errorf("second cancel = %v; want ErrWrongState", err)
	}
	if _, err := ops.CancelJob(ctx, 999, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel of an unknown job = %v; want ErrNotFound", err)
	}
	// And an operator's retry brings it back.
	if st, err := ops.RetryJob(ctx, running, ""); err != nil || st.State != store.StateQueued || st.Reruns != 1 {
		t.Errorf("retry of the cancelled job = %+v, %v", st, err)
	}
}
