package cfsandbox

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

// The error types and sentinels every sandbox API executor shares (see
// executors/internal/remote). Every error of this package that is not a
// refusal is an infrastructure error: the job retries it, it is never a
// test failure.
type (
	// APIError is a non-success HTTP answer of the bridge. Its body is
	// {"error":"…","code":"…"}.
	APIError = remote.APIError
	// StreamError is an exec stream that broke.
	StreamError = remote.StreamError
	// NotConfiguredError is returned by New when the executor is not
	// enabled or lacks its URL or token.
	NotConfiguredError = remote.NotConfiguredError
)

var (
	// ErrUnauthorized: the bridge refused the token (401/403).
	ErrUnauthorized = remote.ErrUnauthorized
	// ErrRateLimited: 429, or 503 capacity_exceeded (the bridge's
	// max_instances is reached).
	ErrRateLimited = remote.ErrRateLimited
	// ErrStreamBroken: an exec stream ended without its exit or error
	// event, or with a malformed event.
	ErrStreamBroken = remote.ErrStreamBroken
)

// MaxErrorBodyBytes bounds how much of an error response is read.
const MaxErrorBodyBytes = remote.MaxErrorBodyBytes

// classifyStatus: 401 and 403 are unauthorized (except a path outside
// /workspace, also 403, code invalid_request); 429 and 503
// capacity_exceeded are rate limited; 429 and 5xx are temporary.
func classifyStatus(status int, code string) remote.Class {
	var c remote.Class
	if status == http.StatusUnauthorized || (status == http.StatusForbidden && code != "invalid_request") {
		c |= remote.Unauthorized
	}
	if status == http.StatusTooManyRequests || (status == http.StatusServiceUnavailable && code == "capacity_exceeded") {
		c |= remote.RateLimited
	}
	if status == http.StatusTooManyRequests || status >= 500 {
		c |= remote.Temporary
	}
	return c
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

var errorReader = remote.ErrorReader{Prefix: "cf-sandbox", Parse: parseErrorBody, Classify: classifyStatus}

func parseErrorBody(body []byte) (code, msg string, ok bool) {
	var parsed struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(body, &parsed) == nil && (parsed.Error != "" || parsed.Code != "") {
		return remote.CleanMessage(parsed.Code), parsed.Error, true
	}
	return "", "", false
}

func apiError(op string, resp *http.Response) *APIError { return errorReader.Read(op, resp) }

// streamBroken is a *StreamError whose call is named later.
func streamBroken(reason string) error {
	return &StreamError{Prefix: "cf-sandbox", Stream: "exec", Reason: reason}
}
