package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/webhook"
)

// Every refused delivery is told to Rejected with the reason of its
// status; a delivery intake takes is not.
func TestRejectedReasons(t *testing.T) {
	var mu sync.Mutex
	var got []string
	e := newEnv(t, webhook.Config{BadSignatureLimit: 2, MaxBodyBytes: 1 << 10, Rejected: func(r string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r)
	}}, store.Options{})
	ping := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	steps := []struct {
		name   string
		event  string
		body   []byte
		edit   func(*http.Request)
		code   int
		reason string
	}{
		{"accepted", "ping", ping, nil, http.StatusOK, ""},
		{"bad signature", "ping", ping, func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=00") }, http.StatusUnauthorized, webhook.RejectBadSignature},
		{"no signature", "ping", ping, func(r *http.Request) { r.Header.Del("X-Hub-Signature-256") }, http.StatusUnauthorized, webhook.RejectBadSignature},
		{"guessing", "ping", ping, func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=00") }, http.StatusTooManyRequests, webhook.RejectRateLimited},
		{"too large", "ping", []byte(`{"x":"` + strings.Repeat("a", 2<<10) + `"}`), nil, http.StatusRequestEntityTooLarge, webhook.RejectTooLarge},
		{"bad event", "Ping!", ping, nil, http.StatusBadRequest, webhook.RejectMalformed},
		{"bad payload", "pull_request", []byte(`{"action":`), nil, http.StatusBadRequest, webhook.RejectMalformed},
		{"method", "ping", ping, func(r *http.Request) { r.Method = http.MethodPut }, http.StatusMethodNotAllowed, webhook.RejectMethod},
	}
	var want []string
	for _, s := range steps {
		a := e.send(t, s.event, e.nextID(), s.body, s.edit)
		if a.code != s.code {
			t.Errorf("%s: %d, want %d", s.name, a.code, s.code)
		}
		if s.reason != "" {
			want = append(want, s.reason)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("reasons %q, want %q", got, want)
	}
	for _, r := range got {
		if !slices.Contains(webhook.RejectReasons(), r) {
			t.Errorf("reason %q is not in RejectReasons", r)
		}
	}
}

func TestRejectReasonOfEachError(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("%w: disk full", webhook.ErrUnavailable):                   webhook.RejectUnavailable,
		fmt.Errorf("commit: %w", context.DeadlineExceeded):                    webhook.RejectUnavailable,
		fmt.Errorf("%w: length 0", webhook.ErrBadDeliveryID):                  webhook.RejectMalformed,
		fmt.Errorf("%w: eof", webhook.ErrBodyUnreadable):                      webhook.RejectMalformed,
		&http.MaxBytesError{Limit: 1}:                                         webhook.RejectTooLarge,
		errors.New("something else"):                                          webhook.RejectInternal,
		fmt.Errorf("%w: x", webhook.ErrTooManyBadSignatures):                  webhook.RejectRateLimited,
		fmt.Errorf("delivery recorded as invalid: %w", webhook.ErrBadPayload): webhook.RejectMalformed,
	} {
		if got := webhook.RejectReason(err); got != want {
			t.Errorf("RejectReason(%v) = %q, want %q", err, got, want)
		}
	}
}
