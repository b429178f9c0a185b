package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

func testRecordDeliveryStoresRawBodyAndJob(t *testing.T, e engine) {
	c := newClock()
	db, _ := e.openTest(t, c)
	body := payload(t)
	d := delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", body, c.Now())
	res := record(t, db, d, spec(d.HeadSHA, c.Now()))
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

func testRecordDeliveryRejectsIncompleteInput(t *testing.T, e engine) {
	c := newClock()
	db, _ := e.openTest(t, c)
	good := delivery("a1", []byte("{}"), c.Now())
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
		{"job without head", func(d validation.Delivery) validation.Delivery { return d }, spec("", c.Now())},
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

func testRecordDeliveryJobLifecycle(t *testing.T, e engine) {
	c := newClock()
	db, _ := e.openTest(t, c)
	body := []byte(`{}`)
	t0 := c.Now()
	ctx := context.Background()

	// opened for head 1.
	r1 := record(t, db, delivery("d1", body, t0), spec(sha(1), t0))
	// Redelivery of d1: duplicate, nothing written.
	dup := record(t, db, delivery("d1", body, t0), spec(sha(1), t0))
	if diff := cmp.Diff(validation.RecordResult{Duplicate: true, JobID: r1.JobID, JobState: "queued"}, dup); diff != "" {
		t.Fatalf("duplicate (-want +got):\n%s", diff)
	}
	// reopened for the same head via another GUID: attaches (W8).
	r2 := record(t, db, delivery("d2", body, t0.Add(time.Second)), spec(sha(1), t0.Add(time.Second)))
	if r2.JobID != r1.JobID || r2.JobCreated {
		t.Fatalf("same head made a second job: %+v vs %+v", r2, r1)
	}
	if st := state(t, db, r1.JobID); st.Triggers != 2 {
		t.Fatalf("triggers = %d, want 2", st.Triggers)
	}
	// head 1 is claimed (running); head 2 arrives and supersedes it.
	j, ok := claim(t, db, "w1", time.Minute)
	if !ok || j.ID != r1.JobID {
		t.Fatalf("claim = %+v, %v", j, ok)
	}
	r3 := record(t, db, delivery("d3", body, t0.Add(2*time.Second)), spec(sha(2), t0.Add(2*time.Second)))
	if !r3.JobCreated || r3.Superseded != 1 {
		t.Fatalf("newer head: %+v, want a new job superseding 1", r3)
	}
	if st := state(t, db, r1.JobID); st.State != store.StateSuperseded {
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
	r4 := record(t, db, delivery("d4", body, t0.Add(3*time.Second)), spec(sha(3), t0.Add(1500*time.Millisecond)))
	if r4.JobState != string(store.StateSuperseded) || r4.Superseded != 0 {
		t.Fatalf("stale head: %+v, want a superseded job that supersedes nothing", r4)
	}
	if st := state(t, db, r3.JobID); st.State != store.StateQueued {
		t.Fatalf("newest head state = %s, want queued", st.State)
	}
	// A force-push back to head 1 (newer update): the superseded job runs again.
	r5 := record(t, db, delivery("d5", body, t0.Add(4*time.Second)), spec(sha(1), t0.Add(4*time.Second)))
	if r5.JobID != r1.JobID || r5.JobState != "queued" || r5.Superseded != 1 {
		t.Fatalf("force-push back: %+v, want job %d queued again superseding head 2", r5, r1.JobID)
	}
	if st := state(t, db, r1.JobID); st.Attempts != 0 || st.Reason != "" {
		t.Fatalf("requeued job keeps attempts %d reason %q", st.Attempts, st.Reason)
	}
	// A base-branch change (edited with changes.base) is a new reviewed state.
	moved := spec(sha(1), t0.Add(5*time.Second))
	moved.BaseRef = "develop"
	r6 := record(t, db, delivery("d6", body, t0.Add(5*time.Second)), moved)
	if !r6.JobCreated || r6.JobID == r1.JobID || r6.Superseded != 1 {
		t.Fatalf("base change: %+v, want a new job superseding the old base", r6)
	}
	if n, err := db.CountDeliveries(ctx); err != nil || n != 6 {
		t.Fatalf("deliveries = %d, %v; want 6", n, err)
	}
}

func TestRecordDeliveryWithoutInstallation(t *testing.T) {
	c := newClock()
	db, path := lite.openTest(t, c)
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

func testRecordDeliveryCancelsInstallation(t *testing.T, e engine) {
	c := newClock()
	db, _ := e.openTest(t, c)
	body := []byte(`{}`)
	mk := func(id, repo string, inst int64) int64 {
		d := delivery(id, body, c.Now())
		j := spec(sha(len(id)), c.Now())
		j.Repo, j.InstallationID = repo, inst
		return record(t, db, d, j).JobID
	}
	a := mk("a", "o/a", 7)
	b := mk("bb", "o/b", 7)
	other := mk("ccc", "o/c", 8)
	running, ok := claim(t, db, "w", time.Minute) // job a, running
	if !ok || running.ID != a {
		t.Fatalf("claim = %+v", running)
	}
	// installation_repositories removed o/b only.
	rm := validation.Delivery{ID: "rm", Event: "installation_repositories", Action: "removed", InstallationID: 7,
		ReceivedAt: c.Now(), Status: validation.DeliveryRecorded, Body: body,
		Cancel: &validation.Cancellation{InstallationID: 7, Repos: []string{"o/b"}, Reason: "repository removed"}}
	if res := record(t, db, rm, nil); res.Cancelled != 1 {
		t.Fatalf("cancelled = %d, want 1", res.Cancelled)
	}
	if st := state(t, db, b); st.State != store.StateCancelled || st.Reason != "repository removed" {
		t.Fatalf("job b: %+v", st)
	}
	if st := state(t, db, a); st.State != store.StateRunning {
		t.Fatalf("job a: %s, want running", st.State)
	}
	// installation deleted: everything of installation 7, running too.
	del := rm
	del.ID, del.Event, del.Action = "del", "installation", "deleted"
	del.Cancel = &validation.Cancellation{InstallationID: 7}
	if res := record(t, db, del, nil); res.Cancelled != 1 {
		t.Fatalf("cancelled = %d, want 1 (job a)", res.Cancelled)
	}
	if st := state(t, db, a); st.State != store.StateCancelled {
		t.Fatalf("job a: %s, want cancelled", st.State)
	}
	if _, err := db.Finish(context.Background(), running.Lease, store.RunRecord{}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("finish after cancel: %v, want ErrLeaseLost", err)
	}
	if st := state(t, db, other); st.State != store.StateQueued {
		t.Fatalf("other installation's job: %s, want queued", st.State)
	}
	// The standalone form.
	if n, err := db.CancelInstallation(context.Background(), validation.Cancellation{InstallationID: 8}); err != nil || n != 1 {
		t.Fatalf("CancelInstallation = %d, %v; want 1", n, err)
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

func testRecordDeliveryAfterCloseFails(t *testing.T, e engine) {
	c := newClock()
	db, err := store.Open(context.Background(), t.TempDir()+"/x.db", testLogger(t), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordDelivery(context.Background(), delivery("x", []byte(`{}`), c.Now()), nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("after close: %v, want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestCloseStopsWriter: Close waits for the group-commit goroutine and the
// pools; no goroutine of the store outlives it.
func TestCloseStopsWriter(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newClock()
	db, err := store.Open(context.Background(), t.TempDir()+"/g.db", testLogger(t), store.Options{Now: c.Now})
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
