package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

// fakeGitHub serves one pull request from memory; the real client is tested
// against a fake GitHub server in review/github and end to end in cmd/gilf.
type fakeGitHub struct {
	mu       sync.Mutex
	pr       PR
	files    []ChangedFile
	config   string // .github/gilf.yml on the base branch; "" = absent
	manifest string // package.json of the head
	heads    []string
	reads    int
	posted   []Publication
	postErr  error
	// tree are more files of the head, by slash path.
	tree map[string]string
	// progress records check-run progress when set (a ProgressPublisher).
	progress *[]CheckProgress
	finished []Publication // check runs finished alone
}

// progressGitHub is a fakeGitHub whose publisher also shows progress and
// finishes check runs alone.
type progressGitHub struct{ *fakeGitHub }

func (g progressGitHub) FinishCheck(ctx context.Context, j Job, p Publication) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.finished = append(g.finished, p)
	return nil
}

func (g progressGitHub) Progress(ctx context.Context, j Job, p CheckProgress) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.posted) > 0 {
		return errors.New("progress after the check run completed")
	}
	*g.progress = append(*g.progress, p)
	return nil
}

func (g *fakeGitHub) PullRequest(ctx context.Context, j Job) (PR, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pr := g.pr
	if g.reads < len(g.heads) {
		pr.HeadSHA = g.heads[g.reads]
	}
	g.reads++
	return pr, nil
}

func (g *fakeGitHub) ChangedFiles(ctx context.Context, j Job) ([]ChangedFile, error) {
	return g.files, nil
}

func (g *fakeGitHub) BaseFile(ctx context.Context, j Job, ref, path string) ([]byte, bool, error) {
	if path == ConfigPath && g.config != "" {
		return []byte(g.config), true, nil
	}
	return nil, false, nil
}

func (g *fakeGitHub) Checkout(ctx context.Context, j Job, sha, dst string) (string, error) {
	root := filepath.Join(dst, "o-r-"+sha)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	if g.manifest != "" {
		if err := os.WriteFile(filepath.Join(root, "package.json"), []byte(g.manifest), 0o644); err != nil {
			return "", err
		}
	}
	for name, body := range g.tree {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return root, nil
}

func (g *fakeGitHub) Publish(ctx context.Context, j Job, p Publication) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.postErr != nil {
		return g.postErr
	}
	g.posted = append(g.posted, p)
	return nil
}

const head = "0123456789abcdef0123456789abcdef01234567"

