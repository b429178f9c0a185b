package github

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// stampTransport records, for each request it carries, the injected
// clock's time: the clock observed by GitHub's side of the wire.
type stampTransport struct {
	next  http.RoundTripper
	clock Clock

	mu     sync.Mutex
	stamps []stamp
}

type stamp struct {
	Path string
	At   time.Duration // since the test's start
}

func (s *stampTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.stamps = append(s.stamps, stamp{Path: req.URL.Path, At: s.clock.Now().Sub(clockEpoch)})
	s.mu.Unlock()
	return s.next.RoundTrip(req)
}

// at lists the times of the requests whose path ends with suffix.
func (s *stampTransport) at(suffix string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, st := range s.stamps {
		if strings.HasSuffix(st.Path, suffix) {
			out = append(out, st.At)
		}
	}
	return out
}

// clockEpoch is the time every test clock here starts at.
var clockEpoch = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

const pullPath = "/pulls/1347"

// TestRateLimitRules: GitHub's rules, with the request times observed
// on the wire by the injected clock (nothing sleeps for real).
func TestRateLimitRules(t *testing.T) {
	s := time.Second
	tests := []struct {
		name    string
		faults  []githubtest.Fault
		want    []time.Duration // times of GET pulls/1347
		wantErr func(error) bool
	}{
		{name: "Retry-After is honoured to the second",
			faults: []githubtest.Fault{{Kind: githubtest.SecondaryRateLimit, RetryAfter: 30 * s}},
			want:   []time.Duration{0, 30 * s}},
		{name: "secondary limit without headers: a minute, then doubling",
			faults: []githubtest.Fault{{Kind: githubtest.SecondaryRateLimit, Times: 3}},
			want:   []time.Duration{0, 60 * s, 180 * s, 420 * s}},
		{name: "429 without headers waits a minute",
			faults: []githubtest.Fault{{Kind: githubtest.Status, Status: http.StatusTooManyRequests}},
			want:   []time.Duration{0, 60 * s}},
		{name: "429 with Retry-After: 5",
			faults: []githubtest.Fault{{Kind: githubtest.Status, Status: http.StatusTooManyRequests, RetryAfter: 5 * s}},
			want:   []time.Duration{0, 5 * s}},
		{name: "403 without headers or reason waits a minute",
			faults: []githubtest.Fault{{Kind: githubtest.Status, Status: http.StatusForbidden}},
			want:   []time.Duration{0, 60 * s}},
		{name: "403 refusing access is not a limit and not retried",
			faults: []githubtest.Fault{{Kind: githubtest.Status, Status: http.StatusForbidden, Message: "Resource not accessible by integration"}},
			want:   []time.Duration{0},
			wantErr: func(err error) bool {
				var le *LimitError
				return statusOf(err) == http.StatusForbidden && !errors.As(err, &le)
			}},
		{name: "primary limit until x-ratelimit-reset",
			faults: []githubtest.Fault{{Kind: githubtest.PrimaryRateLimit, Reset: clockEpoch.Add(45 * s)}},
			want:   []time.Duration{0, 45*s + rateLimitSlack}},
		{name: "attempts used up: the job is told the wait that remains",
			faults: []githubtest.Fault{{Kind: githubtest.SecondaryRateLimit, RetryAfter: 10 * s, Times: DefaultRetryAttempts}},
			want:   []time.Duration{0, 10 * s, 20 * s, 30 * s},
			wantErr: func(err error) bool {
				var te *TransientError
				return errors.As(err, &te) && te.RetryAfter == 10*s
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, st := newStampedEnv(t, githubtest.Options{})
			for _, f := range tc.faults {
				e.srv.Fail(githubtest.GetPull, f)
			}
			_, err := e.c.PullRequest(context.Background(), e.repo, 1347)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("PullRequest: %v", err)
			}
			if tc.wantErr != nil && !tc.wantErr(err) {
				t.Fatalf("error = %v (%T)", err, err)
			}
			if diff := cmp.Diff(tc.want, st.at(pullPath)); diff != "" {
				t.Errorf("request times (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRateLimitSecondaryBackoffAcrossCalls: the doubling goes on from
// call to call (job to job) while GitHub keeps limiting, a call that
// comes during a wait sends nothing, and an answer that is not limited
// starts the next episode at a minute again.
func TestRateLimitSecondaryBackoffAcrossCalls(t *testing.T) {
	s := time.Second
	e, st := newStampedEnv(t, githubtest.Options{})
	ctx := context.Background()
	e.srv.Fail(githubtest.GetPull, githubtest.Fault{Kind: githubtest.SecondaryRateLimit, Times: 4})
	_, err := e.c.PullRequest(ctx, e.repo, 1347)
	var te *TransientError
	// 60, 120, 240 slept; the fourth answer asks 480 s, over MaxWait.
	if !errors.As(err, &te) || te.RetryAfter != 480*s {
		t.Fatalf("first call: %v, want a TransientError asking 480s", err)
	}
	_, err = e.c.PullRequest(ctx, e.repo, 1347)
	if !errors.As(err, &te) || te.RetryAfter != 480*s {
		t.Fatalf("call during the wait: %v, want a TransientError asking 480s", err)
	}
	if diff := cmp.Diff([]time.Duration{0, 60 * s, 180 * s, 420 * s}, st.at(pullPath)); diff != "" {
		t.Fatalf("request times (-want +got):\n%s", diff)
	}
	e.clock.Advance(480 * s) // the job comes back when told
	if _, err := e.c.PullRequest(ctx, e.repo, 1347); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
	e.srv.Fail(githubtest.GetPull, githubtest.Fault{Kind: githubtest.SecondaryRateLimit})
	if _, err := e.c.PullRequest(ctx, e.repo, 1347); err != nil {
		t.Fatalf("new episode: %v", err)
	}
	want := []time.Duration{0, 60 * s, 180 * s, 420 * s, 900 * s, 900 * s, 960 * s}
	if diff := cmp.Diff(want, st.at(pullPath)); diff != "" {
		t.Errorf("request times (-want +got):\n%s", diff)
	}
}

// TestRateLimitPerInstallation: while installation 1 waits out its
// limit, installation 2 is served at once; another call of installation
// 1 sends nothing until the wait ends, then both go at exactly its end.
func TestRateLimitPerInstallation(t *testing.T) {
	clock := newSteppedClock()
	e, st := newStampedEnvClock(t, githubtest.Options{OtherInstallations: []int64{2}}, clock)
	other := e.repo
	other.InstallationID = 2
	ctx := context.Background()

	e.srv.Fail(githubtest.GetPull, githubtest.Fault{Kind: githubtest.SecondaryRateLimit, RetryAfter: 30 * time.Second})
	errs := make(chan error, 2)
	go func() { _, err := e.c.PullRequest(ctx, e.repo, 1347); errs <- err }()
	clock.waitSleepers(t, 1)

	if _, err := e.c.PullRequest(ctx, other, 1347); err != nil {
		t.Fatalf("installation 2 during installation 1's wait: %v", err)
	}
	go func() { _, err := e.c.PullRequest(ctx, e.repo, 1347); errs <- err }()
	clock.waitSleepers(t, 2)
	if n := e.srv.Count(githubtest.GetPull); n != 2 {
		t.Fatalf("%d requests during the wait, want 2 (the limited one and installation 2's)", n)
	}
	clock.Advance(30 * time.Second)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("installation 1 after its wait: %v", err)
		}
	}
	want := []time.Duration{0, 0, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, st.at(pullPath)); diff != "" {
		t.Errorf("request times (-want +got):\n%s", diff)
	}
}

func TestClassifyLimit(t *testing.T) {
	now := clockEpoch
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		wantKind  LimitKind
		wantWait  time.Duration
		wantUntil time.Time
	}{
		{name: "200", status: 200, header: map[string]string{"Retry-After": "5"}},
		{name: "404", status: 404},
		{name: "500 with Retry-After is no rate limit", status: 500, header: map[string]string{"Retry-After": "5"}},
		{name: "403 Retry-After seconds", status: 403, header: map[string]string{"Retry-After": "30"}, wantKind: SecondaryLimit, wantWait: 30 * time.Second},
		{name: "429 Retry-After 0", status: 429, header: map[string]string{"Retry-After": "0"}, wantKind: SecondaryLimit, wantWait: 0},
		{name: "429 Retry-After date", status: 429, header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, wantKind: SecondaryLimit, wantWait: 90 * time.Second},
		{name: "Retry-After beats remaining 0", status: 403, header: map[string]string{"Retry-After": "7", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"}, wantKind: SecondaryLimit, wantWait: 7 * time.Second},
		{name: "primary", status: 403, header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1796374920"}, wantKind: PrimaryLimit, wantUntil: time.Unix(1796374920, 0).Add(rateLimitSlack)},
		{name: "primary 429 with a reset already past", status: 429, header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"}, wantKind: PrimaryLimit, wantUntil: now.Add(rateLimitSlack)},
		{name: "remaining 0 without reset", status: 403, header: map[string]string{"X-RateLimit-Remaining": "0"}, wantKind: SecondaryLimit, wantWait: -1},
		{name: "remaining 12 is not the primary limit", status: 403, header: map[string]string{"X-RateLimit-Remaining": "12"}, body: `{"message":"Resource not accessible by integration"}`},
		{name: "unparseable Retry-After", status: 429, header: map[string]string{"Retry-After": "soon"}, wantKind: SecondaryLimit, wantWait: -1},
		{name: "403 secondary message", status: 403, body: `{"message":"You have exceeded a secondary rate limit and have been temporarily blocked from content creation."}`, wantKind: SecondaryLimit, wantWait: -1},
		{name: "403 no body", status: 403, wantKind: SecondaryLimit, wantWait: -1},
		{name: "403 html", status: 403, body: `<html>Forbidden</html>`, wantKind: SecondaryLimit, wantWait: -1},
		{name: "403 permission", status: 403, body: `{"message":"Must have admin rights to Repository.","documentation_url":"https://docs.github.com/rest"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: http.NoBody}
			for k, v := range tc.header {
				resp.Header.Set(k, v)
			}
			if tc.body != "" {
				resp.Body = io.NopCloser(strings.NewReader(tc.body))
			}
			kind, wait, until, ok := classifyLimit(resp, now)
			if ok != (tc.wantKind != "") || kind != tc.wantKind || wait != tc.wantWait || !until.Equal(tc.wantUntil) {
				t.Errorf("got (%q, %v, %v, %v), want (%q, %v, %v)", kind, wait, until, ok, tc.wantKind, tc.wantWait, tc.wantUntil)
			}
		})
	}
}

func newStampedEnv(t *testing.T, opts githubtest.Options) (*env, *stampTransport) {
	t.Helper()
	return newStampedEnvClock(t, opts, nil)
}

// newStampedEnvClock is newEnv with every request stamped, starting at
// clockEpoch; clock, when set, replaces the auto-advancing fake.
func newStampedEnvClock(t *testing.T, opts githubtest.Options, clock Clock) (*env, *stampTransport) {
	t.Helper()
	var st *stampTransport
	e := newEnv(t, opts, func(c *Config) {
		c.Clock.(*fakeClock).now = clockEpoch // the stand-in's clock
		if clock != nil {
			c.Clock = clock
		}
		st = &stampTransport{next: http.DefaultTransport, clock: c.Clock}
		c.Transport = st
	})
	return e, st
}

// steppedClock stands still until Advance; Sleep blocks until then.
type steppedClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*sleeper
}

type sleeper struct {
	until time.Time
	done  chan struct{}
}

func newSteppedClock() *steppedClock { return &steppedClock{now: clockEpoch} }

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppedClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	w := &sleeper{until: c.now.Add(d), done: make(chan struct{})}
	if !c.now.Before(w.until) {
		c.mu.Unlock()
		return nil
	}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *steppedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if c.now.Before(w.until) {
			kept = append(kept, w)
			continue
		}
		close(w.done)
	}
	c.waiters = kept
}

// waitSleepers waits until n goroutines sleep on the clock.
func (c *steppedClock) waitSleepers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.waiters)
		c.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sleepers, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
