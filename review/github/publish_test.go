package github

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

const headSHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

func pub(job string) Publication {
	return Publication{
		JobID: job, HeadSHA: headSHA, Body: "## gilf\nAll checks ran.", Event: EventComment,
		Conclusion: ConclusionFailure, Title: "1 step failed", Summary: "test failed",
	}
}

func TestPublish(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	posted, err := e.c.Publish(context.Background(), e.repo, 1347, pub("42"))
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if posted.ReviewID == 0 || posted.CheckRunID == 0 || posted.ReviewFound || posted.CheckRunFound {
		t.Errorf("Posted = %+v", posted)
	}
	reqs := e.srv.Requests()
	if diff := cmp.Diff([]string{
		"GET /repos/octocat/Hello-World/pulls/1347",
		"GET /repos/octocat/Hello-World/pulls/1347/reviews",
		"POST /repos/octocat/Hello-World/pulls/1347/reviews",
		"GET /repos/octocat/Hello-World/commits/" + headSHA + "/check-runs",
		"POST /repos/octocat/Hello-World/check-runs",
	}, calls(reqs, githubtest.GetPull, githubtest.ListReviews, githubtest.CreateReview, githubtest.ListCheckRuns, githubtest.CreateCheckRun)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	var review, check githubtest.Request
	for _, r := range e.srv.Posted() {
		switch r.Endpoint {
		case githubtest.CreateReview:
			review = r
		case githubtest.CreateCheckRun:
			check = r
		}
	}
	wantReview := map[string]any{
		"commit_id": headSHA,
		"body":      "<!-- gilf:summary -->\n<!-- gilf:job=42 -->\n<!-- gilf:head sha=" + headSHA + " title=1+step+failed -->\n## gilf\nAll checks ran.",
		"event":     "COMMENT",
	}
	if diff := cmp.Diff(wantReview, review.Body); diff != "" {
		t.Errorf("review body (-want +got):\n%s", diff)
	}
	completed, _ := check.Body["completed_at"].(string)
	if completed == "" {
		t.Errorf("check run has no completed_at: %v", check.Body)
	}
	wantCheck := map[string]any{
		"name": "gilf", "head_sha": headSHA, "external_id": "42", "status": "completed", "conclusion": "failure",
		"completed_at": completed,
		"output":       map[string]any{"title": "1 step failed", "summary": "test failed"},
	}
	if diff := cmp.Diff(wantCheck, check.Body); diff != "" {
		t.Errorf("check run body (-want +got):\n%s", diff)
	}
	lr := calls(reqs, githubtest.ListCheckRuns)
	if len(lr) != 1 {
		t.Fatalf("list check runs calls: %v", lr)
	}
	for _, r := range reqs {
		if r.Endpoint == githubtest.ListCheckRuns && (r.Query.Get("check_name") != "gilf" || r.Query.Get("app_id") != "4242") {
			t.Errorf("check-run lookup query = %v", r.Query)
		}
	}

	// The same job again (a retry after a crash): nothing new is posted.
	again, err := e.c.Publish(context.Background(), e.repo, 1347, pub("42"))
	if err != nil {
		t.Fatalf("second Publish: %v", err)
	}
	if !again.ReviewFound || !again.CheckRunFound || again.ReviewID != posted.ReviewID || again.CheckRunID != posted.CheckRunID {
		t.Errorf("second Publish = %+v, want the first post found (%+v)", again, posted)
	}
	if n := len(e.srv.Posted()); n != 3 { // one token mint, one review, one check run
		t.Errorf("%d POSTs in all, want 3", n)
	}
}

func TestPublishStaleHead(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	e.srv.SetHeadSHA("ffffffffffffffffffffffffffffffffffffffff")
	_, err := e.c.Publish(context.Background(), e.repo, 1347, pub("42"))
	if !errors.Is(err, ErrStaleHead) {
		t.Fatalf("error = %v, want ErrStaleHead", err)
	}
	var se *StaleHeadError
	if !errors.As(err, &se) || se.Want != headSHA || se.Got != "ffffffffffffffffffffffffffffffffffffffff" {
		t.Errorf("StaleHeadError = %+v", se)
	}
	if n := e.srv.Count(githubtest.CreateReview) + e.srv.Count(githubtest.CreateCheckRun); n != 0 {
		t.Errorf("%d posts for a stale head", n)
	}
}

// TestPublishLandedThen502: the review POST lands but the answer is lost
// (502). The retry looks first, finds the marker and does not post again.
func TestPublishLandedThen502(t *testing.T) {
	for _, ep := range []githubtest.Endpoint{githubtest.CreateReview, githubtest.CreateCheckRun} {
		t.Run(string(ep), func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			e.srv.Fail(ep, githubtest.Fault{Kind: githubtest.LandThenStatus, Status: 502})
			posted, err := e.c.Publish(context.Background(), e.repo, 1347, pub("9"))
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if len(e.srv.Reviews()) != 1 || len(e.srv.CheckRuns()) != 1 {
				t.Errorf("%d reviews, %d check runs; want exactly one each", len(e.srv.Reviews()), len(e.srv.CheckRuns()))
			}
			if n := e.srv.Count(ep); n != 1 {
				t.Errorf("%d POSTs to %s, want 1", n, ep)
			}
			found := posted.ReviewFound
			if ep == githubtest.CreateCheckRun {
				found = posted.CheckRunFound
			}
			if !found {
				t.Errorf("Posted = %+v: the landed post was not reported as found", posted)
			}
		})
	}
}

