package review

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

func stagesRecord(executor string) validation.Record {
	one := 1
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	steps := []validation.StepResult{{
		Name: validation.StepTest, Argv: []string{"npm", "run", "test"}, Status: validation.StatusFailed, ExitCode: &one,
		Output: validation.Output{Head: "not ok 1 - adds\n", Bytes: 16, SHA256: "x"},
	}}
	return validation.Record{
		Outcome: validation.OutcomeFailed, Executor: executor, Steps: steps,
		Findings: validation.Findings(steps), Started: start, Finished: start.Add(100 * time.Second),
		VCPU: 2, MemoryGiB: 4,
	}
}

func TestStagesEvidenceAndCosts(t *testing.T) {
	dir := t.TempDir()
	store, err := evidence.NewFSStore(dir, evidence.FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &Stages{
		Evidence: evidence.NewOptions(true, true), EvidenceStore: store,
		Cards: costs.BuiltinCards(), Logger: slog.New(slog.DiscardHandler),
	}
	res := Result{Record: stagesRecord(costs.ExecutorE2B), Shadow: &ShadowReport{
		Executor: "local", Status: "ok", Summary: "shadow local agreed on 1 of 1 steps",
		Data: executors.Telemetry{Shadow: "local", ShadowStarted: time.Now(), ShadowFinished: time.Now().Add(time.Second)},
	}}
	var opts RenderOptions
	if errs := s.AfterRun(context.Background(), Job{ID: 7, Owner: "o", Repo: "r", HeadSHA: "abc"}, &res, &opts); len(errs) != 0 {
		t.Fatalf("AfterRun errors: %v", errs)
	}
	if len(res.Artifacts) == 0 || len(res.Record.Findings) != 1 || len(res.Record.Findings[0].Evidence) == 0 {
		t.Fatalf("evidence not attached: artifacts=%d findings=%+v", len(res.Artifacts), res.Record.Findings)
	}
	key := res.Record.Findings[0].Evidence[0].Key
	body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
	if err != nil || !strings.Contains(string(body), "not ok 1 - adds") {
		t.Fatalf("stored object %s: %q, %v", key, body, err)
	}
	if len(opts.Evidence[validation.StepTest]) == 0 {
		t.Errorf("render options list no evidence for the test step: %+v", opts.Evidence)
	}
	// 100 s × (2 × 0.000014 + 4 × 0.0000045) = 0.0046
	if len(res.Spans) != 2 || res.Spans[0].USD == nil || abs(*res.Spans[0].USD-0.0046) > 1e-9 {
		t.Fatalf("primary span = %+v", res.Spans)
	}
	if res.Spans[1].Lane != costs.LaneShadow || res.Spans[1].USD != nil {
		t.Errorf("shadow span on local must have no estimate: %+v", res.Spans[1])
	}
	if len(opts.Costs) != 2 || !strings.Contains(opts.Costs[1].Note, "no estimate") {
		t.Errorf("cost lines = %+v", opts.Costs)
	}
	body2 := Render(res.Record, opts)
	for _, want := range []string{key, "no estimate"} {
		if !strings.Contains(body2, want) {
			t.Errorf("rendered review lacks %q", want)
		}
	}
}

func TestStagesEvidenceFailureKeepsFindings(t *testing.T) {
	s := &Stages{Evidence: evidence.NewOptions(true, true), Cards: costs.BuiltinCards(), Logger: slog.New(slog.DiscardHandler)}
	res := Result{Record: stagesRecord("local")}
	want := res.Record.Findings
	var opts RenderOptions
	errs := s.AfterRun(context.Background(), Job{ID: 1, Owner: "o", Repo: "r", HeadSHA: "abc"}, &res, &opts)
	if len(errs) != 1 {
		t.Fatalf("errs = %v, want one (no store)", errs)
	}
	if len(res.Record.Findings) != len(want) || res.Record.Findings[0].Title != want[0].Title {
		t.Errorf("findings changed on hook failure: %+v", res.Record.Findings)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 1234: "1,234", 123456: "123,456", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
