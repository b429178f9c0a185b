package review

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

type fakeHistory struct {
	cmp Comparison
	err error
	// asked counts Compare calls.
	asked int
}

func (h *fakeHistory) SemanticHead(ctx context.Context, j Job) (string, error) { return "", nil }
func (h *fakeHistory) Compare(ctx context.Context, j Job, base, head string) (Comparison, error) {
	h.asked++
	return h.cmp, h.err
}

func TestReviewScope(t *testing.T) {
	prev, head := strings.Repeat("a", 40), strings.Repeat("b", 40)
	full := Diff{Files: []DiffFile{{Path: "a.js", Patch: "whole a"}, {Path: "b.js", Patch: "whole b"}}}
	changed := func(names ...string) []ChangedFile {
		var out []ChangedFile
		for _, n := range names {
			out = append(out, ChangedFile{Name: n, Status: "modified", Patch: "since " + n})
		}
		return out
	}
	tests := []struct {
		name     string
		job      Job
		prev     string
		history  *fakeHistory
		kind     string
		why      string // a part of it
		files    []string
		compared bool
	}{
		{"first review", Job{HeadSHA: head}, "", &fakeHistory{}, ScopeWhole, "", []string{"whole a", "whole b"}, false},
		{"the review command", Job{HeadSHA: head, FullReview: true}, prev, &fakeHistory{}, ScopeWhole, "a command asked", []string{"whole a", "whole b"}, false},
		{"a re-run of the reviewed head", Job{HeadSHA: prev}, prev, &fakeHistory{}, ScopeWhole, "a re-run", []string{"whole a", "whole b"}, false},
		{"fast-forward", Job{HeadSHA: head}, prev, &fakeHistory{cmp: Comparison{Status: CompareAhead, Files: changed("a.js")}}, ScopeIncremental, "", []string{"since a.js"}, true},
		{"a merge of the base brings files not in the pull request", Job{HeadSHA: head}, prev,
			&fakeHistory{cmp: Comparison{Status: CompareAhead, Files: changed("a.js", "base-only.js")}}, ScopeIncremental, "", []string{"since a.js"}, true},
		{"force-push", Job{HeadSHA: head}, prev, &fakeHistory{cmp: Comparison{Status: "diverged", Files: changed("a.js")}}, ScopeWhole, "not an ancestor", []string{"whole a", "whole b"}, true},
		{"compare failed (the old head is gone)", Job{HeadSHA: head}, prev, &fakeHistory{err: errors.New("404")}, ScopeWhole, "could not be read", []string{"whole a", "whole b"}, true},
		{"too many files since", Job{HeadSHA: head}, prev, &fakeHistory{cmp: Comparison{Status: CompareAhead, Truncated: true}}, ScopeWhole, "too many files", []string{"whole a", "whole b"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pipeline{History: tt.history, Logger: slog.New(slog.DiscardHandler)}
			sc := p.reviewScope(context.Background(), tt.job, full, tt.prev)
			var got []string
			for _, f := range sc.diff.Files {
				got = append(got, f.Patch)
			}
			if sc.kind != tt.kind || !strings.Contains(sc.why, tt.why) || (tt.why == "") != (sc.why == "") ||
				strings.Join(got, "|") != strings.Join(tt.files, "|") || (tt.history.asked > 0) != tt.compared {
				t.Errorf("scope %+v (compared %d), want %s %q %v", sc, tt.history.asked, tt.kind, tt.why, tt.files)
			}
			if sc.kind == ScopeIncremental && (sc.since != tt.prev || !sc.touched["a.js"] || sc.touched["b.js"]) {
				t.Errorf("incremental scope %+v", sc)
			}
		})
	}
}

// headHistory is a History whose last reviewed head is prev.
type headHistory struct {
	fakeHistory
	prev string
}

func (h *headHistory) SemanticHead(ctx context.Context, j Job) (string, error) { return h.prev, nil }

// A push that changed none of the pull request's files since the last
// reviewed head (a merge of the base branch) does not ask the model, and
// the summary's semantic head moves on; a refused head carries it.
func TestPipelineIncrementalNothingNew(t *testing.T) {
	prev := strings.Repeat("c", 40)
	ok := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: map[string]executortest.Script{
		validation.StepTest: {Status: validation.StatusPassed, Output: "ok\n"},
	}}
	g := &fakeGitHub{pr: PR{HeadSHA: head}, files: []ChangedFile{{Name: "index.js", Patch: "@@ -1 +1 @@\n-a\n+b"}}, manifest: `{"scripts":{"test":"node t.js"}}`}
	p := newTestPipeline(t, g, executors.Set{ok})
	r := &fakeReviewer{}
	p.Reviewer = r
	p.History = &headHistory{prev: prev, fakeHistory: fakeHistory{cmp: Comparison{Status: CompareAhead, Files: []ChangedFile{{Name: "base-only.js"}}}}}
	res, err := p.Run(context.Background(), Job{ID: 2, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head})
	if err != nil {
		t.Fatal(err)
	}
	if r.calls != 0 || g.posted[0].SemanticHead != head ||
		!slices.ContainsFunc(res.Record.Notes, func(n string) bool { return strings.Contains(n, "nothing in the pull request's files changed since") }) {
		t.Errorf("model calls %d, semantic head %q, notes %q", r.calls, g.posted[0].SemanticHead, res.Record.Notes)
	}

	// No executor: refused; the model is not asked, the head is carried.
	g2 := &fakeGitHub{pr: PR{HeadSHA: head}, files: g.files, manifest: g.manifest}
	p2 := newTestPipeline(t, g2, nil)
	p2.Reviewer, p2.History = r, &headHistory{prev: prev}
	if _, err := p2.Run(context.Background(), Job{ID: 3, InstallationID: 5, Owner: "o", Repo: "r", Number: 1, HeadSHA: head}); err != nil {
		t.Fatal(err)
	}
	if r.calls != 0 || g2.posted[0].SemanticHead != prev {
		t.Errorf("refused head: model calls %d, semantic head %q, want %s carried", r.calls, g2.posted[0].SemanticHead, prev)
	}
}
