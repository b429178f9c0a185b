package review

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/excerpt"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/internal/workdir"
	"github.com/gilf-review/gilf/validation"
)

// This file finds whose each failure of a failed head is (SPEC §3.4.1):
// the failed steps run once more at the head (flaky), and the base runs
// install and the steps that failed (introduced or preexisting); the
// comparison itself is validation.Attribute.

// MaxComparedFailures is how many failures of one step are parsed, kept
// in the record and compared with the base's; the rest are counted in a
// note.
const MaxComparedFailures = 200

// BaseResults keeps the base's step results for reuse: a later head on
// the same base, with the same executor and commands, does not run the
// base again. Commands are CommandKey's.
type BaseResults interface {
	BaseSteps(ctx context.Context, repo, sha, executor string, commands []string) (map[string]validation.BaseStep, error)
	SaveBaseSteps(ctx context.Context, repo, sha, executor string, steps map[string]validation.BaseStep) error
}

// OriginCheck is what Compare needs for one head's failed run.
type OriginCheck struct {
	Exec executors.Executor
	// Head is the head's request as it ran.
	Head executors.Request
	// Retry runs each failed script step once more at the head, in a
	// fresh sandbox (validation.retryFlaky).
	Retry bool
	// BaseRef and BaseSHA (or BasePath, for gilf validate --base) name
	// the base in the record, compared or not.
	BaseRef, BaseSHA, BasePath string
	// Base is the base to validate; nil when there is none to compare
	// with, and BaseReason says why.
	Base       *BaseSource
	BaseReason string
	// Store keeps and reuses the base's results; nil keeps nothing.
	Store BaseResults
	// Progress, when set, is told in one line what the comparison does
	// while it runs. It must not block.
	Progress func(summary string)
	Logger   *slog.Logger
}

// BaseSource is a base to validate.
type BaseSource struct {
	// Repo is owner/name, the key the base's results are stored under;
	// "" stores nothing.
	Repo string
	// Dir, when set, is the base's repository root as it is (gilf
	// validate --base on a directory), and its own command root;
	// Checkout is then not called. DirRoot is Dir's command root (the
	// directory an archive was extracted into); "" is Dir itself.
	Dir, DirRoot string
	// Checkout makes the base's tree under dst and returns its root.
	Checkout func(ctx context.Context, dst string) (string, error)
	// PlanOptions and Env are the head's: the same limits and
	// package-manager resolution.
	PlanOptions validation.PlanOptions
	Env         map[string]string
	// WorkDir is where the base's checkout directory is made.
	WorkDir string
}

// LaneRun is one run the comparison made: a cost span of its lane
// (costs.LaneBase, costs.LaneRetry).
type LaneRun struct {
	Lane, Executor    string
	Started, Finished time.Time
	VCPU, MemoryGiB   float64
}

// CheckConclusion is the check run's conclusion for rec: neutral when
// every failure is preexisting or flaky (unless preexistingFails, the
// repository's validation.preexisting: failure, and something is
// preexisting), else ConclusionFor its outcome.
func CheckConclusion(rec validation.Record, preexistingFails bool) string {
	if validation.Inherited(rec, preexistingFails) {
		return ConclusionNeutral
	}
	return ConclusionFor(rec.Outcome)
}

// CommandKey is what a step's base result is stored under: its name and
// its command as the head runs it.
func CommandKey(s validation.Step) string {
	return s.Name + ": " + shellJoin(s.Argv)
}

