package github

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// withComments is pub(job) with n inline comments on a.js lines 1..n.
func withComments(job string, n int) Publication {
	p := pub(job)
	for i := range n {
		p.Comments = append(p.Comments, ReviewComment{Path: "a.js", Line: i + 1, Side: SideRight, Body: fmt.Sprintf("finding %d", i+1)})
	}
	return p
}

// commentsRequests returns the posted create-review requests that carry
// comments.
func commentsRequests(e *env) []githubtest.Request {
	var out []githubtest.Request
	for _, r := range e.srv.Posted() {
		if r.Endpoint == githubtest.CreateReview && r.Body["comments"] != nil {
			out = append(out, r)
		}
	}
	return out
}

func TestPublishComments(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	p := pub("42")
	p.Comments = []ReviewComment{
		{Path: "src/app.js", Line: 12, Side: SideRight, Body: "`x` may be undefined here."},
		{Path: "lib/b.go", Line: 3, Body: "quotes a marker: " + Marker("666") + " " + CommentsMarker("666")}, // side defaults to RIGHT
		{Path: "c.py", Line: 7, Body: strings.Repeat("é", MaxReviewCommentBytes)},                            // clipped
	}
	posted, err := e.c.Publish(context.Background(), e.repo, 1347, p)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if posted.CommentsReviewID == 0 || posted.CommentsReviewID == posted.ReviewID || posted.CommentsReviewFound || posted.CommentsSent != 3 {
		t.Errorf("Posted = %+v", posted)
	}
	if diff := cmp.Diff([]string{
		"GET " + prPath,
		"GET " + prPath + "/reviews",
		"POST " + prPath + "/reviews", // summary
		"POST " + prPath + "/reviews", // inline comments
		"GET " + repoPath + "/commits/" + headSHA + "/check-runs",
		"POST " + repoPath + "/check-runs",
	}, sequence(e, 0)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	reqs := commentsRequests(e)
	if len(reqs) != 1 {
		t.Fatalf("%d review POSTs with comments, want 1", len(reqs))
	}
	clipped := clip(strings.Repeat("é", MaxReviewCommentBytes), MaxReviewCommentBytes)
	wantComments := []any{
		map[string]any{"path": "src/app.js", "line": float64(12), "side": "RIGHT", "body": "`x` may be undefined here."},
		map[string]any{"path": "lib/b.go", "line": float64(3), "side": "RIGHT", "body": "quotes a marker: <!-- gilf&#58;job=666 --> <!-- gilf&#58;comments=666 -->"},
		map[string]any{"path": "c.py", "line": float64(7), "side": "RIGHT", "body": clipped},
	}
	want := map[string]any{
		"commit_id": headSHA,
		"event":     "COMMENT",
		"body":      "<!-- gilf:comments=42 -->\n**gilf's semantic review**: 3 comments on the changed lines.",
		"comments":  wantComments,
	}
	if diff := cmp.Diff(want, reqs[0].Body); diff != "" {
		t.Errorf("comments review request (-want +got):\n%s", diff)
	}
	if len(clipped) > MaxReviewCommentBytes || !strings.HasSuffix(clipped, truncatedNote) {
		t.Errorf("clipped comment: %d bytes", len(clipped))
	}
	// What GitHub stored: the same comments, the review a COMMENT on the head.
	if got := e.srv.ReviewComments(posted.CommentsReviewID); len(got) != 3 || got[0]["line"] != 12 || got[1]["side"] != "RIGHT" {
		t.Errorf("stored comments %v", got)
	}
	if rv, _ := e.srv.Review(posted.CommentsReviewID); rv["state"] != "COMMENTED" || rv["commit_id"] != headSHA {
		t.Errorf("comments review %v", rv)
	}
	if sum, _ := e.srv.Review(posted.ReviewID); e.srv.ReviewComments(posted.ReviewID) != nil || !strings.HasPrefix(sum["body"].(string), SummaryMarker) {
		t.Errorf("summary review %v carries comments", sum)
	}

	// A second Publish of the job (a retry after a crash): found, not posted.
	n := len(e.srv.Requests())
	again, err := e.c.Publish(context.Background(), e.repo, 1347, p)
	if err != nil {
		t.Fatalf("second Publish: %v", err)
	}
	if !again.CommentsReviewFound || again.CommentsReviewID != posted.CommentsReviewID || again.CommentsSent != 0 {
		t.Errorf("second Publish = %+v", again)
	}
	if diff := cmp.Diff([]string{
		"GET " + prPath, "GET " + prPath + "/reviews", "GET " + repoPath + "/commits/" + headSHA + "/check-runs",
		fmt.Sprintf("GET %s/check-runs/%d", repoPath, again.CheckRunID),
	}, sequence(e, n)); diff != "" {
		t.Errorf("requests of the retry (-want +got):\n%s", diff)
	}
	if n := len(commentsRequests(e)); n != 1 {
		t.Errorf("%d comments reviews posted", n)
	}
}

// TestPublishCommentsLandedThen502: the comments review lands but its
// answer is lost; the retry lists the reviews, finds the marker and does
// not post again.
func TestPublishCommentsLandedThen502(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	// Skip the summary's POST; fault the comments review's.
	e.srv.Fail(githubtest.CreateReview, githubtest.Fault{Kind: githubtest.LandThenStatus, Status: 502, Skip: 1})
	posted, err := e.c.Publish(context.Background(), e.repo, 1347, withComments("7", 2))
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if !posted.CommentsReviewFound || posted.CommentsReviewID == 0 || posted.CommentsSent != 0 {
		t.Errorf("Posted = %+v: the landed review was not reported as found", posted)
	}
	if diff := cmp.Diff([]string{
		"GET " + prPath,
		"GET " + prPath + "/reviews",
		"POST " + prPath + "/reviews",
		"POST " + prPath + "/reviews", // lands, answers 502
		"GET " + prPath + "/reviews",  // the retry looks first
		"GET " + repoPath + "/commits/" + headSHA + "/check-runs",
		"POST " + repoPath + "/check-runs",
	}, sequence(e, 0)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if len(e.srv.Reviews()) != 2 || len(e.srv.ReviewComments(posted.CommentsReviewID)) != 2 {
		t.Errorf("%d reviews, %d comments", len(e.srv.Reviews()), len(e.srv.ReviewComments(posted.CommentsReviewID)))
	}
}

// TestPublishComments502NotLanded: a comments POST that failed before
// landing is retried after looking, and posts once.
func TestPublishComments502NotLanded(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	e.srv.Fail(githubtest.CreateReview, githubtest.Fault{Kind: githubtest.Status, Status: 502, Skip: 1})
	posted, err := e.c.Publish(context.Background(), e.repo, 1347, withComments("7", 1))
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if posted.CommentsReviewFound || posted.CommentsSent != 1 || len(commentsRequests(e)) != 2 || len(e.srv.Reviews()) != 2 {
		t.Errorf("Posted = %+v, %d comment POSTs, %d reviews", posted, len(commentsRequests(e)), len(e.srv.Reviews()))
	}
	if rv, _ := e.srv.Review(posted.CommentsReviewID); rv["body"] != CommentsMarker("7")+"\n**gilf's semantic review**: 1 comment on the changed lines." {
		t.Errorf("body %q", rv["body"])
	}
}

func TestPublishCommentsCap(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		wantSent int
		wantBody string
	}{
		{name: "at the cap", n: MaxReviewComments, wantSent: MaxReviewComments,
			wantBody: fmt.Sprintf("%s\n**gilf's semantic review**: %d comments on the changed lines.", CommentsMarker("5"), MaxReviewComments)},
		{name: "one over", n: MaxReviewComments + 1, wantSent: MaxReviewComments,
			wantBody: fmt.Sprintf("%s\n**gilf's semantic review**: %d comments on the changed lines.\n\n1 more left out: gilf posts at most %d inline comments per head.", CommentsMarker("5"), MaxReviewComments, MaxReviewComments)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			posted, err := e.c.Publish(context.Background(), e.repo, 1347, withComments("5", tc.n))
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			got := e.srv.ReviewComments(posted.CommentsReviewID)
			if posted.CommentsSent != tc.wantSent || len(got) != tc.wantSent {
				t.Fatalf("sent %d, stored %d, want %d", posted.CommentsSent, len(got), tc.wantSent)
			}
			if last := got[len(got)-1]; last["line"] != MaxReviewComments || last["body"] != fmt.Sprintf("finding %d", MaxReviewComments) {
				t.Errorf("last comment %v: the first %d are kept, in order", last, MaxReviewComments)
			}
			rv, _ := e.srv.Review(posted.CommentsReviewID)
			if diff := cmp.Diff(tc.wantBody, rv["body"]); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPublishNoComments: no comments (or none GitHub would accept), or
// NoReview, posts no comments review.
func TestPublishNoComments(t *testing.T) {
	tests := []struct {
		name        string
		mod         func(*Publication)
		wantReviews int
	}{
		{name: "none", mod: func(p *Publication) { p.Comments = nil }, wantReviews: 1},
		{name: "none sendable", mod: func(p *Publication) {
			p.Comments = []ReviewComment{{Line: 1, Body: "no path"}, {Path: "a.js", Body: "no line"}, {Path: "a.js", Line: 2, Body: " "}, {Path: "a.js", Line: 3, Side: "UP", Body: "x"}}
		}, wantReviews: 1},
		{name: "no review", mod: func(p *Publication) { p.NoReview, p.Event = true, "" }, wantReviews: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			p := withComments("3", 2)
			tc.mod(&p)
			posted, err := e.c.Publish(context.Background(), e.repo, 1347, p)
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if posted.CommentsReviewID != 0 || posted.CommentsSent != 0 || len(commentsRequests(e)) != 0 {
				t.Errorf("Posted = %+v, %d comments reviews", posted, len(commentsRequests(e)))
			}
			if n := e.srv.Count(githubtest.CreateReview); n != tc.wantReviews {
				t.Errorf("%d review POSTs, want %d", n, tc.wantReviews)
			}
		})
	}
}

// TestSendableComments: unsendable comments are not counted against the
// cap, and the cap keeps the first ones in order.
func TestSendableComments(t *testing.T) {
	var in []ReviewComment
	in = append(in, ReviewComment{Path: "", Line: 1, Body: "x"})
	for i := range MaxReviewComments + 2 {
		in = append(in, ReviewComment{Path: "a.js", Line: i + 1, Body: "x"})
	}
	keep, unsendable, over := sendableComments(in)
	if len(keep) != MaxReviewComments || unsendable != 1 || over != 2 || keep[0].Line != 1 {
		t.Errorf("kept %d, unsendable %d, over %d", len(keep), unsendable, over)
	}
}