// TestPublish502NotLanded: a POST that failed before landing is retried
// after looking, and posts once.
func TestPublish502NotLanded(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	e.srv.Fail(githubtest.CreateReview, githubtest.Fault{Kind: githubtest.Status, Status: 502, Times: 2})
	if _, err := e.c.Publish(context.Background(), e.repo, 1347, pub("9")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if n := e.srv.Count(githubtest.CreateReview); n != 3 {
		t.Errorf("%d review POSTs, want 3", n)
	}
	if n := e.srv.Count(githubtest.ListReviews); n != 3 {
		t.Errorf("%d review listings, want one before each POST (3)", n)
	}
	if len(e.srv.Reviews()) != 1 {
		t.Errorf("%d reviews", len(e.srv.Reviews()))
	}
}

// TestMarkerInAHumanReview: a person quoting the marker does not stop
// gilf from posting.
func TestMarkerInAHumanReview(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, func(c *Config) { c.BotLogin = "" })
	// The real list-reviews example has a review by octocat (type User);
	// make a human review carry job 5's marker by posting as the test.
	ctx := context.Background()
	if _, _, err := e.c.PostReview(ctx, e.repo, 1347, pub("5")); err != nil {
		t.Fatal(err)
	}
	id, found, err := e.c.PostReview(ctx, e.repo, 1347, pub("5"))
	if err != nil || !found || id == 0 {
		t.Fatalf("a bot review with the marker must be found: %d %v %v", id, found, err)
	}
	human := newEnv(t, githubtest.Options{}, func(c *Config) { c.BotLogin = "someone-else[bot]" })
	if _, _, err := human.c.PostReview(ctx, human.repo, 1347, pub("5")); err != nil {
		t.Fatal(err)
	}
	_, found, err = human.c.PostReview(ctx, human.repo, 1347, pub("5"))
	if err != nil || found {
		t.Errorf("a review by another account suppressed the post: found=%v err=%v", found, err)
	}
}

func TestPublishValidation(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Publication)
	}{
		{name: "job id with a comment terminator", mod: func(p *Publication) { p.JobID = "1 --> <b>" }},
		{name: "empty job id", mod: func(p *Publication) { p.JobID = "" }},
		{name: "approve is never posted", mod: func(p *Publication) { p.Event = "APPROVE" }},
		{name: "unknown conclusion", mod: func(p *Publication) { p.Conclusion = "cancelled" }},
		{name: "no head sha", mod: func(p *Publication) { p.HeadSHA = "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			p := pub("1")
			tc.mod(&p)
			_, err := e.c.Publish(context.Background(), e.repo, 1347, p)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("error = %v, want ErrInvalidInput", err)
			}
			if n := len(e.srv.Requests()); n != 0 {
				t.Errorf("%d requests for an invalid publication", n)
			}
		})
	}
}

func TestPublishSizeLimits(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	p := pub("77")
	p.Body = strings.Repeat("é", MaxReviewBodyBytes) // 2 bytes each
	p.Summary = strings.Repeat("s", MaxCheckSummaryBytes+1)
	p.Title = strings.Repeat("t", MaxCheckTitleBytes+10) + "\nsecond line"
	if _, err := e.c.Publish(context.Background(), e.repo, 1347, p); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for _, r := range e.srv.Posted() {
		switch r.Endpoint {
		case githubtest.CreateReview:
			body := r.Body["body"].(string)
			if len(body) > MaxReviewBodyBytes || !utf8.ValidString(body) || !strings.HasPrefix(body, SummaryMarker+"\n"+Marker("77")+"\n") || !strings.HasSuffix(body, truncatedNote) {
				t.Errorf("review body: %d bytes, valid=%v, prefix %q", len(body), utf8.ValidString(body), body[:30])
			}
		case githubtest.CreateCheckRun:
			out := r.Body["output"].(map[string]any)
			if s := out["summary"].(string); len(s) > MaxCheckSummaryBytes {
				t.Errorf("summary %d bytes", len(s))
			}
			if s := out["title"].(string); len(s) > MaxCheckTitleBytes || strings.Contains(s, "\n") {
				t.Errorf("title %d bytes: %q", len(s), s[len(s)-20:])
			}
		}
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "exactly at", in: "abcd", max: 4, want: "abcd"},
		{name: "under", in: "ab", max: 4, want: "ab"},
		{name: "one over, tiny max", in: "abcde", max: 4, want: "abcd"},
		{name: "rune boundary, tiny max", in: "aé", max: 2, want: "a"},
		{name: "one over keeps the note", in: strings.Repeat("x", 101), max: 100, want: strings.Repeat("x", 100-len(truncatedNote)) + truncatedNote},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := clip(tc.in, tc.max); got != tc.want || len(got) > tc.max {
				t.Errorf("clip = %q (%d bytes), want %q", got, len(got), tc.want)
			}
		})
	}
}