// Compare finds the origin of each failure of a failed record: it parses
// each failed step's failures, notes network errors, retries the failed
// script steps and validates the base (the two at once), then sets
// rec's origins and rec.Base. It returns the runs it made, for their
// costs. A run that breaks leaves its side unknown, logged; only a
// cancelled ctx is an error.
func Compare(ctx context.Context, rec *validation.Record, c OriginCheck) ([]LaneRun, error) {
	if rec.Outcome != validation.OutcomeFailed {
		return nil, nil
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var failed []validation.Step
	for i := range rec.Steps {
		st := &rec.Steps[i]
		if !validation.Failed(st.Status) {
			continue
		}
		var omitted int
		st.Failures, omitted = StepFailures(*st)
		if omitted > 0 {
			rec.Notes = append(rec.Notes, fmt.Sprintf("step `%s` printed %d more failures than the %d gilf compares; those are not listed.", st.Name, omitted, MaxComparedFailures))
		}
		if ps, ok := planStep(c.Head.Plan, st.Name); ok {
			failed = append(failed, ps)
		}
	}
	rec.Notes = append(rec.Notes, validation.NetworkNotes(rec.Steps)...)
	if len(failed) == 0 {
		return nil, nil
	}
	if c.Progress != nil && (c.Retry || c.Base != nil) {
		c.Progress(progressWords(c))
	}
	var (
		wg      sync.WaitGroup
		retried map[string]validation.Status
		retry   *LaneRun
		base    validation.BaseRun
		baseRun *LaneRun
	)
	if c.Retry {
		wg.Go(func() { retried, retry = c.retry(ctx, failed) })
	}
	wg.Go(func() { base, baseRun = c.base(ctx, failed) })
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("compare failures: %w", err)
	}
	in := validation.OriginInput{Retried: retried, Base: base.Steps, BaseReason: base.Reason}
	if base.Reason != "" {
		in.Base = nil
	}
	validation.Attribute(rec.Steps, in)
	base.Ref, base.SHA, base.Path = c.BaseRef, c.BaseSHA, c.BasePath
	if base.Steps == nil {
		base.Steps = []validation.BaseStep{}
	}
	rec.Base = &base
	var runs []LaneRun
	for _, r := range []*LaneRun{baseRun, retry} {
		if r != nil {
			runs = append(runs, *r)
		}
	}
	return runs, nil
}

func progressWords(c OriginCheck) string {
	var parts []string
	if c.Base != nil {
		name := c.BaseRef
		if name == "" {
			name = c.BasePath
		}
		parts = append(parts, "comparing with "+code(name))
	}
	if c.Retry {
		parts = append(parts, "running the failed steps once more")
	}
	return "Steps failed; gilf is " + strings.Join(parts, " and ") + " to tell this pull request's failures from others'."
}

func planStep(plan validation.Plan, name string) (validation.Step, bool) {
	for _, s := range plan.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return validation.Step{}, false
}

// StepFailures parses a step's output into the failures compared with
// the base: each failed test by name, each tsc diagnostic and ESLint
// problem by file, line and code; at most MaxComparedFailures, and how
// many more there were.
func StepFailures(st validation.StepResult) ([]validation.StepFailure, int) {
	res := excerpt.Parse(outputText(st.Output), excerpt.Options{Root: st.Cwd, MaxFailures: MaxComparedFailures})
	var out []validation.StepFailure
	seen := map[string]bool{}
	add := func(f validation.StepFailure) {
		if seen[f.Key] {
			return
		}
		seen[f.Key] = true
		out = append(out, f)
	}
	for _, f := range res.Failures {
		if f.Tool == "eslint" && len(f.Annotations) > 0 {
			for _, a := range f.Annotations {
				add(validation.StepFailure{Name: fmt.Sprintf("%s:%d %s", a.Path, a.StartLine, a.Title), File: a.Path, Line: a.StartLine,
					Key: validation.FailureKey("eslint", a.Title, a.Path, a.StartLine)})
			}
			continue
		}
		add(validation.StepFailure{Name: f.Title, File: f.Path, Line: f.Line, Key: validation.FailureKey(f.Tool, f.Title, f.Path, f.Line)})
	}
	return out, res.Omitted
}

// retry runs the failed script steps once more at the head, after a
// fresh install, and returns how each ended.
func (c OriginCheck) retry(ctx context.Context, failed []validation.Step) (map[string]validation.Status, *LaneRun) {
	var scripts []validation.Step
	for _, s := range failed {
		if s.Name != validation.StepInstall {
			scripts = append(scripts, s)
		}
	}
	if len(scripts) == 0 {
		return nil, nil // a failed install stops everything: nothing ran to retry
	}
	req := c.Head
	req.Plan.Steps = withInstall(c.Head.Plan, scripts)
	req.Progress = nil
	req.Labels = withLabel(req.Labels, "lane", "retry")
	rec, err := Validate(ctx, c.Exec, req, nil)
	if err != nil {
		c.Logger.Warn("retry of the failed steps broke; they are compared with the base only", logkey.Executor, c.Exec.Name(), logkey.Err, err)
		return nil, nil
	}
	out := map[string]validation.Status{}
	for _, s := range rec.Steps {
		if s.Name != validation.StepInstall {
			out[s.Name] = s.Status
		}
	}
	return out, laneRun(costs.LaneRetry, rec)
}