func newTestPipeline(t *testing.T, g *fakeGitHub, set executors.Set) *Pipeline {
	t.Helper()
	p, err := NewPipeline(Pipeline{
		PRs: g, Checkouts: g, Publisher: g, Executors: set,
		Selection: executors.Selection{Executor: "e2b"},
		WorkDir:   t.TempDir(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPipelineEndings(t *testing.T) {
	code := []ChangedFile{{Name: "src/index.js"}}
	failing := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: map[string]executortest.Script{
		validation.StepTest: {Status: validation.StatusFailed, Exit: 1, Output: "not ok 1\n"},
	}}
	tests := []struct {
		name           string
		job            Job
		gh             fakeGitHub
		set            executors.Set
		wantOutcome    validation.Outcome
		wantConclusion string // "" = nothing posted
		wantEvent      string
		wantStale      bool
		wantInBody     string
		wantOperator   validation.Code
		wantNoReview   bool
	}{
		{
			name: "no installation is refused, nothing posted", job: Job{ID: 1, Owner: "o", Repo: "r", HeadSHA: head},
			wantOutcome: validation.OutcomeRefused,
		},
		{
			name: "docs-only diff is skipped", gh: fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "README.md"}}},
			wantOutcome: validation.OutcomeSkipped, wantConclusion: ConclusionNeutral, wantInBody: "docs-only",
		},
		{
			name: "draft is skipped: the check run says so, no review", gh: fakeGitHub{pr: PR{HeadSHA: head, Draft: true}, files: code},
			wantOutcome: validation.OutcomeSkipped, wantConclusion: ConclusionSkipped, wantInBody: "draft", wantNoReview: true,
		},
		{
			name: "draft validated when the repository says review.drafts", gh: fakeGitHub{pr: PR{HeadSHA: head, Draft: true}, files: code,
				manifest: `{"scripts":{"test":"node t.js"}}`, config: "review:\n  drafts: true\n"},
			set:         executors.Set{failing},
			wantOutcome: validation.OutcomeFailed, wantConclusion: ConclusionFailure,
		},
		{
			name: "execution never is skipped", gh: fakeGitHub{pr: PR{HeadSHA: head}, files: code, config: "execution:\n  mode: never\n"},
			wantOutcome: validation.OutcomeSkipped, wantConclusion: ConclusionNeutral,
		},
		{
			name: "deleted fork is refused", gh: fakeGitHub{pr: PR{HeadSHA: head, HeadRepoMissing: true}, files: code},
			wantOutcome: validation.OutcomeRefused, wantConclusion: ConclusionActionRequired,
		},
		{
			name: "unconfigured executor is gilf's error, never run elsewhere", gh: fakeGitHub{pr: PR{HeadSHA: head}, files: code, manifest: `{"scripts":{"test":"node t.js"}}`},
			set:         executors.Set{&executortest.Fake{ExecName: executors.NameLocal}},
			wantOutcome: validation.OutcomeError, wantConclusion: ConclusionNeutral, wantInBody: "The operator of this gilf installation must act",
			wantOperator: validation.CodeExecutorUnconfigured,
		},
		{
			name: "an invalid config runs nothing and says where", gh: fakeGitHub{pr: PR{HeadSHA: head}, files: code, manifest: `{"scripts":{"test":"node t.js"}}`,
				config: "execution:\n  mode: nevr\n"},
			set:         executors.Set{failing},
			wantOutcome: validation.OutcomeRefused, wantConclusion: ConclusionActionRequired, wantInBody: "line 2, execution.mode",
		},
		{
			name: "no manifest is a gap", gh: fakeGitHub{pr: PR{HeadSHA: head}, files: code},
			set:         executors.Set{failing},
			wantOutcome: validation.OutcomeGap, wantConclusion: ConclusionNeutral,
		},
		{
			name: "failed test posts a failure with REQUEST_CHANGES when configured",
			gh: fakeGitHub{pr: PR{HeadSHA: head}, files: code, manifest: `{"scripts":{"test":"node t.js"}}`,
				config: "review:\n  requestChanges: true\n"},
			set:         executors.Set{failing},
			wantOutcome: validation.OutcomeFailed, wantConclusion: ConclusionFailure, wantEvent: "REQUEST_CHANGES", wantInBody: "not ok 1",
		},
		{
			name: "head moved during validation: recorded, not posted",
			gh:   fakeGitHub{pr: PR{HeadSHA: head}, heads: []string{head, "ffff"}, files: code, manifest: `{"scripts":{"test":"node t.js"}}`},
			set:  executors.Set{failing}, wantOutcome: validation.OutcomeFailed, wantStale: true,
		},
		{
			name: "head moved before validation: nothing runs",
			gh:   fakeGitHub{pr: PR{HeadSHA: "ffff"}, files: code}, wantOutcome: validation.OutcomeSkipped, wantStale: true,
		},
	}
	for i := range tests {
		tt := &tests[i] // fakeGitHub holds a mutex: never copy it
		t.Run(tt.name, func(t *testing.T) {
			job := tt.job
			if job.ID == 0 {
				job = Job{ID: 9, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head}
			}
			p := newTestPipeline(t, &tt.gh, tt.set)
			var operator []validation.Code
			p.OperatorErrors = func(c validation.Code) { operator = append(operator, c) }
			res, err := p.Run(context.Background(), job)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Record.Outcome != tt.wantOutcome {
				t.Fatalf("outcome %s (%s), want %s", res.Record.Outcome, res.Record.Reason, tt.wantOutcome)
			}
			if tt.wantOperator != "" && (len(operator) != 1 || operator[0] != tt.wantOperator) || tt.wantOperator == "" && len(operator) != 0 {
				t.Errorf("operator errors counted %v, want [%s]", operator, tt.wantOperator)
			}
			if res.Stale != tt.wantStale {
				t.Errorf("stale = %v, want %v", res.Stale, tt.wantStale)
			}
			if tt.wantConclusion == "" {
				if len(tt.gh.posted) != 0 {
					t.Fatalf("posted %+v, want nothing", tt.gh.posted)
				}
				return
			}
			if len(tt.gh.posted) != 1 {
				t.Fatalf("posted %d times, want once", len(tt.gh.posted))
			}
			got := tt.gh.posted[0]
			if got.NoReview != tt.wantNoReview {
				t.Errorf("NoReview = %v, want %v", got.NoReview, tt.wantNoReview)
			}
			if got.Conclusion != tt.wantConclusion || got.HeadSHA != head {
				t.Errorf("posted conclusion %s for %s, want %s", got.Conclusion, got.HeadSHA, tt.wantConclusion)
			}
			wantEvent := tt.wantEvent
			if wantEvent == "" {
				wantEvent = "COMMENT"
			}
			if got.Event != wantEvent {
				t.Errorf("event %s, want %s", got.Event, wantEvent)
			}
			if !strings.Contains(got.Body, "<!-- gilf:job=9 -->") || !strings.Contains(got.Body, tt.wantInBody) {
				t.Errorf("body lacks the job marker or %q:\n%s", tt.wantInBody, got.Body)
			}
		})
	}
}

