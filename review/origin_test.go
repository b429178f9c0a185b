package review

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/excerpt"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// scriptedExec ends each step as its script says for the checkout it
// runs in (the file "which" of req.Dir names it: head or base) and the
// how-manieth run of that checkout it is; it counts the runs and keeps
// the labels of each checkout's last run.
type scriptedExec struct {
	script func(which string, run int, step string) (validation.Status, string)

	mu     sync.Mutex
	runs   map[string]int
	labels map[string]map[string]string
}

func (e *scriptedExec) Name() string { return "scripted" }

func (e *scriptedExec) Run(ctx context.Context, req executors.Request) (executors.Result, error) {
	b, err := os.ReadFile(filepath.Join(req.Dir, "which"))
	if err != nil {
		return executors.Result{}, err
	}
	which := strings.TrimSpace(string(b))
	e.mu.Lock()
	if e.runs == nil {
		e.runs, e.labels = map[string]int{}, map[string]map[string]string{}
	}
	e.runs[which]++
	e.labels[which] = req.Labels
	run := e.runs[which]
	e.mu.Unlock()
	res := executors.Result{Executor: e.Name(), Started: time.Now()}
	stop := false
	for _, s := range req.Plan.Steps {
		st := validation.StepResult{Name: s.Name, Argv: s.Argv, Network: s.Network, Status: validation.StatusNotRun}
		if !stop {
			st.Status, st.Output.Head = e.script(which, run, s.Name)
			code := 0
			if st.Status != validation.StatusPassed {
				code = 1
			}
			st.ExitCode = &code
			stop = s.Name == validation.StepInstall && st.Status != validation.StatusPassed
		}
		res.Steps = append(res.Steps, st)
	}
	res.Finished = time.Now()
	return res, nil
}

func (e *scriptedExec) count(which string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[which]
}

// memoryBase is a BaseResults in memory.
type memoryBase struct {
	mu    sync.Mutex
	steps map[string]validation.BaseStep
	err   error
}

func (m *memoryBase) BaseSteps(ctx context.Context, repo, sha, executor string, commands []string) (map[string]validation.BaseStep, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]validation.BaseStep{}
	for _, c := range commands {
		if s, ok := m.steps[repo+"|"+sha+"|"+executor+"|"+c]; ok {
			out[c] = s
		}
	}
	return out, m.err
}

func (m *memoryBase) SaveBaseSteps(ctx context.Context, repo, sha, executor string, steps map[string]validation.BaseStep) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.steps == nil {
		m.steps = map[string]validation.BaseStep{}
	}
	for c, s := range steps {
		m.steps[repo+"|"+sha+"|"+executor+"|"+c] = s
	}
	return nil
}

// checkoutOf writes a checkout named which with scripts.
func checkoutOf(t *testing.T, which, scripts string) (root, dir string) {
	t.Helper()
	dir = t.TempDir()
	root = filepath.Join(dir, "o-r-"+which)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"package.json": `{"scripts":{` + scripts + `}}`, "which": which} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, dir
}

// headRun is the head's failed record and request.
func headRun(t *testing.T, exec executors.Executor) (validation.Record, executors.Request) {
	t.Helper()
	root, dir := checkoutOf(t, "head", `"test":"node --test","lint":"eslint ."`)
	req := executors.Request{Plan: validation.BuildPlan(root, validation.PlanOptions{}), Dir: root, Root: dir,
		Labels: map[string]string{"repo": "o/r", "head_sha": "head-sha"}}
	rec, err := Validate(context.Background(), exec, req, nil)
	if err != nil || rec.Outcome != validation.OutcomeFailed {
		t.Fatalf("head: %s, %v", rec.Outcome, err)
	}
	return rec, req
}

// baseSource is a base checkout with scripts, counted.
func baseSource(t *testing.T, scripts string, fail error) (*BaseSource, *int) {
	n := new(int)
	return &BaseSource{Repo: "o/r", WorkDir: t.TempDir(), Checkout: func(ctx context.Context, dst string) (string, error) {
		*n++
		if fail != nil {
			return "", fail
		}
		root, _ := checkoutOf(t, "base", scripts)
		target := filepath.Join(dst, filepath.Base(root))
		return target, os.CopyFS(target, os.DirFS(root))
	}}, n
}

func stepOrigins(rec validation.Record) map[string]string {
	out := map[string]string{}
	for _, s := range rec.Steps {
		out[s.Name] = string(s.Origin)
		for _, f := range s.Failures {
			out[s.Name+"/"+f.Name] = string(f.Origin)
		}
	}
	return out
}