// base validates the base: install and the steps that failed on the
// head, or reuses what the store has for them.
func (c OriginCheck) base(ctx context.Context, failed []validation.Step) (validation.BaseRun, *LaneRun) {
	if c.Base == nil {
		return validation.BaseRun{Reason: c.BaseReason}, nil
	}
	head := withInstall(c.Head.Plan, failed)
	keys := make([]string, len(head))
	for i, s := range head {
		keys[i] = CommandKey(s)
	}
	if c.Store != nil && c.Base.Repo != "" {
		got, err := c.Store.BaseSteps(ctx, c.Base.Repo, c.BaseSHA, c.Exec.Name(), keys)
		if err != nil {
			c.Logger.Warn("stored base results not read; the base runs again", logkey.Err, err)
		}
		if len(got) == len(keys) {
			out := validation.BaseRun{Reused: true, Outcome: validation.OutcomePassed}
			for _, k := range keys {
				out.Steps = append(out.Steps, got[k])
				if validation.Failed(got[k].Status) {
					out.Outcome = validation.OutcomeFailed
				}
			}
			return out, nil
		}
	}
	out, run := c.runBase(ctx, head)
	if out.Reason == "" && c.Store != nil && c.Base.Repo != "" {
		save := map[string]validation.BaseStep{}
		for i, s := range out.Steps {
			save[keys[i]] = s
		}
		if err := c.Store.SaveBaseSteps(context.WithoutCancel(ctx), c.Base.Repo, c.BaseSHA, c.Exec.Name(), save); err != nil {
			c.Logger.Warn("base results not stored; a later head runs the base again", logkey.Err, err)
		}
	}
	return out, run
}

// runBase checks the base out and runs install and, of steps, those the
// base has. Its steps are in the order of steps, one each.
func (c OriginCheck) runBase(ctx context.Context, steps []validation.Step) (validation.BaseRun, *LaneRun) {
	dir, root := c.Base.DirRoot, c.Base.Dir
	if dir == "" {
		dir = root
	}
	if root == "" {
		var err error
		dir, err = workdir.Create(c.Base.WorkDir, "base-")
		if err != nil {
			c.Logger.Error("make the base's checkout dir", logkey.Err, err)
			return validation.BaseRun{Reason: "gilf could not make a directory for the base's checkout"}, nil
		}
		defer func() {
			if err := os.RemoveAll(dir); err != nil {
				c.Logger.Error("remove the base's checkout", logkey.Dir, dir, logkey.Err, err)
			}
		}()
		root, err = c.Base.Checkout(ctx, dir)
		if err != nil {
			c.Logger.Warn("base not checked out; failures are of unknown origin", logkey.Err, err)
			return validation.BaseRun{Reason: "the base commit could not be downloaded"}, nil
		}
	}
	plan := validation.BuildPlan(root, c.Base.PlanOptions)
	plan.Env = c.Base.Env
	if plan.Gap != nil {
		return validation.BaseRun{Reason: "the base has nothing to run (" + string(plan.Gap.Reason) + ")"}, nil
	}
	// The base's own commands for the steps it has; the others did not
	// run there.
	out := make([]validation.BaseStep, len(steps))
	var run []validation.Step
	index := map[string]int{}
	for i, s := range steps {
		out[i] = validation.BaseStep{Name: s.Name, Status: validation.StatusNotRun}
		b, ok := planStep(plan, s.Name)
		switch {
		case !ok:
			out[i].Reason = "the base has no " + s.Name + " step"
		case b.Inconclusive != "":
			out[i].Status, out[i].Reason = validation.StatusInconclusive, "inconclusive on the base: "+b.Inconclusive
		default:
			index[s.Name] = i
			run = append(run, b)
		}
	}
	plan.Steps = run
	req := executors.Request{Plan: plan, Dir: root, Root: dir, Secrets: c.Head.Secrets,
		Labels: withLabel(withLabel(c.Head.Labels, "lane", "base"), "head_sha", c.BaseSHA), Run: c.Head.Run}
	rec, err := Validate(ctx, c.Exec, req, nil)
	if err != nil {
		c.Logger.Warn("the base's run broke; failures are of unknown origin", logkey.Executor, c.Exec.Name(), logkey.Err, err)
		return validation.BaseRun{Reason: "gilf's infrastructure failed while validating the base"}, nil
	}
	switch rec.Outcome {
	case validation.OutcomeRefused, validation.OutcomeError:
		return validation.BaseRun{Outcome: rec.Outcome, Reason: "the base's validation was refused: " + rec.Reason}, laneRun(costs.LaneBase, rec)
	}
	if rec.Integrity != "" {
		return validation.BaseRun{Outcome: rec.Outcome, Reason: "the base's results cannot be trusted: " + rec.Integrity}, laneRun(costs.LaneBase, rec)
	}
	for _, st := range rec.Steps {
		i, ok := index[st.Name]
		if !ok {
			continue
		}
		b := validation.BaseStep{Name: st.Name, Status: st.Status, ExitCode: st.ExitCode, Reason: st.Reason}
		if validation.Failed(st.Status) {
			b.Failures, _ = StepFailures(st)
		}
		out[i] = b
	}
	return validation.BaseRun{Outcome: rec.Outcome, Steps: out}, laneRun(costs.LaneBase, rec)
}