func TestPipelinePublishErrors(t *testing.T) {
	job := Job{ID: 9, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head}
	g := &fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "README.md"}}, postErr: errors.New("502")}
	if _, err := newTestPipeline(t, g, nil).Run(context.Background(), job); err == nil {
		t.Error("a failed post must be an error, so the job is retried")
	}
	g.postErr = ErrStaleHead
	res, err := newTestPipeline(t, g, nil).Run(context.Background(), job)
	if err != nil || !res.Stale || res.Posted {
		t.Errorf("stale head at post time: res=%+v err=%v", res, err)
	}
}

// The repository's nested crabbox and e2b objects reach the executor, run
// values winning over the worker's (SPEC §3.1).
func TestPipelinePassesRunConfig(t *testing.T) {
	fake := &executortest.Fake{ExecName: executors.NameManagedE2B}
	g := &fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "index.js"}}, manifest: `{"scripts":{"test":"node t.js"}}`,
		config: "validation:\n  e2b:\n    template: node-22\n    timeoutMs: 60000\n  crabbox:\n    class: large\n"}
	p := newTestPipeline(t, g, executors.Set{fake})
	p.Worker = ValidationConfig{Crabbox: CrabboxConfig{Provider: "aws", Class: "small"}, E2B: E2BConfig{Template: "base"}}
	if _, err := p.Run(context.Background(), Job{ID: 1, InstallationID: 2, Owner: "o", Repo: "r", Number: 3, HeadSHA: head}); err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("executor ran %d times", len(reqs))
	}
	want := executors.RunConfig{CrabboxProvider: "aws", CrabboxClass: "large", E2BTemplate: "node-22", E2BTimeout: time.Minute}
	if reqs[0].Run != want {
		t.Errorf("run config %+v, want %+v", reqs[0].Run, want)
	}
}

