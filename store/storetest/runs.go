package storetest

import (
	"context"
	"testing"

	"github.com/gilf-review/gilf/store"
	"github.com/google/go-cmp/cmp"
)

func testMarkPostedMerges(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	ctx := context.Background()
	r := Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now()))
	if _, ok, err := db.PostedReview(ctx, r.JobID); err != nil || ok {
		t.Fatalf("before posting: %v %v", ok, err)
	}
	if err := db.MarkPosted(ctx, store.Posted{JobID: r.JobID, CheckRunID: 4}); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkPosted(ctx, store.Posted{JobID: r.JobID, ReviewID: 80, HeadSHA: SHA(1)}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.PostedReview(ctx, r.JobID)
	if err != nil || !ok {
		t.Fatalf("PostedReview: %v %v", ok, err)
	}
	if diff := cmp.Diff(store.Posted{JobID: r.JobID, ReviewID: 80, CheckRunID: 4, HeadSHA: SHA(1), PostedAt: c.Now()}, got); diff != "" {
		t.Fatalf("posted (-want +got):\n%s", diff)
	}
	if err := db.MarkPosted(ctx, store.Posted{JobID: r.JobID}); err == nil {
		t.Fatal("MarkPosted without ids accepted")
	}
}