// withInstall is steps after the plan's install step, when it has one
// and steps do not hold it already.
func withInstall(plan validation.Plan, steps []validation.Step) []validation.Step {
	install, ok := planStep(plan, validation.StepInstall)
	if !ok || len(steps) > 0 && steps[0].Name == validation.StepInstall {
		return append([]validation.Step(nil), steps...)
	}
	return append([]validation.Step{install}, steps...)
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for lk, lv := range labels {
		out[lk] = lv
	}
	out[k] = v
	return out
}

func laneRun(lane string, rec validation.Record) *LaneRun {
	if rec.Started.IsZero() || rec.Executor == "" {
		return nil
	}
	return &LaneRun{Lane: lane, Executor: rec.Executor, Started: rec.Started, Finished: rec.Finished, VCPU: rec.VCPU, MemoryGiB: rec.MemoryGiB}
}

// compare is Compare for a served job: the base is the pull request's
// base commit, fetched like the head, with the base branch's config.
func (p *Pipeline) compare(ctx context.Context, j Job, pr PR, cfg ValidationConfig, exec executors.Executor, req executors.Request, rec *validation.Record, rep *progressReporter) ([]LaneRun, error) {
	c := OriginCheck{
		Exec: exec, Head: req, Retry: cfg.RetryFlaky == nil || *cfg.RetryFlaky,
		BaseRef: pr.BaseRef, BaseSHA: pr.BaseSHA, Store: p.BaseResults, Logger: JobLogger(p.Logger, j),
	}
	switch {
	case p.NoBaseComparison:
		c.BaseReason = "the base comparison is off on this worker"
	case cfg.CompareBase != nil && !*cfg.CompareBase:
		c.BaseReason = "validation.compareBase is false in " + ConfigPath
	case pr.BaseSHA == "":
		c.BaseReason = "GitHub named no base commit"
	default:
		c.Base = &BaseSource{
			Repo: j.FullName(), PlanOptions: p.PlanOptions, Env: cfg.Env, WorkDir: p.WorkDir,
			Checkout: func(ctx context.Context, dst string) (string, error) {
				return p.Checkouts.Checkout(ctx, j, pr.BaseSHA, dst)
			},
		}
	}
	if rep != nil {
		c.Progress = func(summary string) {
			st := rep.base
			st.Status, st.Summary = StatusInProgress, summary
			rep.send(st)
		}
	}
	return Compare(ctx, rec, c)
}

// annotationLevel is a's level, or notice when the failure it marks is
// not the pull request's (preexisting or flaky): the failure it points
// at by file and line, else by title, else its step's.
func annotationLevel(st validation.StepResult, a excerpt.Annotation) string {
	o := st.Origin
	found := false
	for _, f := range st.Failures {
		if f.File == a.Path && f.Line == a.StartLine {
			o, found = f.Origin, true
			break
		}
	}
	for _, f := range st.Failures {
		if !found && f.Name == a.Title {
			o, found = f.Origin, true
		}
	}
	if o == validation.OriginPreexisting || o == validation.OriginFlaky {
		return string(excerpt.LevelNotice)
	}
	return string(a.Level)
}

// Explain is the failure-excerpt stage of a served job for a record made
// elsewhere (gilf validate): each failed step's finding quotes its
// failures first, found in the checkout at root, and the annotations
// they point at are returned.
func Explain(rec *validation.Record, root string) []Annotation {
	return explain(rec, root, nil)
}

// originRank orders a step's failures for its excerpt: the pull
// request's own (introduced, unknown) before the others (preexisting,
// flaky). A failure is matched to its origin by name, else by file and
// line.
func originRank(st validation.StepResult, f excerpt.Failure) int {
	o := st.Origin
	for _, sf := range st.Failures {
		if sf.Name == f.Title || f.Path != "" && sf.File == f.Path && sf.Line == f.Line {
			o = sf.Origin
			break
		}
	}
	return blameRank(o)
}

// blameRank is 0 for an origin that is the pull request's, or may be,
// and 1 for the others.
func blameRank(o validation.Origin) int {
	if o.Blames() {
		return 0
	}
	return 1
}
