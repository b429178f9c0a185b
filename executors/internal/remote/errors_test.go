package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestAPIErrorClass(t *testing.T) {
	r := ErrorReader{Prefix: "p", Parse: func([]byte) (string, string, bool) { return "", "", false },
		Classify: func(status int, _ string) Class {
			switch status {
			case http.StatusUnauthorized:
				return Unauthorized
			case http.StatusTooManyRequests:
				return RateLimited | Temporary
			}
			return 0
		}}
	answer := func(status int) *http.Response {
		return &http.Response{StatusCode: status, Body: http.NoBody}
	}
	unauth := fmt.Errorf("run: %w", r.Read("create sandbox", answer(401)))
	limited := r.Read("create sandbox", answer(429))
	plain := r.Read("create sandbox", answer(400))
	if !errors.Is(unauth, ErrUnauthorized) || errors.Is(unauth, ErrRateLimited) || TemporaryAPIError(unauth) {
		t.Errorf("401: %v", unauth)
	}
	if !errors.Is(limited, ErrRateLimited) || errors.Is(limited, ErrUnauthorized) || !TemporaryAPIError(limited) {
		t.Errorf("429: %v", limited)
	}
	if errors.Is(plain, ErrUnauthorized) || errors.Is(plain, ErrRateLimited) || TemporaryAPIError(plain) {
		t.Errorf("400: %v", plain)
	}
	if got, want := plain.Error(), "p: create sandbox: HTTP 400"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if TemporaryAPIError(errors.New("boom")) {
		t.Error("a plain error is not a temporary API error")
	}
}

func TestStreamFailed(t *testing.T) {
	broken := func() error { return &StreamError{Prefix: "p", Stream: "exec", Reason: "cut"} }
	err := StreamFailed(context.Background(), "p", "run step", broken())
	var se *StreamError
	if !errors.As(err, &se) || se.Op != "run step" || !errors.Is(err, ErrStreamBroken) || !se.Temporary() {
		t.Fatalf("err = %v, want a *StreamError of run step", err)
	}
	if got, want := err.Error(), "p: run step: exec stream broken: cut"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = StreamFailed(ctx, "p", "run step", broken())
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStreamBroken) {
		t.Errorf("cancelled: err = %v, want the context's error", err)
	}
	nc := &NotConfiguredError{Executor: "managed-x", Missing: []string{"A", "B"}}
	if got := nc.Error(); !strings.HasPrefix(got, "managed-x is not configured: A and B") {
		t.Errorf("NotConfiguredError = %q", got)
	}
}
