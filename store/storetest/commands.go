package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// CommandDelivery is an issue_comment command on Codertocat/Hello-World#2
// as intake records it: queued, no job.
func CommandDelivery(id string, at time.Time) validation.Delivery {
	return validation.Delivery{ID: id, Event: "issue_comment", Action: "created", InstallationID: 1,
		Repo: "Codertocat/Hello-World", PR: 2, ReceivedAt: at, Status: validation.DeliveryQueued,
		Reason: "command rerun by @a (comment 1)", Body: []byte(`{"comment":{"body":"/gilf rerun"}}`)}
}

func testCommandDeliveries(t *testing.T, e Engine) {
	ctx := context.Background()
	c := NewClock()
	db, _ := e.openTest(t, c)
	t0 := c.Now()
	Record(t, db, CommandDelivery("c1", t0), nil)
	Record(t, db, CommandDelivery("c2", t0.Add(time.Second)), nil)
	ordinary := CommandDelivery("c3", t0)
	ordinary.Status, ordinary.Reason = validation.DeliveryIgnored, "a comment that is not a gilf command"
	Record(t, db, ordinary, nil)
	Record(t, db, Delivery("p1", Payload(t), t0), Spec(SHA(1), t0))

	since, stale := t0.Add(-time.Hour), t0.Add(-time.Minute)
	pending, err := db.PendingCommands(ctx, since, stale, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].ID != "c1" || pending[1].ID != "c2" || string(pending[0].Body) != string(CommandDelivery("c1", t0).Body) ||
		pending[0].PR != 2 || pending[0].InstallationID != 1 {
		t.Fatalf("pending %+v, want c1 then c2 with their bodies", pending)
	}
	if p, err := db.PendingCommands(ctx, since, stale, 1); err != nil || len(p) != 1 {
		t.Errorf("limit 1: %d, %v", len(p), err)
	}
	if p, err := db.PendingCommands(ctx, t0.Add(time.Millisecond), stale, 10); err != nil || len(p) != 1 || p[0].ID != "c2" {
		t.Errorf("since after c1: %+v, %v", p, err)
	}

	// Two workers: one claim wins.
	ok1, err1 := db.ClaimCommand(ctx, pending[0], "w1")
	ok2, err2 := db.ClaimCommand(ctx, pending[0], "w2")
	if err1 != nil || err2 != nil || !ok1 || ok2 {
		t.Fatalf("claims: %v %v / %v %v, want exactly the first", ok1, err1, ok2, err2)
	}
	if err := db.FinishCommand(ctx, "c1", "w2", validation.DeliveryDone, "x"); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("finish with another worker's token: %v, want ErrLeaseLost", err)
	}
	// Running and not yet stale: not listed.
	if p, _ := db.PendingCommands(ctx, since, stale, 10); len(p) != 1 || p[0].ID != "c2" {
		t.Errorf("while c1 runs: %+v", p)
	}
	// Its worker died: once received before staleBefore, it is listed
	// again and can be claimed again from its running state.
	p, err := db.PendingCommands(ctx, since, t0.Add(time.Millisecond), 10)
	if err != nil || len(p) != 2 || p[0].ID != "c1" || p[0].Status != validation.DeliveryRunning || p[0].Reason != "w1" {
		t.Fatalf("stale: %+v, %v", p, err)
	}
	if ok, err := db.ClaimCommand(ctx, p[0], "w3"); err != nil || !ok {
		t.Fatalf("reclaim: %v %v", ok, err)
	}
	if err := db.FinishCommand(ctx, "c1", "w1", validation.DeliveryDone, "x"); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the dead worker finishing: %v, want ErrLeaseLost", err)
	}
	if err := db.FinishCommand(ctx, "c1", "w3", validation.DeliveryDone, "rerun queued (job 1)"); err != nil {
		t.Fatal(err)
	}
	d, err := db.Delivery(ctx, "c1")
	if err != nil || d.Status != validation.DeliveryDone || d.Reason != "rerun queued (job 1)" {
		t.Errorf("finished delivery %+v, %v", d, err)
	}

	// The budget's counts: one answered command; runs of the pull
	// request's jobs by start time.
	j, ok := Claim(t, db, "w", time.Minute)
	if !ok {
		t.Fatal("no job")
	}
	if _, err := db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed, Started: t0, Finished: t0.Add(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	a, err := db.PRActivity(ctx, "Codertocat/Hello-World", 2, since)
	if err != nil || len(a.Runs) != 1 || !a.Runs[0].Equal(t0) || a.Commands != 1 {
		t.Errorf("activity %+v, %v; want one run at %v and one command", a, err, t0)
	}
	if a, err := db.PRActivity(ctx, "Codertocat/Hello-World", 2, t0.Add(time.Millisecond)); err != nil || len(a.Runs) != 0 || a.Commands != 0 {
		t.Errorf("activity after both: %+v, %v", a, err)
	}
	if a, err := db.PRActivity(ctx, "Codertocat/Hello-World", 3, since); err != nil || len(a.Runs) != 0 || a.Commands != 0 {
		t.Errorf("another pull request: %+v, %v", a, err)
	}
	id, found, err := db.PRJob(ctx, "Codertocat/Hello-World", 2, SHA(1))
	if err != nil || !found || id != j.ID {
		t.Errorf("PRJob = %d %v %v, want %d", id, found, err, j.ID)
	}
	if _, found, err := db.PRJob(ctx, "Codertocat/Hello-World", 2, SHA(2)); err != nil || found {
		t.Errorf("PRJob of another head: %v %v", found, err)
	}
}
