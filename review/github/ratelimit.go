package github

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rateLimitObserver reports the X-RateLimit-Remaining header of every
// answer that carries one (GitHub's API; codeload sends none), including
// rate-limited and failed answers.
type rateLimitObserver struct {
	next    http.RoundTripper
	observe func(remaining int)
}

func (o rateLimitObserver) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if n, perr := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining")); perr == nil && n >= 0 {
		o.observe(n)
	}
	return resp, nil
}

// GitHub's rate-limit rules, as "Best practices for using the REST API"
// and "Rate limits for the REST API" state them:
//   - an answer with Retry-After: wait that many seconds;
//   - x-ratelimit-remaining: 0 (the primary limit): wait until
//     x-ratelimit-reset (epoch seconds);
//   - any other secondary limit: wait at least a minute, then longer,
//     exponentially, while it keeps answering so.
//
// And while a wait runs, send nothing under that limit: a limit belongs
// to the installation (or to the App itself, for minting tokens), so
// every call for that installation waits, from any job, and the other
// installations go on.
const (
	// appLimitKey keys the App's own limit (App JWT calls); installation
	// ids are positive.
	appLimitKey int64 = 0
	// maxSecondaryDoublings caps the exponent of the secondary backoff
	// (60 s << 10 is 17 hours; Retry.MaxWait turns anything that long
	// into a rescheduled job anyway).
	maxSecondaryDoublings = 10
	// maxLimitBodyBytes is what is read of a 403 body to tell a
	// secondary limit from a permission refusal.
	maxLimitBodyBytes = 64 << 10
)

// LimitKind says which of GitHub's limits a LimitError is.
type LimitKind string

const (
	// PrimaryLimit: x-ratelimit-remaining reached 0.
	PrimaryLimit LimitKind = "primary"
	// SecondaryLimit: GitHub asked to slow down (Retry-After, a 429, or a
	// 403 that is not a permission refusal).
	SecondaryLimit LimitKind = "secondary"
)

// LimitError is a request GitHub rate limited. Sent says whether this
// request went out and got the limited answer; when false, nothing was
// sent, because an earlier answer's wait had not passed.
type LimitError struct {
	Installation int64 // 0: the App's own calls
	Kind         LimitKind
	Until        time.Time
	Sent         bool
}

func (e *LimitError) Error() string {
	who := "the app"
	if e.Installation != appLimitKey {
		who = fmt.Sprintf("installation %d", e.Installation)
	}
	msg := fmt.Sprintf("github %s rate limit for %s until %s", e.Kind, who, e.Until.UTC().Format(time.RFC3339))
	if !e.Sent {
		return "not sent: " + msg
	}
	return msg
}

// limiter holds the waits GitHub asked for, per installation.
type limiter struct {
	clock     Clock
	secondary time.Duration // the least wait of a secondary limit without Retry-After

	mu    sync.Mutex
	gates map[int64]*gate
}

type gate struct {
	kind   LimitKind
	until  time.Time
	streak int // secondary limits in a row, reset by an answer that is not limited
}

func newLimiter(clock Clock, secondary time.Duration) *limiter {
	return &limiter{clock: clock, secondary: secondary, gates: make(map[int64]*gate)}
}

// blocked returns the *LimitError of a wait that has not passed for key.
func (l *limiter) blocked(key int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gates[key]
	if g == nil || !l.clock.Now().Before(g.until) {
		return nil
	}
	return &LimitError{Installation: key, Kind: g.kind, Until: g.until}
}

// observe records what an answer says of key's limit and returns the
// *LimitError when the answer is a limit.
func (l *limiter) observe(key int64, resp *http.Response) *LimitError {
	now := l.clock.Now()
	kind, wait, until, ok := classifyLimit(resp, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gates[key]
	if g == nil {
		g = &gate{}
		l.gates[key] = g
	}
	if !ok {
		if resp.StatusCode < 400 {
			g.streak = 0
		}
		return nil
	}
	if kind == SecondaryLimit {
		if wait < 0 { // no Retry-After: a minute, doubling
			wait = l.secondary << min(g.streak, maxSecondaryDoublings)
		}
		g.streak++
		until = now.Add(wait)
	}
	g.kind, g.until = kind, until
	return &LimitError{Installation: key, Kind: kind, Until: until, Sent: true}
}

// classifyLimit reads one answer against GitHub's rules. For a secondary
// limit, wait is Retry-After (exact, to the second) or -1 when none was
// given; for the primary limit, until is x-ratelimit-reset plus
// rateLimitSlack (GitHub's clock and ours differ by a little). The body of
// a 403 is read (and put back) to tell a permission refusal from a limit.
func classifyLimit(resp *http.Response, now time.Time) (kind LimitKind, wait time.Duration, until time.Time, ok bool) {
	code := resp.StatusCode
	if code != http.StatusForbidden && code != http.StatusTooManyRequests {
		return "", 0, time.Time{}, false
	}
	if ra, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
		return SecondaryLimit, ra, time.Time{}, true
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil && reset > 0 {
			return PrimaryLimit, 0, maxTime(time.Unix(reset, 0), now).Add(rateLimitSlack), true
		}
		return SecondaryLimit, -1, time.Time{}, true // at 0 with no reset: wait as for a secondary limit
	}
	if code == http.StatusTooManyRequests {
		return SecondaryLimit, -1, time.Time{}, true
	}
	if permissionRefusal(resp) {
		return "", 0, time.Time{}, false
	}
	return SecondaryLimit, -1, time.Time{}, true
}

// permissionRefusal is true for a 403 whose message refuses access
// ("Resource not accessible by integration", "Must have admin rights to
// Repository.", "Repository access blocked") and does not speak of a rate
// limit. Any other 403 (an empty body, a proxy's page, "You have exceeded a
// secondary rate limit") is taken as a secondary limit: waiting a minute
// on a refusal costs a minute, while going on through a limit gets the
// App banned.
func permissionRefusal(resp *http.Response) bool {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLimitBodyBytes))
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(data)))
	if err != nil {
		return false
	}
	var body struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
	}
	if json.Unmarshal(data, &body) != nil {
		return false
	}
	text := strings.ToLower(body.Message + " " + body.DocumentationURL)
	if strings.Contains(text, "rate limit") || strings.Contains(text, "rate-limit") || strings.Contains(text, "abuse") {
		return false
	}
	for _, p := range []string{"not accessible", "must have", "permission", "access blocked", "not allowed", "disabled"} {
		if strings.Contains(text, p) {
			return true
		}
	}
	return false
}

// parseRetryAfter reads Retry-After: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// limitTransport keeps key's limit for the API host's requests: it sends
// nothing while a wait runs, and turns a limited answer into a
// *LimitError (for the retry loop, which waits with the Client's clock).
type limitTransport struct {
	l    *limiter
	key  int64
	c    *Client
	next http.RoundTripper
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.c.isAPIHost(req) {
		return t.next.RoundTrip(req)
	}
	if err := t.l.blocked(t.key); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if le := t.l.observe(t.key, resp); le != nil {
		drain(resp)
		return nil, le
	}
	return resp, nil
}
