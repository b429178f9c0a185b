package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	gh "github.com/google/go-github/v84/github"
)

// rateLimitSlack is added to a primary rate limit's reset time: GitHub's
// clock and ours differ by a little.
const rateLimitSlack = time.Second

// call runs one GitHub request with retries. go-github's typed errors
// decide: *RateLimitError waits until its reset, *AbuseRateLimitError
// honours Retry-After (else Retry.SecondaryRateLimit, doubling), 5xx and
// network errors back off exponentially. Any other error (4xx) is
// returned as is. A wait over Retry.MaxWait, or attempts used up, gives a
// *TransientError.
//
// fn must be safe to repeat; callers of non-idempotent requests use
// post, which looks before it retries.
func (c *Client) call(ctx context.Context, op string, fn func(ctx context.Context) (*gh.Response, error)) error {
	return c.retry(ctx, op, nil, fn)
}

// post is call for a request that creates something: before the first
// attempt and before every retry it asks landed whether an earlier
// attempt (or an earlier run of the job) already created it.
func (c *Client) post(ctx context.Context, op string, landed func(ctx context.Context) (bool, error), fn func(ctx context.Context) (*gh.Response, error)) error {
	return c.retry(ctx, op, landed, fn)
}

// errLanded stops the retry loop: the thing exists already.
var errLanded = errors.New("already posted")

func (c *Client) retry(ctx context.Context, op string, landed func(ctx context.Context) (bool, error), fn func(ctx context.Context) (*gh.Response, error)) error {
	rc := c.cfg.Retry
	secondary := 0
	var last error
	for attempt := 1; attempt <= rc.Attempts; attempt++ {
		if landed != nil {
			ok, err := landed(ctx)
			if err != nil {
				return fmt.Errorf("%s: check for an earlier post: %w", op, err)
			}
			if ok {
				return errLanded
			}
		}
		_, err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("%s: %w", op, ctxErr)
		}
		wait, retryable := c.backoff(err, attempt, &secondary)
		if !retryable {
			return fmt.Errorf("%s: %w", op, err)
		}
		last = err
		if wait > rc.MaxWait {
			return &TransientError{Op: op, RetryAfter: wait, Err: err}
		}
		if attempt == rc.Attempts {
			break
		}
		c.log.Warn("github call failed; retrying", "op", op, "attempt", attempt, "wait", wait, "err", errorClass(err))
		if err := c.clock.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return &TransientError{Op: op, Err: fmt.Errorf("gave up after %d attempts: %w", rc.Attempts, last)}
}

// backoff classifies err and says how long to wait before the next
// attempt.
func (c *Client) backoff(err error, attempt int, secondary *int) (time.Duration, bool) {
	rc := c.cfg.Retry
	var te *TransientError
	if errors.As(err, &te) {
		return 0, false // a nested call (the token mint) already retried
	}
	var rl *gh.RateLimitError
	if errors.As(err, &rl) {
		wait := rl.Rate.Reset.Time.Sub(c.clock.Now()) + rateLimitSlack
		return max(wait, rateLimitSlack), true
	}
	var ab *gh.AbuseRateLimitError
	if errors.As(err, &ab) {
		if ab.RetryAfter != nil && *ab.RetryAfter > 0 {
			return *ab.RetryAfter, true
		}
		wait := rc.SecondaryRateLimit << *secondary
		*secondary++
		return wait, true
	}
	exp := min(rc.BaseDelay<<(attempt-1), rc.MaxDelay)
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		code := er.Response.StatusCode
		if code >= 500 || code == http.StatusTooManyRequests {
			if ra := retryAfter(er.Response); ra > 0 {
				return ra, true
			}
			return exp, true
		}
		return 0, false
	}
	if isNetwork(err) {
		return exp, true
	}
	return 0, false
}

// retryAfter reads a Retry-After header in seconds.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	var s int
	if _, err := fmt.Sscanf(resp.Header.Get("Retry-After"), "%d", &s); err != nil || s <= 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// isNetwork is true for connection failures and cut responses. A
// *url.Error only wraps: what it wraps decides.
func isNetwork(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// errorClass names an error for a log line without its text (which may
// carry URLs).
func errorClass(err error) string {
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	var er *gh.ErrorResponse
	switch {
	case errors.As(err, &rl):
		return "primary rate limit"
	case errors.As(err, &ab):
		return "secondary rate limit"
	case errors.As(err, &er):
		return fmt.Sprintf("http %d", er.Response.StatusCode)
	case isNetwork(err):
		return "network error"
	default:
		return "error"
	}
}

// statusOf returns the HTTP status of a go-github error, or 0.
func statusOf(err error) int {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}