const (
	tapOldNew = "not ok 1 - old test\nnot ok 2 - new test\n"
	tapOld    = "not ok 1 - old test\n"
)

// TestCompare: the head's test step fails an old and a new test, its lint
// fails; the base fails the old test and passes lint. Then a second head
// on the same base reuses the stored base, and a step that passes on the
// retry is flaky.
func TestCompare(t *testing.T) {
	exec := &scriptedExec{script: func(which string, run int, step string) (validation.Status, string) {
		switch {
		case step == "test" && which == "head":
			return validation.StatusFailed, tapOldNew
		case step == "test":
			return validation.StatusFailed, tapOld
		case step == "lint" && which == "head" && run != 4: // the second head's retry (the 4th head run) passes
			return validation.StatusFailed, "src/a.js: 1 problem\n"
		}
		return validation.StatusPassed, ""
	}}
	store := &memoryBase{}
	rec, req := headRun(t, exec)
	base, checkouts := baseSource(t, `"test":"node --test","lint":"eslint ."`, nil)
	c := OriginCheck{Exec: exec, Head: req, Retry: true, BaseRef: "main", BaseSHA: "abc", Base: base, Store: store}
	runs, err := Compare(context.Background(), &rec, c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"install": "", "test": "introduced", "test/old test": "preexisting", "test/new test": "introduced", "lint": "introduced"}
	if d := cmp.Diff(want, stepOrigins(rec)); d != "" {
		t.Errorf("origins (-want +got):\n%s", d)
	}
	if rec.Base == nil || rec.Base.Reused || rec.Base.Outcome != validation.OutcomeFailed || len(rec.Base.Steps) != 3 || len(runs) != 2 || *checkouts != 1 {
		t.Fatalf("base %+v, runs %+v, %d checkouts; want a base run of 3 steps, a base and a retry span", rec.Base, runs, *checkouts)
	}
	// The base's run is labelled as the base commit's (its work tree's
	// commit names it), the retry as the head's.
	exec.mu.Lock()
	if l := exec.labels["base"]; l["lane"] != "base" || l["head_sha"] != "abc" || l["repo"] != "o/r" {
		t.Errorf("the base ran with labels %v; want lane base, head_sha abc, the head's others", l)
	}
	if l := exec.labels["head"]; l["lane"] != "retry" || l["head_sha"] != "head-sha" {
		t.Errorf("the retry ran with labels %v; want lane retry at the head", l)
	}
	exec.mu.Unlock()

	// The second head: lint passes on its retry (flaky); the base is
	// reused, neither checked out nor run again.
	rec2, _ := headRun(t, exec)
	baseRuns := exec.count("base")
	runs, err = Compare(context.Background(), &rec2, c)
	if err != nil {
		t.Fatal(err)
	}
	want["lint"] = "flaky"
	if d := cmp.Diff(want, stepOrigins(rec2)); d != "" {
		t.Errorf("second head's origins (-want +got):\n%s", d)
	}
	if !rec2.Base.Reused || *checkouts != 1 || exec.count("base") != baseRuns || len(runs) != 1 || runs[0].Lane != "retry" {
		t.Errorf("second head: base %+v, %d checkouts, %d base runs (was %d), runs %+v; want the base reused", rec2.Base, *checkouts, exec.count("base"), baseRuns, runs)
	}
}

