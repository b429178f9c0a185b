package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

// The error types and sentinels every sandbox API executor shares (see
// executors/internal/remote). Every error of this package that is not a
// refusal is an infrastructure error: the job retries it, it is never a
// test failure.
type (
	// APIError is a non-success HTTP answer of the E2B API or of envd,
	// before any Connect framing. Its Code is E2B's error_code, or its
	// numeric code.
	APIError = remote.APIError
	// StreamError is a process stream that broke: cut before its
	// end-of-stream frame, a truncated or oversized envelope, no end
	// event.
	StreamError = remote.StreamError
	// NotConfiguredError is returned by New when E2B_API_KEY is not set.
	NotConfiguredError = remote.NotConfiguredError
)

var (
	// ErrUnauthorized: the API key (HTTP 401/403 from the API) or the
	// envd access token (401 from envd, Connect "unauthenticated") was
	// refused.
	ErrUnauthorized = remote.ErrUnauthorized
	// ErrRateLimited: HTTP 429 (the team's concurrent sandbox limit or
	// the API's rate limit) or Connect "resource_exhausted".
	ErrRateLimited = remote.ErrRateLimited
	// ErrStreamBroken: a process stream ended without its end-of-stream
	// frame or end event, or with a malformed frame.
	ErrStreamBroken = remote.ErrStreamBroken
)

// MaxErrorBodyBytes bounds how much of an error response is read.
const MaxErrorBodyBytes = remote.MaxErrorBodyBytes

// classifyStatus: 401 and 403 are unauthorized, 429 rate limited; 429,
// 409 (the sandbox is changing state) and 5xx except 507 (out of disk:
// the same archive will not fit next time either) are temporary.
func classifyStatus(status int, _ string) remote.Class {
	var c remote.Class
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		c |= remote.Unauthorized
	case http.StatusTooManyRequests:
		c |= remote.RateLimited | remote.Temporary
	case http.StatusConflict:
		c |= remote.Temporary
	}
	if status >= 500 && status != http.StatusInsufficientStorage {
		c |= remote.Temporary
	}
	return c
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

// classifyRPC: "unauthenticated" and "permission_denied" are
// unauthorized, "resource_exhausted" rate limited; "unavailable" (the
// sandbox timed out or was killed), "resource_exhausted", "aborted",
// "unknown" (a dropped connection) and "internal" may pass on a retry.
func classifyRPC(code string) remote.Class {
	switch code {
	case "unauthenticated", "permission_denied":
		return remote.Unauthorized
	case "resource_exhausted":
		return remote.RateLimited | remote.Temporary
	case "unavailable", "aborted", "unknown", "internal":
		return remote.Temporary
	}
	return 0
}

// Is matches the sentinels of the Connect code's class.
func (e *RPCError) Is(target error) bool { return classifyRPC(e.Code).Is(target) }

// Temporary reports whether a retry may pass.
func (e *RPCError) Temporary() bool { return classifyRPC(e.Code)&remote.Temporary != 0 }

// errorReader reads an error body into an *APIError. E2B's error body is
// {"code":<int>,"message":"…","error_code":"…"}; envd's 401 is
// {"message":"…","code":401}; a proxy may answer with plain text or HTML.
var errorReader = remote.ErrorReader{Prefix: "e2b", Parse: parseErrorBody, Classify: classifyStatus}

func parseErrorBody(body []byte) (code, msg string, ok bool) {
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
}

func apiError(op string, resp *http.Response) *APIError { return errorReader.Read(op, resp) }

// streamBroken is a *StreamError whose call is named later.
func streamBroken(format string, args ...any) error {
	return &StreamError{Prefix: "e2b", Stream: "process", Reason: fmt.Sprintf(format, args...)}
}
