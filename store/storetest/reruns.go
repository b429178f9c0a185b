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

// rerunDelivery is a check_run or check_suite rerequested delivery.
func rerunDelivery(id string, at time.Time, r validation.Rerun) validation.Delivery {
	return validation.Delivery{
		ID: id, Event: "check_run", Action: "rerequested", InstallationID: 1, Repo: r.Repo, HeadSHA: r.HeadSHA,
		ReceivedAt: at, Status: validation.DeliveryQueued, Body: []byte(`{}`), Rerun: &r,
	}
}

// finish claims the next job, which must be id, and ends it done with a
// run of the given outcome.
func finish(t *testing.T, db *store.DB, id int64, outcome validation.Outcome) {
	t.Helper()
	j, ok := Claim(t, db, "w", time.Minute)
	if !ok || j.ID != id {
		t.Fatalf("claim = %+v, %v; want job %d", j, ok, id)
	}
	if _, err := db.Finish(context.Background(), j.Lease, store.RunRecord{Record: validation.Record{Outcome: outcome}}); err != nil {
		t.Fatalf("finish job %d: %v", id, err)
	}
}

// rerunState is the part of a job's state a re-run changes.
type rerunState struct {
	State    store.State
	Reason   string
	Attempts int
	Error    string
	Reruns   int
}

func rerunStateOf(t *testing.T, db *store.DB, id int64) rerunState {
	t.Helper()
	st := State(t, db, id)
	return rerunState{st.State, st.Reason, st.Attempts, st.LastError, st.Reruns}
}

func testRerunDoneAndDeadJobs(t *testing.T, e Engine) {
	c := NewClock()
	path := e.NewLocation(t)
	// One attempt: a transient failure ends the job dead.
	db := e.OpenAt(t, path, store.Options{Now: c.Now, MaxAttempts: 1, Jitter: func() float64 { return 0.5 }})
	ctx := context.Background()
	const repo = "Codertocat/Hello-World"

	done := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now())).JobID
	finish(t, db, done, validation.OutcomePassed)
	other := Spec(SHA(2), c.Now())
	other.PR = 3
	dead := Record(t, db, Delivery("d2", []byte(`{}`), c.Now()), other).JobID
	j, ok := Claim(t, db, "w", time.Minute)
	if !ok || j.ID != dead {
		t.Fatalf("claim = %+v, %v", j, ok)
	}
	if r, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("github: 502"), Transient: true}); err != nil || r.State != store.StateDead {
		t.Fatalf("retry = %+v, %v; want dead", r, err)
	}

	c.Advance(time.Minute)
	for _, tt := range []struct {
		id   string
		job  int64
		head string
	}{{"r1", done, SHA(1)}, {"r2", dead, ""}} {
		res := Record(t, db, rerunDelivery(tt.id, c.Now(), validation.Rerun{Repo: repo, InstallationID: 1, JobID: tt.job, HeadSHA: tt.head}), nil)
		if diff := cmp.Diff(validation.RecordResult{JobID: tt.job, JobState: "queued", Rerun: 1}, res); diff != "" {
			t.Fatalf("re-run of job %d (-want +got):\n%s", tt.job, diff)
		}
		want := rerunState{store.StateQueued, store.DefaultRerunReason, 0, "", 1}
		if diff := cmp.Diff(want, rerunStateOf(t, db, tt.job)); diff != "" {
			t.Fatalf("job %d after re-run (-want +got):\n%s", tt.job, diff)
		}
		if st := State(t, db, tt.job); !st.NextAttemptAt.Equal(c.Now()) {
			t.Fatalf("job %d next attempt %v, want now", tt.job, st.NextAttemptAt)
		}
	}
	// Both run again, and say they are re-runs.
	for _, id := range []int64{done, dead} {
		j, ok := Claim(t, db, "w", time.Minute)
		if !ok || j.ID != id || j.Rerun != 1 || j.Attempts != 1 || j.LastError != "" {
			t.Fatalf("claim = %+v, %v; want job %d as re-run 1, attempt 1", j, ok, id)
		}
		if id == dead {
			// Running: a re-run leaves it as it is.
			res := Record(t, db, rerunDelivery("r3", c.Now(), validation.Rerun{Repo: repo, JobID: dead}), nil)
			if diff := cmp.Diff(validation.RecordResult{JobID: dead, JobState: "running"}, res); diff != "" {
				t.Fatalf("re-run of a running job (-want +got):\n%s", diff)
			}
			continue
		}
		if _, err := db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}}); err != nil {
			t.Fatal(err)
		}
	}
	// The same delivery again does nothing twice, though the job could run again.
	dup := Record(t, db, rerunDelivery("r1", c.Now(), validation.Rerun{Repo: repo, JobID: done}), nil)
	if !dup.Duplicate || dup.Rerun != 0 {
		t.Fatalf("redelivered re-run: %+v, want a duplicate", dup)
	}
	if st := rerunStateOf(t, db, done); st.State != store.StateDone || st.Reruns != 1 {
		t.Fatalf("job after the redelivered re-run: %+v, want done with 1 re-run", st)
	}
	// Another repository's id names nothing; a wrong head names nothing.
	for i, r := range []validation.Rerun{{Repo: "someone/else", JobID: done}, {Repo: repo, JobID: done, HeadSHA: SHA(9)}, {Repo: repo, JobID: 999}} {
		res := Record(t, db, rerunDelivery("x"+string(rune('a'+i)), c.Now(), r), nil)
		if diff := cmp.Diff(validation.RecordResult{}, res); diff != "" {
			t.Fatalf("re-run %+v (-want +got):\n%s", r, diff)
		}
	}
	if st := rerunStateOf(t, db, done); st.State != store.StateDone || st.Reruns != 1 {
		t.Fatalf("job after foreign re-runs: %+v", st)
	}
	// A second re-run counts on.
	Record(t, db, rerunDelivery("r4", c.Now(), validation.Rerun{Repo: repo, JobID: done}), nil)
	if j, ok := Claim(t, db, "w", time.Minute); !ok || j.ID != done || j.Rerun != 2 {
		t.Fatalf("claim = %+v, %v; want job %d as re-run 2", j, ok, done)
	}
}

