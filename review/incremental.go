package review

// Incremental semantic review (issue 33): at a new head the model is sent
// the diff since the last head it reviewed (GitHub's compare API), with
// the earlier findings as context. When that head is not an ancestor of
// the new one (a force-push, a rebase), when the comparison cannot be
// read, or when a command asks for it, the whole pull request is sent.
// The head last reviewed is kept on GitHub, in the summary's header.

import (
	"context"
	"fmt"

	"github.com/gilf-review/gilf/internal/logkey"
)

// History is what the pull request's history on GitHub says.
type History interface {
	// SemanticHead is the head the semantic review last covered, ""
	// when none.
	SemanticHead(ctx context.Context, j Job) (string, error)
	// Compare lists the changes from base to head.
	Compare(ctx context.Context, j Job, base, head string) (Comparison, error)
}

// Comparison is what changed from one commit to another.
type Comparison struct {
	// Status is the compare API's: ahead when base is an ancestor of
	// head; behind, diverged or identical otherwise.
	Status string
	Files  []ChangedFile
	// Truncated: more files changed than the API listed.
	Truncated bool
}

// CompareAhead is the status of a comparison whose base is an ancestor.
const CompareAhead = "ahead"

// FullReviewReason starts the reason of a re-run that asks for the
// semantic review of the whole pull request (the review command): the
// queue sets Job.FullReview from it.
const FullReviewReason = "full semantic review asked"

// scope is what the model is sent at this head.
type scope struct {
	kind  string // ScopeWhole or ScopeIncremental
	diff  Diff
	since string // the head an incremental review starts from
	why   string // why the whole pull request, when it was reviewed before
	// touched are the files the new commits changed (incremental).
	touched map[string]bool
}

// reviewScope decides what the model reads: full is the pull request's
// whole diff, prev the head last reviewed.
func (p *Pipeline) reviewScope(ctx context.Context, j Job, full Diff, prev string) scope {
	whole := func(why string) scope { return scope{kind: ScopeWhole, diff: full, why: why} }
	switch {
	case j.FullReview:
		return whole("a command asked for a review of the whole pull request")
	case p.History == nil || prev == "":
		return whole("")
	case prev == j.HeadSHA:
		return whole("this head was reviewed before (a re-run)")
	}
	cmp, err := p.History.Compare(ctx, j, prev, j.HeadSHA)
	switch {
	case err != nil:
		JobLogger(p.Logger, j).Warn("compare with the last reviewed head failed; reviewing the whole pull request", "since", prev, logkey.Err, err)
		return whole(fmt.Sprintf("the changes since %s could not be read", shortHead(prev)))
	case cmp.Status != CompareAhead:
		return whole(fmt.Sprintf("the last reviewed head %s is not an ancestor of this head (a force-push or a rebase)", shortHead(prev)))
	case cmp.Truncated:
		return whole(fmt.Sprintf("too many files changed since %s to list them", shortHead(prev)))
	}
	// Only the pull request's files: a merge of the base branch brings
	// changes that are not the author's.
	inPR := map[string]bool{}
	for _, f := range full.Files {
		inPR[f.Path] = true
	}
	s := scope{kind: ScopeIncremental, since: prev, touched: map[string]bool{}}
	for _, f := range cmp.Files {
		// Touched counts every file the commits changed: a file the
		// author reverted is no longer in the pull request, and its
		// findings are gone with it.
		s.touched[f.Name] = true
		if !inPR[f.Name] {
			continue
		}
		s.diff.Files = append(s.diff.Files, DiffFile{Path: f.Name, Previous: f.Previous, Status: f.Status, Patch: f.Patch})
	}
	s.diff.Omitted = full.Omitted
	return s
}
