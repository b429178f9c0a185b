package review

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The constructors of the parts cmd/gilf wires: each takes the part
// with its fields set, checks that what it needs is there, and returns
// it ready to use.

// required returns an error naming the parts of what that are missing
// (have[name] false), sorted; nil when none is.
func required(what string, have map[string]bool) error {
	var missing []string
	for name, ok := range have {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("%s: missing %s", what, strings.Join(missing, ", "))
}

// NewPipeline checks that p has its required parts (PRs, Checkouts,
// Publisher, Logger) and returns it ready to Run. The other parts are
// optional: without Reviewer no semantic review, without Lanes no
// shadow lane, without Hooks no evidence and cost stages.
func NewPipeline(p Pipeline) (*Pipeline, error) {
	if err := required("pipeline", map[string]bool{"PRs": p.PRs != nil, "Checkouts": p.Checkouts != nil,
		"Publisher": p.Publisher != nil, "Logger": p.Logger != nil}); err != nil {
		return nil, err
	}
	return &p, nil
}

// NewWorker checks that w has its required parts (Queue, Runner, Owner,
// Logger) and no negative count or duration, and returns it ready to
// Run.
func NewWorker(w Worker) (*Worker, error) {
	errs := []error{required("worker", map[string]bool{"Queue": w.Queue != nil, "Runner": w.Runner != nil,
		"Owner": w.Owner != "", "Logger": w.Logger != nil})}
	if w.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("worker: concurrency %d is negative", w.Concurrency))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"lease", w.Lease}, {"poll interval", w.PollInterval}, {"drain", w.Drain}, {"stop check", w.StopCheck}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("worker: %s %v is negative", d.name, d.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &w, nil
}

// NewStages checks that s has a Logger, and an EvidenceStore when
// evidence is enabled, and returns it ready to run after each job.
func NewStages(s Stages) (*Stages, error) {
	if err := required("stages", map[string]bool{"Logger": s.Logger != nil,
		"EvidenceStore (evidence is enabled)": !s.Evidence.Enabled || s.EvidenceStore != nil}); err != nil {
		return nil, err
	}
	return &s, nil
}
