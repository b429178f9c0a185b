package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// testFinishShadow: a run recorded while its shadow lane still ran shows
// the lane running; FinishShadow replaces that with the lane's telemetry
// and adds its cost span to the run.
func testFinishShadow(t *testing.T, e Engine) {
	db := e.OpenAt(t, e.NewLocation(t), store.Options{})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	Record(t, db, Delivery("d1", []byte(`{}`), now), Spec(SHA(1), now))
	j, _ := Claim(t, db, "w", time.Minute)
	runID, err := db.Finish(ctx, j.Lease, store.RunRecord{
		Record: validation.Record{Outcome: validation.OutcomePassed, Executor: "local", Started: now, Finished: now.Add(time.Second)},
		Shadow: &store.ShadowTelemetry{Executor: "self-host", Err: "running: recorded when the lane ends"},
	})
	if err != nil {
		t.Fatal(err)
	}
	view, err := db.RunView(ctx, runID)
	if err != nil || view.Shadow == nil || view.Shadow.Err == "" {
		t.Fatalf("while running: %+v, %v", view.Shadow, err)
	}
	usd := 0.125
	err = db.FinishShadow(ctx, j.ID, runID, store.ShadowTelemetry{
		Executor: "self-host", Outcome: validation.OutcomePassed, Wall: 3 * time.Second, USD: &usd,
		Steps: []store.StepAgreement{{Step: "test", Primary: validation.StatusPassed, Shadow: validation.StatusPassed, Agree: true}},
	}, []store.CostSpan{{Lane: store.LaneShadow, Executor: "self-host", Started: now, Finished: now.Add(3 * time.Second), USD: &usd, Method: "estimate:wall-clock"}})
	if err != nil {
		t.Fatal(err)
	}
	view, err = db.RunView(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	sh := view.Shadow
	if sh == nil || sh.Err != "" || sh.Outcome != validation.OutcomePassed || sh.StepsAgreed != 1 || sh.StepsTotal != 1 ||
		sh.Wall != 3*time.Second || sh.USD == nil || *sh.USD != usd {
		t.Errorf("after FinishShadow: %+v", sh)
	}
	days, err := db.CostsByDay(ctx, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range days {
		if d.Lane == store.LaneShadow && d.Executor == "self-host" && d.USD != nil && *d.USD == usd {
			found = true
		}
	}
	if !found {
		t.Errorf("no shadow span of the run in the costs: %+v", days)
	}
}
