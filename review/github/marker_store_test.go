package github

import (
	"context"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/validation"
)

// TestAnotherStoresMarkerIsNotOurs: a pull request whose head carries an
// older store's posts for its job 1 (the bare marker gilf wrote before
// stores were named, then a reset database's job 1) is published anew by
// this store's job 1: the summary is edited to show it (the old job line
// kept as it was in the history), and the job gets a check run of its
// own; the older store's check run is left alone, not edited.
func TestAnotherStoresMarkerIsNotOurs(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, githubtest.Options{}, nil)
	old, err := e.c.Publish(ctx, e.repo, 1347, pub(validation.MarkerID("", 1, 0)))
	if err != nil {
		t.Fatalf("older store's publish: %v", err)
	}
	ours := validation.MarkerID("0123456789abcdef", 1, 0)
	got, err := e.c.Publish(ctx, e.repo, 1347, pub(ours))
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got.ReviewFound || got.CheckRunFound {
		t.Fatalf("the older store's posts were taken for this store's job: %+v", got)
	}
	if got.CheckRunID == old.CheckRunID {
		t.Errorf("check run %d of the older store was reused", old.CheckRunID)
	}
	if n := e.srv.Count(githubtest.UpdateCheckRun); n != 0 {
		t.Errorf("%d check-run updates: the older store's check run was edited", n)
	}
	var edited githubtest.Request
	for _, r := range e.srv.Requests() {
		if r.Endpoint == githubtest.UpdateReview {
			edited = r
		}
	}
	body, _ := edited.Body["body"].(string)
	if !strings.Contains(body, "<!-- gilf:job="+ours+" -->") || !strings.Contains(body, "job=1 title=") {
		t.Errorf("summary edit does not show this store's job with the older one in its history:\n%s", body)
	}
	// Published again (a retry): now this store's own posts are found.
	again, err := e.c.Publish(ctx, e.repo, 1347, pub(ours))
	if err != nil {
		t.Fatalf("Publish again: %v", err)
	}
	if !again.ReviewFound || !again.CheckRunFound || again.CheckRunID != got.CheckRunID {
		t.Errorf("a retry did not find this store's own posts: %+v", again)
	}
}