// The check run is created queued, moves to in_progress with started_at
// and names each step as it starts, before it completes with the first
// failure in its summary and annotations at the failing lines of files
// that exist in the checkout — changed files first.
func TestPipelineCheckRunLifecycle(t *testing.T) {
	tscOut := "lib/old.ts(1,1): error TS1005: ';' expected.\n" +
		"src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n" +
		"src/gone.ts(9,1): error TS2304: Cannot find name 'x'.\n"
	exec := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: map[string]executortest.Script{
		validation.StepTypecheck: {Status: validation.StatusFailed, Exit: 2, Output: tscOut},
	}}
	var progress []CheckProgress
	g := &fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "src/a.ts"}},
		manifest: `{"scripts":{"typecheck":"tsc --noEmit","test":"node t.js"}}`,
		tree:     map[string]string{"src/a.ts": "x\ny\nconst n: number = 's'\n", "lib/old.ts": "x"},
		progress: &progress}
	p := newTestPipeline(t, g, executors.Set{exec})
	p.Publisher = progressGitHub{g}
	p.DetailsURL = func(j Job) string { return "https://gilf.example/dashboard/jobs/" + j.PublicationID() }
	res, err := p.Run(context.Background(), Job{ID: 4, Rerun: 2, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head})
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.Outcome != validation.OutcomeFailed {
		t.Fatalf("outcome %s", res.Record.Outcome)
	}
	var statuses []string
	for _, pr := range progress {
		statuses = append(statuses, pr.Status)
		if pr.DetailsURL != "https://gilf.example/dashboard/jobs/4.2" || pr.HeadSHA != head {
			t.Errorf("progress %+v lacks the head or the details URL", pr)
		}
	}
	if len(statuses) < 2 || statuses[0] != StatusQueued || statuses[1] != StatusInProgress {
		t.Fatalf("progress statuses %v, want queued then in_progress", statuses)
	}
	last := progress[len(progress)-1]
	if last.StartedAt.IsZero() || !strings.Contains(last.Summary, "running") {
		t.Errorf("last progress %+v: want started_at and the running step", last)
	}
	if len(g.posted) != 1 {
		t.Fatalf("posted %d", len(g.posted))
	}
	pub := g.posted[0]
	if !strings.Contains(pub.Body, "<!-- gilf:job=4.2 -->") {
		t.Errorf("the body carries no marker of this re-run")
	}
	if !strings.Contains(pub.Summary, "First failure") || !strings.Contains(pub.Summary, "TS1005") {
		t.Errorf("summary does not open on the first failure:\n%s", pub.Summary)
	}
	if pub.Text == "" || strings.Contains(pub.Text, "gilf:job=") {
		t.Errorf("text is empty or carries the marker")
	}
	var at []string
	for _, a := range pub.Annotations {
		at = append(at, fmt.Sprintf("%s:%d %s", a.Path, a.StartLine, a.Level))
	}
	if want := []string{"src/a.ts:3 failure", "lib/old.ts:1 failure"}; !slices.Equal(at, want) {
		t.Errorf("annotations %v, want %v (changed file first, no missing file)", at, want)
	}
	if pub.DetailsURL != "https://gilf.example/dashboard/jobs/4.2" {
		t.Errorf("details url %q", pub.DetailsURL)
	}
}

// A repository's validation.env reaches the plan the executor runs.
func TestPipelinePassesRepoEnv(t *testing.T) {
	fake := &executortest.Fake{ExecName: executors.NameManagedE2B}
	g := &fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "index.js"}}, manifest: `{"scripts":{"test":"node t.js"}}`,
		config: "validation:\n  env:\n    FORCE_COLOR: \"0\"\n"}
	if _, err := newTestPipeline(t, g, executors.Set{fake}).Run(context.Background(), Job{ID: 1, InstallationID: 2, Owner: "o", Repo: "r", Number: 3, HeadSHA: head}); err != nil {
		t.Fatal(err)
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Plan.Env["FORCE_COLOR"] != "0" {
		t.Errorf("plan env not passed: %+v", reqs)
	}
}

// A head that moves on during validation is recorded, not posted, and its
// check run, started in progress, is completed neutral: none is left
// running on the old commit.
func TestPipelineStaleHeadFinishesItsCheckRun(t *testing.T) {
	exec := &executortest.Fake{ExecName: executors.NameManagedE2B}
	var progress []CheckProgress
	g := &fakeGitHub{pr: PR{HeadSHA: head}, heads: []string{head, "ffff"}, files: []ChangedFile{{Name: "index.js"}},
		manifest: `{"scripts":{"test":"node t.js"}}`, progress: &progress}
	p := newTestPipeline(t, g, executors.Set{exec})
	p.Publisher = progressGitHub{g}
	res, err := p.Run(context.Background(), Job{ID: 3, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head})
	if err != nil || !res.Stale {
		t.Fatalf("Run: stale %v, err %v", res.Stale, err)
	}
	if len(g.posted) != 0 {
		t.Errorf("a stale head's review was posted")
	}
	if len(progress) == 0 {
		t.Fatalf("no progress was shown before the head moved")
	}
	if len(g.finished) != 1 || g.finished[0].Conclusion != ConclusionNeutral || !g.finished[0].NoReview ||
		!strings.Contains(g.finished[0].Summary, "ffff") || g.finished[0].HeadSHA != head {
		t.Errorf("finished %+v, want one neutral check run on the old head naming the new one", g.finished)
	}
}