func testRerunOfOlderHeadIsNotRevived(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	const repo = "Codertocat/Hello-World"
	t0 := c.Now()
	old := Record(t, db, Delivery("d1", []byte(`{}`), t0), Spec(SHA(1), t0)).JobID
	finish(t, db, old, validation.OutcomeFailed)
	newer := Record(t, db, Delivery("d2", []byte(`{}`), t0.Add(time.Minute)), Spec(SHA(2), t0.Add(time.Minute))).JobID
	for i, r := range []validation.Rerun{{Repo: repo, JobID: old}, {Repo: repo, HeadSHA: SHA(1)}} {
		res := Record(t, db, rerunDelivery(string(rune('a'+i)), c.Now(), r), nil)
		if res.Rerun != 0 || res.JobState == "queued" {
			t.Fatalf("re-run %+v of an older head: %+v, want nothing re-queued", r, res)
		}
		if st := rerunStateOf(t, db, old); st.State != store.StateDone || st.Reruns != 0 {
			t.Fatalf("older head after re-run: %+v", st)
		}
	}
	if j, ok := Claim(t, db, "w", time.Minute); !ok || j.ID != newer {
		t.Fatalf("claim = %+v, %v; want the newer head's job %d", j, ok, newer)
	}
}

func testRerunByHeadOverTwoPullRequests(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	const repo = "Codertocat/Hello-World"
	t0 := c.Now()
	mk := func(id string, pr int, base string, at time.Time) int64 {
		j := Spec(SHA(7), at)
		j.PR, j.BaseRef = pr, base
		r := Record(t, db, Delivery(id, []byte(`{}`), at), j)
		finish(t, db, r.JobID, validation.OutcomePassed)
		return r.JobID
	}
	oldBase := mk("a", 2, "master", t0)               // PR 2 moved to develop later: not revived
	pr2 := mk("b", 2, "develop", t0.Add(time.Second)) // PR 2's newest job at the head
	pr3 := mk("c", 3, "master", t0)                   // another PR at the same head
	elsewhere := Spec(SHA(7), t0)
	elsewhere.Repo = "someone/else"
	foreign := Record(t, db, Delivery("d", []byte(`{}`), t0), elsewhere).JobID
	finish(t, db, foreign, validation.OutcomePassed)

	res := Record(t, db, rerunDelivery("r", c.Now(), validation.Rerun{Repo: repo, InstallationID: 1, HeadSHA: SHA(7)}), nil)
	if diff := cmp.Diff(validation.RecordResult{JobID: min(pr2, pr3), JobState: "queued", Rerun: 2}, res); diff != "" {
		t.Fatalf("re-run by head (-want +got):\n%s", diff)
	}
	for id, want := range map[int64]store.State{oldBase: store.StateDone, pr2: store.StateQueued, pr3: store.StateQueued, foreign: store.StateDone} {
		if st := State(t, db, id); st.State != want {
			t.Fatalf("job %d: %s, want %s", id, st.State, want)
		}
	}
	// Again while they are queued: nothing more.
	if res := Record(t, db, rerunDelivery("r2", c.Now(), validation.Rerun{Repo: repo, HeadSHA: SHA(7)}), nil); res.Rerun != 0 {
		t.Fatalf("re-run of queued jobs: %+v", res)
	}
	if st := State(t, db, pr2); st.Reruns != 1 {
		t.Fatalf("job %d re-runs = %d, want 1", pr2, st.Reruns)
	}
}

