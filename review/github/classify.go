package github

import (
	"errors"
	"net/http"
	"time"
)

// How the rest of gilf reads the errors of this package and of GitHub's
// API: callers ask these, never a status code.

// Transient reports whether a job that failed with err may succeed on a
// later attempt. Only failures that no retry can change are permanent:
// an invalid request, a forbidden redirect, an oversized file or
// tarball, a missing installation, or a pull request or repository that
// no longer exists (GitHub's 404, 410 or 422).
func Transient(err error) bool {
	for _, permanent := range []error{ErrInvalidInput, ErrRedirectRefused, ErrTooLarge, ErrNotAFile, ErrNoInstallation} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	switch statusOf(err) {
	case http.StatusNotFound, http.StatusGone, http.StatusUnprocessableEntity:
		return false
	}
	return true
}

// RetryCause is err as the job queue should keep it: when err is a
// *TransientError with a RetryAfter, the result carries that least wait
// through a RetryAfter() time.Duration method, which the store reads.
func RetryCause(err error) error {
	var te *TransientError
	if errors.As(err, &te) && te.RetryAfter > 0 {
		return retryAfter{err: err, wait: te.RetryAfter}
	}
	return err
}

// retryAfter carries a rate limit's least wait to the store.
type retryAfter struct {
	err  error
	wait time.Duration
}

func (e retryAfter) Error() string             { return e.err.Error() }
func (e retryAfter) Unwrap() error             { return e.err }
func (e retryAfter) RetryAfter() time.Duration { return e.wait }

// Unauthorized reports whether GitHub refused the credentials (HTTP
// 401): for the App JWT, a key that is not the App's or a wrong App id.
func Unauthorized(err error) bool { return statusOf(err) == http.StatusUnauthorized }

// NotFound reports whether GitHub answered 404: the resource does not
// exist, or the caller may not see it (or, for GET /app, the API URL is
// not the REST API root).
func NotFound(err error) bool { return statusOf(err) == http.StatusNotFound }