// fakeReviewer answers with fixed findings and counts its calls.
type fakeReviewer struct {
	calls int
	out   SemanticOutput
	err   error
}

func (r *fakeReviewer) Review(ctx context.Context, in SemanticInput) (SemanticOutput, error) {
	r.calls++
	return r.out, r.err
}

// The semantic review runs after validation unless the skip rule says
// not to, and says in the record whether it ran and why not; its findings
// never change the outcome or the conclusion.
func TestPipelineSemanticReview(t *testing.T) {
	failing := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: map[string]executortest.Script{
		validation.StepTest: {Status: validation.StatusFailed, Exit: 1, Output: "not ok 1\n"},
	}}
	patch := "@@ -1,2 +1,3 @@\n a\n+b\n c"
	for _, tt := range []struct {
		name         string
		skip         bool
		err          error
		wantCalls    int
		wantNote     string
		wantInBody   string
		wantComments int
	}{
		{"flag off: a failed validation never disables the model", false, nil, 1, "semantic review: ran (model m1)", "### Semantic review", 1},
		{"flag on with a high finding: skipped", true, nil, 0, "semantic review: not run", "The model was not asked", 0},
		{"the model fails: recorded, the review posts", false, errors.New("boom"), 1, "semantic review: the model's answer could not be used", "The model was not asked", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "index.js", Patch: patch}}, manifest: `{"scripts":{"test":"node t.js"}}`}
			p := newTestPipeline(t, g, executors.Set{failing})
			r := &fakeReviewer{err: tt.err, out: SemanticOutput{Usage: TokenUsage{Model: "m1", PromptTokens: 10}, Findings: []SemanticFinding{
				{Severity: validation.SeverityHigh, Path: "index.js", Line: 2, Title: "on a changed line", Body: "b"},
				{Severity: validation.SeverityLow, Path: "index.js", Line: 9, Title: "elsewhere", Body: "x"},
			}}}
			p.Reviewer, p.SkipSemanticOnValidationFailure = r, tt.skip
			res, err := p.Run(context.Background(), Job{ID: 2, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head})
			if err != nil {
				t.Fatal(err)
			}
			if r.calls != tt.wantCalls {
				t.Errorf("model called %d times, want %d", r.calls, tt.wantCalls)
			}
			if res.Record.Outcome != validation.OutcomeFailed || g.posted[0].Conclusion != ConclusionFailure {
				t.Errorf("outcome %s / conclusion %s: the model must not change them", res.Record.Outcome, g.posted[0].Conclusion)
			}
			if !slices.ContainsFunc(res.Record.Notes, func(n string) bool { return strings.HasPrefix(n, tt.wantNote) }) {
				t.Errorf("record notes %q lack %q", res.Record.Notes, tt.wantNote)
			}
			if !strings.Contains(g.posted[0].Body, tt.wantInBody) {
				t.Errorf("body lacks %q:\n%s", tt.wantInBody, g.posted[0].Body)
			}
			if got := len(g.posted[0].Comments); got != tt.wantComments {
				t.Errorf("%d inline comments, want %d", got, tt.wantComments)
			}
		})
	}
}

