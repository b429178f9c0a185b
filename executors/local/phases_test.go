package local

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// Every phase of a run is timed, in order, and together they account for
// the run's wall time: the steps' own time and gilf's fixed cost around
// them.
func TestRunPhases(t *testing.T) {
	e := newExec(t, Options{})
	dir := repo(t, map[string]string{"package.json": "{}"})
	start := time.Now()
	res, err := e.Run(context.Background(), executors.Request{Dir: dir, Plan: validation.Plan{Steps: []validation.Step{
		shStep("build", "sleep 0.2", time.Minute), shStep("test", "true", time.Minute),
	}}})
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var total int64
	for _, p := range res.Phases {
		names = append(names, p.Name)
		if p.Ms < 0 {
			t.Errorf("phase %s took %d ms", p.Name, p.Ms)
		}
		total += p.Ms
	}
	want := []string{"isolation", "package-manager", "workspace", "config-and-cgroup", "platform-probe", "git-work-tree", "step:build", "step:test", "cleanup"}
	if !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v", names, want)
	}
	if build := res.Phases[6].Ms; build < 200 || build < res.Steps[0].DurationMs {
		t.Errorf("step:build took %d ms, its step %d ms (it sleeps 200)", build, res.Steps[0].DurationMs)
	}
	// Each phase is cut to whole milliseconds.
	if total > wall.Milliseconds() || total < wall.Milliseconds()-int64(len(want))-5 {
		t.Errorf("phases add up to %d ms, the run took %d ms", total, wall.Milliseconds())
	}
	rec := validation.NewRecord(validation.RecordInput{Steps: res.Steps, Phases: res.Phases})
	if !slices.Equal(rec.Phases, res.Phases) {
		t.Errorf("the record's phases %v", rec.Phases)
	}
}
