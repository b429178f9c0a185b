package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// inboxRecorder keeps the deliveries handed to the store.
type inboxRecorder struct{ got []validation.Delivery }

func (r *inboxRecorder) RecordDelivery(_ context.Context, d validation.Delivery, _ *validation.JobSpec) (validation.RecordResult, error) {
	r.got = append(r.got, d)
	return validation.RecordResult{}, nil
}

// TestRerunOfAnotherStoresCheckRun: a re-run whose check run names
// another store re-runs its head, never this store's job of the same
// number; one naming this store, or no store, re-runs the job it names.
func TestRerunOfAnotherStoresCheckRun(t *testing.T) {
	const ours, theirs = "00000000000000aa", "00000000000000bb"
	rec := &inboxRecorder{}
	in := wakingInbox{db: rec, wake: make(chan struct{}, 1), metrics: newServeMetrics(newTestStore(t, nil)), store: ours}
	for _, st := range []string{theirs, ours, ""} {
		d := validation.Delivery{ID: "d-" + st, Event: "check_run", Action: "rerequested", Status: validation.DeliveryQueued,
			Rerun: &validation.Rerun{Repo: "octo/hello", JobID: 7, Store: st, HeadSHA: "aaaaaaa"}}
		if _, err := in.RecordDelivery(t.Context(), d, nil); err != nil {
			t.Fatal(err)
		}
	}
	if r := rec.got[0].Rerun; r.JobID != 0 || r.HeadSHA != "aaaaaaa" {
		t.Errorf("another store's check run: rerun %+v, want the head's jobs (job 0)", r)
	}
	for _, d := range rec.got[1:] {
		if d.Rerun.JobID != 7 {
			t.Errorf("%s: rerun %+v, want job 7", d.ID, d.Rerun)
		}
	}
}

// TestClaimedJobNamesTheStore: the job a worker claims publishes under
// its store's id.
func TestClaimedJobNamesTheStore(t *testing.T) {
	db := newTestStore(t, nil)
	id, err := db.StoreID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := newServeMetrics(db)
	q := newStoreQueue(db, slog.New(slog.DiscardHandler), m)
	q.store = id
	rec := queueJob(t, wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m, store: id}, "d-1", "aaaaaaa", 11)
	cl, ok, err := q.Claim(t.Context(), "w/0", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if want := validation.MarkerID(id, rec.JobID, 0); cl.Job.PublicationID() != want {
		t.Errorf("PublicationID %q, want %q", cl.Job.PublicationID(), want)
	}
}