// TestLabelAfterSkippedRunRequeues: a label change re-evaluates the
// execution filters of a job whose last run was skipped, and of no other.
func testLabelAfterSkippedRunRequeues(t *testing.T, e Engine) {
	for _, tt := range []struct {
		name    string
		outcome validation.Outcome
		trigger string
		requeue bool
	}{
		{"labeled after skipped", validation.OutcomeSkipped, "labeled", true},
		{"unlabeled after skipped", validation.OutcomeSkipped, "unlabeled", true},
		{"ready for review after skipped", validation.OutcomeSkipped, "ready_for_review", true},
		{"labeled after passed", validation.OutcomePassed, "labeled", false},
		{"labeled after failed", validation.OutcomeFailed, "labeled", false},
		{"reopened after skipped", validation.OutcomeSkipped, "reopened", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			db, _ := e.openTest(t, c)
			t0 := c.Now()
			id := Record(t, db, Delivery("d1", []byte(`{}`), t0), Spec(SHA(1), t0)).JobID
			finish(t, db, id, tt.outcome)
			label := Spec(SHA(1), t0.Add(time.Minute))
			label.Trigger = tt.trigger
			res := Record(t, db, Delivery("d2", []byte(`{}`), t0.Add(time.Minute)), label)
			want := validation.RecordResult{JobID: id, JobState: "done"}
			wantState := rerunState{State: store.StateDone, Attempts: 1}
			if tt.requeue {
				want.JobState, want.Rerun = "queued", 1
				wantState = rerunState{store.StateQueued, store.DefaultRerunReason + ": pull request " + tt.trigger + " after a skipped run", 0, "", 1}
			}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Fatalf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantState, rerunStateOf(t, db, id)); diff != "" {
				t.Fatalf("job (-want +got):\n%s", diff)
			}
			j, ok := Claim(t, db, "w", time.Minute)
			if ok != tt.requeue || ok && j.Rerun != 1 {
				t.Fatalf("claim = %+v, %v; want a re-run: %v", j, ok, tt.requeue)
			}
		})
	}
	t.Run("running job is left as is", func(t *testing.T) {
		c := NewClock()
		db, _ := e.openTest(t, c)
		id := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now())).JobID
		if _, ok := Claim(t, db, "w", time.Minute); !ok {
			t.Fatal("no claim")
		}
		label := Spec(SHA(1), c.Now().Add(time.Minute))
		label.Trigger = "labeled"
		res := Record(t, db, Delivery("d2", []byte(`{}`), c.Now()), label)
		if res.JobID != id || res.JobState != "running" || res.Rerun != 0 {
			t.Fatalf("labeled while running: %+v", res)
		}
	})
}
