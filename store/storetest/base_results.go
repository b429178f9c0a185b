package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// testBaseResults stores a base's step results and reads them back by
// command: only the commands asked for, only at the same repository, sha
// and executor; a second save of a command keeps the first result.
func testBaseResults(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	ctx := context.Background()
	key := store.BaseKey{Repo: "o/r", SHA: SHA(7), Executor: "local"}
	steps := map[string]validation.BaseStep{
		"install: npm ci": {Name: "install", Status: validation.StatusPassed, ExitCode: Ptr(0)},
		"test: npm run test": {Name: "test", Status: validation.StatusFailed, ExitCode: Ptr(1),
			Failures: []validation.StepFailure{{Name: "old test", File: "test/a.js", Line: 3, Key: "test\x1fold test"}}},
		"lint: npm run lint": {Name: "lint", Status: validation.StatusNotRun, Reason: "no lint script on the base"},
	}
	if got, err := db.BaseSteps(ctx, key, []string{"test: npm run test"}); err != nil || len(got) != 0 {
		t.Fatalf("before saving: %v, %v; want nothing", got, err)
	}
	if err := db.SaveBaseSteps(ctx, key, steps); err != nil {
		t.Fatal(err)
	}
	got, err := db.BaseSteps(ctx, key, []string{"test: npm run test", "lint: npm run lint", "build: npm run build"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]validation.BaseStep{"test: npm run test": steps["test: npm run test"], "lint: npm run lint": steps["lint: npm run lint"]}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("base steps (-want +got):\n%s", d)
	}
	// Another sha, executor or repository has nothing.
	for _, k := range []store.BaseKey{{Repo: "o/r", SHA: SHA(8), Executor: "local"}, {Repo: "o/r", SHA: SHA(7), Executor: "managed-e2b"}, {Repo: "o/other", SHA: SHA(7), Executor: "local"}} {
		if got, err := db.BaseSteps(ctx, k, []string{"test: npm run test"}); err != nil || len(got) != 0 {
			t.Errorf("%+v: %v, %v; want nothing", k, got, err)
		}
	}
	// A command saved again keeps its first result.
	if err := db.SaveBaseSteps(ctx, key, map[string]validation.BaseStep{"test: npm run test": {Name: "test", Status: validation.StatusPassed}}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.BaseSteps(ctx, key, []string{"test: npm run test"}); err != nil || got["test: npm run test"].Status != validation.StatusFailed {
		t.Errorf("after a second save: %+v, %v; want the first result (failed)", got, err)
	}
	// The limits: at most MaxBaseCommands per call, a complete key.
	many := make([]string, store.MaxBaseCommands+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	if _, err := db.BaseSteps(ctx, key, many[:store.MaxBaseCommands]); err != nil {
		t.Errorf("%d commands: %v", store.MaxBaseCommands, err)
	}
	if _, err := db.BaseSteps(ctx, key, many); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("%d commands: %v, want over the limit", len(many), err)
	}
	if err := db.SaveBaseSteps(ctx, store.BaseKey{Repo: "o/r"}, steps); err == nil {
		t.Error("an incomplete key was saved")
	}
}

// testPruneBaseResults prunes the base results stored before the cutoff
// (one stored exactly at it stays) and keeps the newer ones.
func testPruneBaseResults(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	ctx := context.Background()
	step := map[string]validation.BaseStep{"test: npm test": {Name: "test", Status: validation.StatusFailed, ExitCode: Ptr(1)}}
	key := func(n int) store.BaseKey { return store.BaseKey{Repo: "o/r", SHA: SHA(n), Executor: "local"} }
	save := func(k store.BaseKey) {
		t.Helper()
		if err := db.SaveBaseSteps(ctx, k, step); err != nil {
			t.Fatal(err)
		}
	}
	save(key(1))
	c.Advance(time.Hour)
	cutoff := c.Now()
	save(key(2))
	c.Advance(time.Hour)
	save(key(3))

	res, err := db.Prune(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseResults != 1 {
		t.Errorf("pruned %d base results, want 1", res.BaseResults)
	}
	for n, want := range map[int]int{1: 0, 2: 1, 3: 1} {
		got, err := db.BaseSteps(ctx, key(n), []string{"test: npm test"})
		if err != nil || len(got) != want {
			t.Errorf("base %d after pruning: %v, %v; want %d step(s)", n, got, err, want)
		}
	}
	if res, err := db.Prune(ctx, cutoff); err != nil || res.BaseResults != 0 {
		t.Errorf("second prune: %+v, %v; want nothing more", res, err)
	}
}

// testBaseAndRetryLanes records cost spans of the base and retry lanes,
// which the cost_spans CHECK allows since migration 0011.
func testBaseAndRetryLanes(t *testing.T, e Engine) {
	c := NewClock()
	db, _ := e.openTest(t, c)
	ctx := context.Background()
	Record(t, db, Delivery("d1", []byte(`{}`), c.Now()), Spec(SHA(1), c.Now()))
	j, _ := Claim(t, db, "w", time.Minute)
	start := c.Now()
	_, err := db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomeFailed, Executor: "local"}, Spans: []store.CostSpan{
		{Lane: store.LanePrimary, Executor: "local", Started: start, Finished: start.Add(3 * time.Second), Method: "estimate:wall-clock"},
		{Lane: store.LaneBase, Executor: "local", Started: start.Add(3 * time.Second), Finished: start.Add(5 * time.Second), Method: "estimate:wall-clock"},
		{Lane: store.LaneRetry, Executor: "local", Started: start.Add(3 * time.Second), Finished: start.Add(4 * time.Second), Method: "estimate:wall-clock"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	days, err := db.CostsByDay(ctx, start.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lanes := map[string]float64{}
	for _, d := range days {
		lanes[string(d.Lane)] += d.Seconds
	}
	if d := cmp.Diff(map[string]float64{"primary": 3, "base": 2, "retry": 1}, lanes); d != "" {
		t.Errorf("seconds by lane (-want +got):\n%s", d)
	}
}
