package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testRecordDeliveryStoresRawBodyAndJob(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	body := Payload(t)
	d := Delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", body, c.Now())
	res := Record(t, db, d, Spec(d.HeadSHA, c.Now()))
	want := validation.RecordResult{JobID: res.JobID, JobCreated: true, JobState: "queued"}
	if diff := cmp.Diff(want, res); diff != "" || res.JobID == 0 {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
	got, err := db.Delivery(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Body, body) {
		t.Fatalf("stored body differs: %d bytes, want %d", len(got.Body), len(body))
	}
	wantD := store.StoredDelivery{Delivery: d, JobID: res.JobID}
	if diff := cmp.Diff(wantD, got, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Fatalf("stored delivery (-want +got):\n%s", diff)
	}
	if _, err := db.Delivery(context.Background(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing delivery: err = %v, want ErrNotFound", err)
	}
}

func testRecordDeliveryRejectsIncompleteInput(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	good := Delivery("a1", []byte("{}"), c.Now())
	tests := []struct {
		name string
		d    func(validation.Delivery) validation.Delivery
		job  *validation.JobSpec
	}{
		{"empty id", func(d validation.Delivery) validation.Delivery { d.ID = ""; return d }, nil},
		{"empty event", func(d validation.Delivery) validation.Delivery { d.Event = ""; return d }, nil},
		{"empty status", func(d validation.Delivery) validation.Delivery { d.Status = ""; return d }, nil},
		{"nil body", func(d validation.Delivery) validation.Delivery { d.Body = nil; return d }, nil},
		{"zero time", func(d validation.Delivery) validation.Delivery { d.ReceivedAt = time.Time{}; return d }, nil},
		{"job without head", func(d validation.Delivery) validation.Delivery { return d }, Spec("", c.Now())},
		{"cancel without installation", func(d validation.Delivery) validation.Delivery {
			d.Cancel = &validation.Cancellation{}
			return d
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := db.RecordDelivery(context.Background(), tt.d(good), tt.job); err == nil {
				t.Fatal("RecordDelivery accepted incomplete input")
			}
		})
	}
	if n, err := db.CountDeliveries(context.Background()); err != nil || n != 0 {
		t.Fatalf("deliveries = %d, %v; want 0", n, err)
	}
}

func testRecordDeliveryJobLifecycle(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	body := []byte(`{}`)
	t0 := c.Now()
	ctx := context.Background()

	// opened for head 1.
	r1 := Record(t, db, Delivery("d1", body, t0), Spec(SHA(1), t0))
	// Redelivery of d1: duplicate, nothing written.
	dup := Record(t, db, Delivery("d1", body, t0), Spec(SHA(1), t0))
	if diff := cmp.Diff(validation.RecordResult{Duplicate: true, JobID: r1.JobID, JobState: "queued"}, dup); diff != "" {
		t.Fatalf("duplicate (-want +got):\n%s", diff)
	}
	// reopened for the same head via another GUID: attaches (W8).
	r2 := Record(t, db, Delivery("d2", body, t0.Add(time.Second)), Spec(SHA(1), t0.Add(time.Second)))
	if r2.JobID != r1.JobID || r2.JobCreated {
		t.Fatalf("same head made a second job: %+v vs %+v", r2, r1)
	}
	if st := State(t, db, r1.JobID); st.Triggers != 2 {
		t.Fatalf("triggers = %d, want 2", st.Triggers)
	}
	// head 1 is claimed (running); head 2 arrives and supersedes it.
	j, ok := Claim(t, db, "w1", time.Minute)
	if !ok || j.ID != r1.JobID {
		t.Fatalf("claim = %+v, %v", j, ok)
	}
	r3 := Record(t, db, Delivery("d3", body, t0.Add(2*time.Second)), Spec(SHA(2), t0.Add(2*time.Second)))
	if !r3.JobCreated || r3.Superseded != 1 {
		t.Fatalf("newer head: %+v, want a new job superseding 1", r3)
	}
	if st := State(t, db, r1.JobID); st.State != store.StateSuperseded {
		t.Fatalf("old head state = %s, want superseded", st.State)
	}
	// The running worker learns it: heartbeat and finish are fenced out.
	if _, err := db.Heartbeat(ctx, j.Lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat of superseded job: %v, want ErrLeaseLost", err)
	}
	if _, err := db.Finish(ctx, j.Lease, store.RunRecord{}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("finish of superseded job: %v, want ErrLeaseLost", err)
	}
	// A late synchronize for head 3 that GitHub sent before head 2 (W9):
	// recorded, but born superseded, and head 2 stays queued.
	r4 := Record(t, db, Delivery("d4", body, t0.Add(3*time.Second)), Spec(SHA(3), t0.Add(1500*time.Millisecond)))
	if r4.JobState != string(store.StateSuperseded) || r4.Superseded != 0 {
		t.Fatalf("stale head: %+v, want a superseded job that supersedes nothing", r4)
	}
	if st := State(t, db, r3.JobID); st.State != store.StateQueued {
		t.Fatalf("newest head state = %s, want queued", st.State)
	}
	// A force-push back to head 1 (newer update): the superseded job runs again.
	r5 := Record(t, db, Delivery("d5", body, t0.Add(4*time.Second)), Spec(SHA(1), t0.Add(4*time.Second)))
	if r5.JobID != r1.JobID || r5.JobState != "queued" || r5.Superseded != 1 {
		t.Fatalf("force-push back: %+v, want job %d queued again superseding head 2", r5, r1.JobID)
	}
	if st := State(t, db, r1.JobID); st.Attempts != 0 || st.Reason != "" {
		t.Fatalf("requeued job keeps attempts %d reason %q", st.Attempts, st.Reason)
	}
	// A base-branch change (edited with changes.base) is a new reviewed state.
	moved := Spec(SHA(1), t0.Add(5*time.Second))
	moved.BaseRef = "develop"
	r6 := Record(t, db, Delivery("d6", body, t0.Add(5*time.Second)), moved)
	if !r6.JobCreated || r6.JobID == r1.JobID || r6.Superseded != 1 {
		t.Fatalf("base change: %+v, want a new job superseding the old base", r6)
	}
	if n, err := db.CountDeliveries(ctx); err != nil || n != 6 {
		t.Fatalf("deliveries = %d, %v; want 6", n, err)
	}
}

func testRecordDeliveryCancelsInstallation(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	body := []byte(`{}`)
	mk := func(id, repo string, inst int64) int64 {
		d := Delivery(id, body, c.Now())
		j := Spec(SHA(len(id)), c.Now())
		j.Repo, j.InstallationID = repo, inst
		return Record(t, db, d, j).JobID
	}
	a := mk("a", "o/a", 7)
	b := mk("bb", "o/b", 7)
	other := mk("ccc", "o/c", 8)
	running, ok := Claim(t, db, "w", time.Minute) // job a, running
	if !ok || running.ID != a {
		t.Fatalf("claim = %+v", running)
	}
	// installation_repositories removed o/b only.
	rm := validation.Delivery{ID: "rm", Event: "installation_repositories", Action: "removed", InstallationID: 7,
		ReceivedAt: c.Now(), Status: validation.DeliveryRecorded, Body: body,
		Cancel: &validation.Cancellation{InstallationID: 7, Repos: []string{"o/b"}, Reason: "repository removed"}}
	if res := Record(t, db, rm, nil); res.Cancelled != 1 {
		t.Fatalf("cancelled = %d, want 1", res.Cancelled)
	}
	if st := State(t, db, b); st.State != store.StateCancelled || st.Reason != "repository removed" {
		t.Fatalf("job b: %+v", st)
	}
	if st := State(t, db, a); st.State != store.StateRunning {
		t.Fatalf("job a: %s, want running", st.State)
	}
	// installation deleted: everything of installation 7, running too.
	del := rm
	del.ID, del.Event, del.Action = "del", "installation", "deleted"
	del.Cancel = &validation.Cancellation{InstallationID: 7}
	if res := Record(t, db, del, nil); res.Cancelled != 1 {
		t.Fatalf("cancelled = %d, want 1 (job a)", res.Cancelled)
	}
	if st := State(t, db, a); st.State != store.StateCancelled {
		t.Fatalf("job a: %s, want cancelled", st.State)
	}
	if _, err := db.Finish(context.Background(), running.Lease, store.RunRecord{}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("finish after cancel: %v, want ErrLeaseLost", err)
	}
	if st := State(t, db, other); st.State != store.StateQueued {
		t.Fatalf("other installation's job: %s, want queued", st.State)
	}
	// The standalone form.
	if n, err := db.CancelInstallation(context.Background(), validation.Cancellation{InstallationID: 8}); err != nil || n != 1 {
		t.Fatalf("CancelInstallation = %d, %v; want 1", n, err)
	}
}

func testRecordDeliveryAfterCloseFails(t *testing.T, e Engine) {
	c := NewClock()
	db, err := e.Open(context.Background(), e.NewLocation(t), Logger(t), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordDelivery(context.Background(), Delivery("x", []byte(`{}`), c.Now()), nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("after close: %v, want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
