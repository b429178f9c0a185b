package e2b

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
	// ErrUnauthorized: the API key (HTTP 401/403 from the API) or the
	// envd access token (401 from envd, Connect "unauthenticated") was
	// refused.
	ErrUnauthorized = errors.New("e2b: unauthorized")
	// ErrRateLimited: HTTP 429 (the team's concurrent sandbox limit or
	// the API's rate limit) or Connect "resource_exhausted".
	ErrRateLimited = errors.New("e2b: rate limited")
	// ErrStreamBroken: a process stream ended without its end-of-stream
	// frame or end event, or with a malformed frame.
	ErrStreamBroken = errors.New("e2b: process stream broken")
)

// MaxErrorBodyBytes bounds how much of an error response is read.
const MaxErrorBodyBytes = remote.MaxErrorBodyBytes

// APIError is a non-success HTTP answer of the E2B API or of envd, before
// any Connect framing.
type APIError struct {
	// Op names the call ("create sandbox", "upload archive", …).
	Op     string
	Status int
	// Code is the body's machine-readable code (E2B's error_code, or its
	// numeric code) when it had one.
	Code string
	// Msg is the body's message, shortened and stripped of control
	// characters.
	Msg string
}

func (e *APIError) Error() string {
	return remote.APIErrorText("e2b", e.Op, e.Status, e.Code, e.Msg)
}

// Is matches ErrUnauthorized for 401 and 403, ErrRateLimited for 429.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	}
	return false
}

// Temporary reports whether retrying later may succeed: 429, 409 (the
// sandbox is changing state), 502/503/504 and other 5xx except 507 (out of
// disk: the same archive will not fit next time either).
func (e *APIError) Temporary() bool {
	switch {
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusConflict:
		return true
	case e.Status == http.StatusInsufficientStorage:
		return false
	default:
		return e.Status >= 500
	}
}

// RPCError is a Connect error from envd's end-of-stream frame (or a unary
// call's error body).
type RPCError struct {
	Op      string
	Code    string // Connect code: "unavailable", "deadline_exceeded", …
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("e2b: %s: connect error %s: %s", e.Op, e.Code, e.Message)
}

// Is matches ErrUnauthorized for "unauthenticated" and
// "permission_denied", ErrRateLimited for "resource_exhausted".
func (e *RPCError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Code == "unauthenticated" || e.Code == "permission_denied"
	case ErrRateLimited:
		return e.Code == "resource_exhausted"
	}
	return false
}

// Temporary: "unavailable" (the sandbox timed out or was killed),
// "resource_exhausted", "aborted", "unknown" (a dropped connection) and
// "internal" may pass on a retry.
func (e *RPCError) Temporary() bool {
	switch e.Code {
	case "unavailable", "resource_exhausted", "aborted", "unknown", "internal":
		return true
	}
	return false
}

// StreamError is a process stream that broke: cut before its
// end-of-stream frame, a truncated or oversized envelope, no end event.
type StreamError struct {
	Op     string
	Reason string
}

func (e *StreamError) Error() string {
	if e.Op == "" {
		return "e2b: process stream broken: " + e.Reason
	}
	return fmt.Sprintf("e2b: %s: process stream broken: %s", e.Op, e.Reason)
}

// Is matches ErrStreamBroken.
func (e *StreamError) Is(target error) bool { return target == ErrStreamBroken }

// Temporary is always true: a broken connection may hold on a retry.
func (e *StreamError) Temporary() bool { return true }

// NotConfiguredError is returned by New when E2B_API_KEY is not set: cmd
// leaves the executor out of the configured set and Select refuses
// executor_unconfigured.
type NotConfiguredError struct {
	Missing []string
}

func (e *NotConfiguredError) Error() string {
	return "managed-e2b is not configured: " + strings.Join(e.Missing, " and ") + " not set"
}

// apiError reads a bounded error body into an *APIError. E2B's error body
// is {"code":<int>,"message":"…","error_code":"…"}; envd's 401 is
// {"message":"…","code":401}; a proxy may answer with plain text or HTML.
func apiError(op string, resp *http.Response) *APIError {
	e := &APIError{Op: op, Status: resp.StatusCode}
	e.Code, e.Msg = remote.ReadErrorBody(resp, func(body []byte) (code, msg string, ok bool) {
		var parsed struct {
			Code      json.RawMessage `json:"code"`
			ErrorCode string          `json:"error_code"`
			Message   string          `json:"message"`
		}
		if json.Unmarshal(body, &parsed) != nil || (parsed.Message == "" && parsed.ErrorCode == "" && len(parsed.Code) == 0) {
			return "", "", false
		}
		code = parsed.ErrorCode
		if code == "" && len(parsed.Code) > 0 {
			code = strings.Trim(string(parsed.Code), `"`)
		}
		return code, parsed.Message, true
	})
	return e
}
