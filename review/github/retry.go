package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/internal/logkey"
)

// rateLimitSlack is added to a primary rate limit's reset time: GitHub's
// clock and ours differ by a little.
const rateLimitSlack = time.Second

// call runs one GitHub request with retries. A rate limit (a
// *LimitError from limitTransport) waits until its end: Retry-After to the
// second, the primary limit until x-ratelimit-reset, a secondary limit
// without headers a minute and then longer (ratelimit.go). 5xx and network
// errors back off exponentially. Any other error (4xx) is returned as is.
// A wait over Retry.MaxWait, or attempts used up, gives a *TransientError
// whose RetryAfter, for a limit, is what remains of its wait.
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
	var last error
	var lastWait time.Duration
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
		wait, retryable := c.backoff(err, attempt)
		if !retryable {
			return fmt.Errorf("%s: %w", op, err)
		}
		if wait > rc.MaxWait {
			return &TransientError{Op: op, RetryAfter: wait, Err: err}
		}
		if _, blocked := notSent(err, c.clock.Now()); blocked {
			// Nothing was sent: an earlier answer's wait runs. It is
			// not an attempt.
			attempt--
		} else {
			last, lastWait = err, 0
			var le *LimitError
			if errors.As(err, &le) {
				lastWait = wait
			}
			if attempt == rc.Attempts {
				break
			}
			c.log.Warn("github call failed; retrying", "op", op, logkey.Attempt, attempt, logkey.Wait, wait, logkey.Err, errorClass(err))
		}
		if err := c.clock.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return &TransientError{Op: op, RetryAfter: lastWait, Err: fmt.Errorf("gave up after %d attempts: %w", rc.Attempts, last)}
}

// notSent reports a request held back by a running limit, and the wait
// left.
func notSent(err error, now time.Time) (time.Duration, bool) {
	var le *LimitError
	if errors.As(err, &le) && !le.Sent {
		return max(le.Until.Sub(now), 0), true
	}
	return 0, false
}

// backoff classifies err and says how long to wait before the next
// attempt.
func (c *Client) backoff(err error, attempt int) (time.Duration, bool) {
	rc := c.cfg.Retry
	var te *TransientError
	if errors.As(err, &te) {
		return 0, false // a nested call (the token mint) already retried
	}
	var le *LimitError
	if errors.As(err, &le) {
		return max(le.Until.Sub(c.clock.Now()), 0), true
	}
	exp := min(rc.BaseDelay<<(attempt-1), rc.MaxDelay)
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		if er.Response.StatusCode >= 500 {
			if ra, ok := parseRetryAfter(er.Response.Header.Get("Retry-After"), c.clock.Now()); ok && ra > 0 {
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
	var le *LimitError
	var er *gh.ErrorResponse
	switch {
	case errors.As(err, &le):
		return string(le.Kind) + " rate limit"
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
