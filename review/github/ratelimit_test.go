package github

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// TestRateLimitRemaining: the hook sees X-RateLimit-Remaining of every
// API answer — the token mint, the call, a primary rate limit's 0 and the
// retry after it — and nothing of answers without the header.
func TestRateLimitRemaining(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	e := newEnv(t, githubtest.Options{}, func(c *Config) {
		c.RateLimitRemaining = func(n int) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, n)
		}
	})
	e.srv.Fail(githubtest.GetPull, githubtest.Fault{Kind: githubtest.PrimaryRateLimit, Reset: e.clock.Now().Add(30 * time.Second)})
	if _, err := e.c.PullRequest(context.Background(), e.repo, 1347); err != nil {
		t.Fatalf("PullRequest: %v", err)
	}
	// 1: the token mint; 0: the rate-limited call; then the retry, the
	// server's third request.
	want := []int{githubtest.RateLimit - 1, 0, githubtest.RateLimit - 3}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("remaining seen (-want +got):\n%s", diff)
	}
}

// TestRateLimitObserverIgnoresMissingHeader: an answer without the header
// (codeload, a proxy's error page) reports nothing.
func TestRateLimitObserverIgnoresMissingHeader(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	called := false
	o := rateLimitObserver{next: e.c.cfg.Transport, observe: func(int) { called = true }}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, e.srv.CodeloadURL+"/nothing", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := o.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if called {
		t.Error("observed a remaining count on an answer without X-RateLimit-Remaining")
	}
}
