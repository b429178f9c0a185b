package github

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	gh "github.com/google/go-github/v84/github"
)

// TestTransient is the job queue's retry rule (it stood in cmd/gilf as
// TestServeTransient).
func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"plain error", errors.New("boom"), true},
		{"github 502", &gh.ErrorResponse{Response: &http.Response{StatusCode: 502}}, true},
		{"github 403", &gh.ErrorResponse{Response: &http.Response{StatusCode: 403}}, true},
		{"github 404", &gh.ErrorResponse{Response: &http.Response{StatusCode: 404}}, false},
		{"github 410", &gh.ErrorResponse{Response: &http.Response{StatusCode: 410}}, false},
		{"github 422", fmt.Errorf("post review: %w", &gh.ErrorResponse{Response: &http.Response{StatusCode: 422}}), false},
		{"too large", fmt.Errorf("tarball: %w", ErrTooLarge), false},
		{"not a file", ErrNotAFile, false},
		{"no installation", ErrNoInstallation, false},
		{"transient github error", &TransientError{Op: "x", Err: errors.New("EOF")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestRetryCause(t *testing.T) {
	var ra interface{ RetryAfter() time.Duration }
	limited := fmt.Errorf("post review: %w", &TransientError{Op: "x", RetryAfter: 90 * time.Second, Err: errors.New("rate limited")})
	got := RetryCause(limited)
	if !errors.As(got, &ra) || ra.RetryAfter() != 90*time.Second {
		t.Errorf("RetryCause(%v) carries no 90s wait", limited)
	}
	if got.Error() != limited.Error() || !errors.Is(got, limited) {
		t.Errorf("RetryCause changed the error: %v", got)
	}
	for _, err := range []error{errors.New("boom"), &TransientError{Op: "x", Err: errors.New("EOF")}} {
		if got := RetryCause(err); got != err {
			t.Errorf("RetryCause(%v) = %v, want it as it is", err, got)
		}
	}
}

func TestUnauthorizedNotFound(t *testing.T) {
	status := func(code int) error {
		return fmt.Errorf("get app: %w", &gh.ErrorResponse{Response: &http.Response{StatusCode: code}})
	}
	for _, tc := range []struct {
		err                    error
		unauthorized, notFound bool
	}{
		{status(401), true, false},
		{status(404), false, true},
		{status(403), false, false},
		{errors.New("boom"), false, false},
		{nil, false, false},
	} {
		if got := Unauthorized(tc.err); got != tc.unauthorized {
			t.Errorf("Unauthorized(%v) = %v", tc.err, got)
		}
		if got := NotFound(tc.err); got != tc.notFound {
			t.Errorf("NotFound(%v) = %v", tc.err, got)
		}
	}
}
