package main

import (
	"context"
	"strings"

	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
)

// githubConversation fits the client's review threads, replies and
// compare API to the pipeline's Conversation and History.
type githubConversation struct {
	c *github.Client
	// botLogin is gilf's bot ("<slug>[bot]"); empty: any bot's thread
	// with a marker is gilf's.
	botLogin string
}

var (
	_ review.Conversation = githubConversation{}
	_ review.History      = githubConversation{}
)

// Threads reads the review threads. A thread is gilf's when its first
// comment is gilf's bot's (any bot's when the slug is not configured) and
// carries a fingerprint marker (any "<!-- gilf:" in a body gilf posts is
// neutralized); a reply by anyone but a bot is a person's.
func (g githubConversation) Threads(ctx context.Context, j review.Job) ([]review.Thread, error) {
	ts, err := g.c.ReviewThreads(ctx, repoOf(j), j.Number)
	if err != nil {
		return nil, err
	}
	out := make([]review.Thread, 0, len(ts))
	for _, t := range ts {
		if len(t.Comments) == 0 {
			continue
		}
		first := t.Comments[0]
		rt := review.Thread{ID: t.ID, CommentID: first.DatabaseID, Path: t.Path, Line: t.Line,
			Outdated: t.Outdated, Resolved: t.Resolved, Notes: map[string]bool{}}
		if first.Bot && (g.botLogin == "" || github.IsBotLogin(first.Author, g.botLogin)) {
			rt.Fingerprint = github.FindingOf(first.Body)
			rt.Title = review.ThreadTitle(first.Body)
		}
		for _, c := range t.Comments[1:] {
			if !c.Bot {
				rt.HumanReplied = true
				continue
			}
			if k := github.NoteOf(c.Body); k != "" {
				rt.Notes[k] = true
			}
		}
		out = append(out, rt)
	}
	return out, nil
}

func (g githubConversation) Resolve(ctx context.Context, j review.Job, threadID string) error {
	return g.c.ResolveThread(ctx, repoOf(j), threadID)
}

func (g githubConversation) Reply(ctx context.Context, j review.Job, commentID int64, key, body string) error {
	return g.c.ReplyInThread(ctx, repoOf(j), j.Number, commentID, key, body)
}

func (g githubConversation) SemanticHead(ctx context.Context, j review.Job) (string, error) {
	return g.c.SemanticHead(ctx, repoOf(j), j.Number)
}

func (g githubConversation) Compare(ctx context.Context, j review.Job, base, head string) (review.Comparison, error) {
	c, err := g.c.Compare(ctx, repoOf(j), base, head)
	if err != nil {
		return review.Comparison{}, err
	}
	out := review.Comparison{Status: c.Status, Truncated: c.Truncated}
	for _, f := range c.Files {
		out.Files = append(out.Files, review.ChangedFile{Name: f.Name, Previous: f.Previous, Status: f.Status, Patch: f.Patch})
	}
	return out, nil
}

// fullReviewAsked says whether a re-run's reason asks for the whole pull
// request's semantic review (the review command).
func fullReviewAsked(reason string) bool { return strings.HasPrefix(reason, review.FullReviewReason) }
