package cfsandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

// Sentinels for errors.Is. Every error of this package that is not a
// refusal is an infrastructure error: the job retries it, it is never a
// test failure.
var (
	// ErrUnauthorized: the bridge refused the token (401/403).
	ErrUnauthorized = errors.New("cf-sandbox: unauthorized")
	// ErrRateLimited: 429, or 503 capacity_exceeded (the bridge's
	// max_instances is reached).
	ErrRateLimited = errors.New("cf-sandbox: rate limited")
	// ErrStreamBroken: an exec stream ended without its exit or error
	// event, or with a malformed event.
	ErrStreamBroken = errors.New("cf-sandbox: exec stream broken")
)

// MaxErrorBodyBytes bounds how much of an error response is read.
const MaxErrorBodyBytes = remote.MaxErrorBodyBytes

// APIError is a non-success HTTP answer of the bridge. Its body is
// {"error":"…","code":"…"}.
type APIError struct {
	Op     string
	Status int
	Code   string
	Msg    string
}

func (e *APIError) Error() string {
	return remote.APIErrorText("cf-sandbox", e.Op, e.Status, e.Code, e.Msg)
}

// Is matches ErrUnauthorized for 401 and 403 (except a path outside
// /workspace, also 403, code invalid_request), ErrRateLimited for 429 and
// for 503 capacity_exceeded.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || (e.Status == http.StatusForbidden && e.Code != "invalid_request")
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests || (e.Status == http.StatusServiceUnavailable && e.Code == "capacity_exceeded")
	}
	return false
}

// Temporary reports whether retrying later may succeed: 429 and 5xx.
func (e *APIError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// ExecError is an `error` event of an exec stream.
type ExecError struct {
	Op   string
	Code string // exec_error, exec_transport_error
	Msg  string
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("cf-sandbox: %s: %s: %s", e.Op, e.Code, e.Msg)
}

// Temporary: a transport error between the Worker and the container may
// pass on a retry.
func (e *ExecError) Temporary() bool { return e.Code == "exec_transport_error" }

// StreamError is an exec stream that broke.
type StreamError struct {
	Op     string
	Reason string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("cf-sandbox: %s: exec stream broken: %s", e.Op, e.Reason)
}

// Is matches ErrStreamBroken.
func (e *StreamError) Is(target error) bool { return target == ErrStreamBroken }

// Temporary is always true.
func (e *StreamError) Temporary() bool { return true }

// NotConfiguredError is returned by New when the executor is not enabled
// or lacks its URL or token: cmd leaves it out and Select refuses
// executor_unconfigured.
type NotConfiguredError struct {
	Missing []string
}

func (e *NotConfiguredError) Error() string {
	return "managed-cf-sandbox is not configured: " + strings.Join(e.Missing, " and ") + " not set"
}

func apiError(op string, resp *http.Response) *APIError {
	e := &APIError{Op: op, Status: resp.StatusCode}
	e.Code, e.Msg = remote.ReadErrorBody(resp, func(body []byte) (code, msg string, ok bool) {
		var parsed struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if json.Unmarshal(body, &parsed) == nil && (parsed.Error != "" || parsed.Code != "") {
			return remote.CleanMessage(parsed.Code), parsed.Error, true
		}
		return "", "", false
	})
	return e
}