// The semantic review's model call becomes a cost span of the semantic
// lane, priced by its tokens with the model's card, and a line of the
// review's cost table; the record note keeps the token counts.
func TestPipelineSemanticCostSpan(t *testing.T) {
	passing := &executortest.Fake{ExecName: executors.NameManagedE2B}
	cards := costs.Cards{costs.ModelCardKey("m1"): {InputUsdPerMTok: 0.4, OutputUsdPerMTok: 1.6}}
	usage := TokenUsage{Model: "m1", PromptTokens: 1234, CompletionTokens: 567, TotalTokens: 1801}
	priced := 1234/1e6*0.4 + 567/1e6*1.6
	for _, tt := range []struct {
		name     string
		cards    costs.Cards
		out      SemanticOutput
		err      error
		wantSpan bool
		wantUSD  *float64
		wantExec string
		wantRow  string // the row of the cost table
	}{
		{"priced with the model's card", cards, SemanticOutput{Usage: usage}, nil, true, &priced, "model:m1",
			"| semantic | `model:m1` | ≈ $0.0014 (estimate) | estimate: 1,234 input + 567 output tokens |"},
		{"no card: no estimate, never $0", costs.Cards{}, SemanticOutput{Usage: usage}, nil, true, nil, "model:m1",
			"| semantic | `model:m1` | no estimate | no estimate: no rate card for model:m1 |"},
		{"a failed answer still spent its tokens", cards, SemanticOutput{Usage: usage}, errors.New("bad JSON"), true, &priced, "model:m1",
			"| semantic | `model:m1` | ≈ $0.0014 (estimate) | estimate: 1,234 input + 567 output tokens |"},
		{"a failure without usage has no span", cards, SemanticOutput{}, errors.New("503"), false, nil, "", ""},
		{"no model named: model:unknown, never priced", cards, SemanticOutput{Usage: TokenUsage{PromptTokens: 10, CompletionTokens: 2}}, nil, true, nil, "model:unknown",
			"| semantic | `model:unknown` | no estimate | no estimate: the endpoint named no model |"},
		{"no token counts: no estimate", cards, SemanticOutput{Usage: TokenUsage{Model: "m1"}}, nil, true, nil, "model:m1",
			"| semantic | `model:m1` | no estimate | no estimate: the endpoint reported no token counts |"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "index.js", Patch: "@@ -1 +1 @@\n-a\n+b"}}, manifest: `{"scripts":{"test":"node t.js"}}`}
			p := newTestPipeline(t, g, executors.Set{passing})
			p.Hooks = &Stages{Cards: tt.cards, Logger: slog.New(slog.DiscardHandler)}
			p.Reviewer = &fakeReviewer{out: tt.out, err: tt.err}
			before := time.Now()
			res, err := p.Run(context.Background(), Job{ID: 3, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head})
			if err != nil {
				t.Fatal(err)
			}
			var sem []costs.Span
			for _, s := range res.Spans {
				if s.Lane == costs.LaneSemantic {
					sem = append(sem, s)
				}
			}
			body := g.posted[0].Body
			if !tt.wantSpan {
				if len(sem) != 0 || strings.Contains(body, "| semantic |") {
					t.Fatalf("semantic spans %+v, want none", sem)
				}
				return
			}
			if len(sem) != 1 {
				t.Fatalf("spans %+v, want one of the semantic lane", res.Spans)
			}
			s := sem[0]
			if s.Executor != tt.wantExec || s.Method != costs.MethodTokens ||
				s.InputTokens != int64(tt.out.Usage.PromptTokens) || s.OutputTokens != int64(tt.out.Usage.CompletionTokens) {
				t.Errorf("span = %+v, want %s with the usage's tokens, by %s", s, tt.wantExec, costs.MethodTokens)
			}
			if s.Started.Before(before) || s.Finished.Before(s.Started) || s.Finished.After(time.Now()) {
				t.Errorf("span times %v–%v are not around the call", s.Started, s.Finished)
			}
			if (s.USD == nil) != (tt.wantUSD == nil) || (s.USD != nil && math.Abs(*s.USD-*tt.wantUSD) > 1e-12) {
				t.Errorf("USD = %v, want %v", s.USD, tt.wantUSD)
			}
			if !strings.Contains(body, tt.wantRow) || !strings.Contains(body, "Estimates from wall-clock time, the model's token counts and published rates") {
				t.Errorf("cost table lacks %q:\n%s", tt.wantRow, body)
			}
			note := fmt.Sprintf("%d prompt and %d completion tokens", tt.out.Usage.PromptTokens, tt.out.Usage.CompletionTokens)
			if tt.err == nil && !slices.ContainsFunc(res.Record.Notes, func(n string) bool { return strings.Contains(n, note) }) {
				t.Errorf("record notes %q lack %q", res.Record.Notes, note)
			}
		})
	}
}