// TestCompareUnknown: a base that cannot be downloaded, a base without
// the step, a store that cannot be read (the base runs again), and the
// comparison off.
func TestCompareUnknown(t *testing.T) {
	exec := &scriptedExec{script: func(which string, run int, step string) (validation.Status, string) {
		if which == "head" && step == "lint" {
			return validation.StatusFailed, "src/a.js: 1 problem\n"
		}
		if step == "test" {
			return validation.StatusFailed, tapOld
		}
		return validation.StatusPassed, ""
	}}
	for _, tc := range []struct {
		name      string
		base      func(t *testing.T) *BaseSource
		reason    string
		store     *memoryBase
		want      map[string]string
		baseSteps int
	}{
		{"no archive", func(t *testing.T) *BaseSource {
			b, _ := baseSource(t, `"test":"x","lint":"y"`, errors.New("404"))
			return b
		}, "the base commit could not be downloaded", nil,
			map[string]string{"install": "", "test": "unknown", "test/old test": "unknown", "lint": "unknown"}, 0},
		{"no lint on the base; the store unreadable", func(t *testing.T) *BaseSource {
			b, _ := baseSource(t, `"test":"x"`, nil)
			return b
		}, "", &memoryBase{err: errors.New("database is locked")},
			map[string]string{"install": "", "test": "preexisting", "test/old test": "preexisting", "lint": "unknown"}, 3},
		{"comparison off", func(t *testing.T) *BaseSource { return nil }, "the base comparison is off on this worker", nil,
			map[string]string{"install": "", "test": "unknown", "test/old test": "unknown", "lint": "unknown"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, req := headRun(t, exec)
			c := OriginCheck{Exec: exec, Head: req, Retry: true, BaseRef: "main", BaseSHA: "abc", Base: tc.base(t)}
			if c.Base == nil {
				c.BaseReason = "the base comparison is off on this worker"
			}
			if tc.store != nil {
				c.Store = tc.store
			}
			if _, err := Compare(context.Background(), &rec, c); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, stepOrigins(rec)); d != "" {
				t.Errorf("origins (-want +got):\n%s", d)
			}
			if rec.Base == nil || rec.Base.Reason != tc.reason || len(rec.Base.Steps) != tc.baseSteps {
				t.Errorf("base %+v, want reason %q and %d steps", rec.Base, tc.reason, tc.baseSteps)
			}
			if CheckConclusion(rec, false) != ConclusionFailure {
				t.Errorf("conclusion %s, want failure", CheckConclusion(rec, false))
			}
		})
	}
}

// TestAnnotationLevels: an annotation of an introduced or unknown failure
// keeps its level; one of a preexisting or flaky failure is a notice. A
// failure is found by file and line, else by title, else the step's
// origin counts.
func TestAnnotationLevels(t *testing.T) {
	st := validation.StepResult{Origin: validation.OriginIntroduced, Failures: []validation.StepFailure{
		{Name: "old", File: "a.js", Line: 3, Origin: validation.OriginPreexisting},
		{Name: "new", File: "a.js", Line: 9, Origin: validation.OriginIntroduced},
		{Name: "flaky one", Origin: validation.OriginFlaky},
	}}
	for _, tc := range []struct {
		a    excerpt.Annotation
		want string
	}{
		{excerpt.Annotation{Path: "a.js", StartLine: 3, Title: "x", Level: excerpt.LevelFailure}, "notice"},
		{excerpt.Annotation{Path: "a.js", StartLine: 9, Title: "x", Level: excerpt.LevelFailure}, "failure"},
		{excerpt.Annotation{Path: "b.js", StartLine: 1, Title: "flaky one", Level: excerpt.LevelFailure}, "notice"},
		{excerpt.Annotation{Path: "c.js", StartLine: 1, Title: "other", Level: excerpt.LevelWarning}, "warning"},
	} {
		if got := annotationLevel(st, tc.a); got != tc.want {
			t.Errorf("%s:%d %q: level %s, want %s", tc.a.Path, tc.a.StartLine, tc.a.Title, got, tc.want)
		}
	}
	st.Origin = validation.OriginPreexisting
	if got := annotationLevel(st, excerpt.Annotation{Path: "c.js", StartLine: 1, Title: "other", Level: excerpt.LevelFailure}); got != "notice" {
		t.Errorf("an unmatched annotation of a preexisting step is %s, want notice", got)
	}
}

// TestOriginConfig: the three keys parse; a conclusion gilf does not give
// is an error with its line and what is allowed.
func TestOriginConfig(t *testing.T) {
	fc := ParseRepoConfig([]byte("validation:\n  preexisting: failure\n  compareBase: false\n  retryFlaky: false\n"))
	if len(fc.Errors) > 0 || fc.Config.Validation.Preexisting != PreexistingFailure ||
		*fc.Config.Validation.CompareBase || *fc.Config.Validation.RetryFlaky {
		t.Errorf("parsed %+v, %v", fc.Config.Validation, fc.Errors)
	}
	fc = ParseRepoConfig([]byte("validation:\n  preexisting: success\n"))
	if len(fc.Errors) != 1 || !strings.Contains(fc.Problems(), "line 2, validation.preexisting") || !strings.Contains(fc.Problems(), "allowed: neutral, failure") {
		t.Errorf("problems %q, want one at line 2 naming the allowed values", fc.Problems())
	}
	fc = ParseRepoConfig([]byte("validation:\n  retryFlaky: sometimes\n"))
	if len(fc.Errors) == 0 {
		t.Error("retryFlaky: sometimes was accepted")
	}
}
