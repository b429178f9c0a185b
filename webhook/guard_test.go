package webhook_test

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/webhook"
)

// W4: a client probing signatures is cut off after BadSignatureLimit
// failures in a window; a delivery that verifies is never limited, and the
// window turns.
func TestBadSignatureGuard(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	e := newEnv(t, webhook.Config{BadSignatureLimit: 3, BadSignatureWindow: time.Minute, Now: clock}, store.Options{})
	body := realPayload(t, "ping", "payload")
	forge := func(r *http.Request) {
		r.Header.Set("X-Hub-Signature-256", "sha256="+string(make([]byte, 0))+"00000000000000000000000000000000000000000000000000000000000000ff")
	}
	for i := range 3 {
		if a := e.send(t, "ping", e.nextID(), body, forge); a.code != http.StatusUnauthorized {
			t.Fatalf("bad signature %d: %d, want 401", i+1, a.code)
		}
	}
	if a := e.send(t, "ping", e.nextID(), body, forge); a.code != http.StatusTooManyRequests {
		t.Fatalf("bad signature past the limit: %d, want 429", a.code)
	}
	if n := e.count(t); n != 0 {
		t.Fatalf("%d deliveries stored by a probing client", n)
	}
	// A correctly signed delivery from the same address is never refused:
	// behind a proxy, the forger and GitHub share it.
	if a := e.send(t, "ping", e.nextID(), body, nil); a.code != http.StatusOK {
		t.Fatalf("valid delivery from a limited address: %d, want 200", a.code)
	}
	if a := e.send(t, "ping", e.nextID(), body, forge); a.code != http.StatusTooManyRequests {
		t.Fatalf("a forgery after the valid one: %d, want 429 still", a.code)
	}
	now = now.Add(time.Minute)
	if a := e.send(t, "ping", e.nextID(), body, forge); a.code != http.StatusUnauthorized {
		t.Fatalf("bad signature after the window: %d, want 401", a.code)
	}
}

// The guard is off at a negative limit (GILF_BAD_SIGNATURE_LIMIT=0).
func TestBadSignatureGuardOff(t *testing.T) {
	e := newEnv(t, webhook.Config{BadSignatureLimit: -1}, store.Options{})
	body := realPayload(t, "ping", "payload")
	for i := range webhook.DefaultBadSignatureLimit + 5 {
		if a := e.send(t, "ping", e.nextID(), body, forgeSignature); a.code != http.StatusUnauthorized {
			t.Fatalf("bad signature %d with the guard off: %d, want 401", i+1, a.code)
		}
	}
}

func forgeSignature(r *http.Request) {
	r.Header.Set("X-Hub-Signature-256", "sha256=00000000000000000000000000000000000000000000000000000000000000ff")
}

// Behind a trusted reverse proxy, the guard counts the client it names in
// X-Forwarded-For; an untrusted peer's header is ignored.
func TestBadSignatureGuardTrustedProxies(t *testing.T) {
	body := realPayload(t, "ping", "payload")
	from := func(xff ...string) func(*http.Request) {
		return func(r *http.Request) {
			forgeSignature(r)
			for _, v := range xff {
				r.Header.Add("X-Forwarded-For", v)
			}
		}
	}
	t.Run("trusted peer", func(t *testing.T) {
		// The test server's peer is loopback: trust it.
		e := newEnv(t, webhook.Config{BadSignatureLimit: 2, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}}, store.Options{})
		for range 2 {
			if a := e.send(t, "ping", e.nextID(), body, from("203.0.113.9, 10.1.1.1")); a.code != http.StatusUnauthorized {
				t.Fatalf("first failures: %d", a.code)
			}
		}
		if a := e.send(t, "ping", e.nextID(), body, from("203.0.113.9", "10.2.2.2")); a.code != http.StatusTooManyRequests {
			t.Fatalf("the same client through another trusted hop: %d, want 429", a.code)
		}
		// Another client behind the same proxy has its own budget; what
		// it writes left of itself is not believed.
		if a := e.send(t, "ping", e.nextID(), body, from("203.0.113.9, 198.51.100.4")); a.code != http.StatusUnauthorized {
			t.Fatalf("another client: %d, want 401", a.code)
		}
	})
	t.Run("untrusted peer", func(t *testing.T) {
		e := newEnv(t, webhook.Config{BadSignatureLimit: 2}, store.Options{})
		for i, xff := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
			a := e.send(t, "ping", e.nextID(), body, from(xff))
			want := http.StatusUnauthorized
			if i == 2 {
				want = http.StatusTooManyRequests // one peer, whatever its header says
			}
			if a.code != want {
				t.Fatalf("failure %d: %d, want %d", i+1, a.code, want)
			}
		}
	})
}

func TestBadSignatureGuardValidNeverCounts(t *testing.T) {
	e := newEnv(t, webhook.Config{BadSignatureLimit: 1}, store.Options{})
	body := realPayload(t, "ping", "payload")
	for i := range 5 {
		if a := e.send(t, "ping", e.nextID(), body, nil); a.code != http.StatusOK {
			t.Fatalf("valid delivery %d: %d", i, a.code)
		}
	}
}

// W14: an allowlist of accounts and installations; a pull request from
// anyone else is recorded and ignored (202), with no job.
func TestAllowlist(t *testing.T) {
	body := realPayload(t, "pull_request", "opened")
	tests := []struct {
		name    string
		allow   webhook.Allowlist
		wantJob bool
	}{
		{"empty allows everyone", webhook.Allowlist{}, true},
		{"owner listed, other case", webhook.Allowlist{Accounts: []string{"codertocat"}}, true},
		{"owner not listed", webhook.Allowlist{Accounts: []string{"someone-else"}}, false},
		{"installation listed", webhook.Allowlist{Installations: []int64{1}}, true},
		{"installation not listed", webhook.Allowlist{Installations: []int64{2}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, webhook.Config{Allow: tt.allow}, store.Options{})
			a := e.send(t, "pull_request", e.nextID(), body, nil)
			if a.code != http.StatusAccepted {
				t.Fatalf("answer %d %+v, want 202", a.code, a.body)
			}
			if got := a.body.Job != 0; got != tt.wantJob {
				t.Fatalf("job created = %v (%+v), want %v", got, a.body, tt.wantJob)
			}
			if !tt.wantJob && (a.body.Status != "ignored" || a.body.Reason == "") {
				t.Errorf("refused delivery answered %+v, want ignored with a reason", a.body)
			}
			if e.count(t) != 1 {
				t.Errorf("the delivery must be recorded whatever the allowlist says")
			}
		})
	}
}

// A closed pull request cancels its unfinished jobs, and only its own; a
// reopen makes the job runnable again.
func TestClosedCancelsTheJob(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	opened := e.send(t, "pull_request", e.nextID(), realPayload(t, "pull_request", "opened"), nil)
	other := e.send(t, "pull_request", e.nextID(), derive(t, "pull_request", "opened", func(m map[string]any) {
		m["number"] = 99
		pr(m)["number"] = 99
	}), nil)
	if opened.body.Job == 0 || other.body.Job == 0 || opened.body.Job == other.body.Job {
		t.Fatalf("setup: %+v %+v", opened.body, other.body)
	}
	closed := e.send(t, "pull_request", e.nextID(), derive(t, "pull_request", "closed", func(m map[string]any) {
		m["number"] = 2
		pr(m)["number"] = 2
	}), nil)
	if closed.code != http.StatusAccepted || closed.body.Cancelled != 1 {
		t.Fatalf("closed: %d %+v, want 202 with one job cancelled", closed.code, closed.body)
	}
	if st := e.jobState(t, opened.body.Job); st.State != store.StateCancelled {
		t.Errorf("closed PR's job is %s, want cancelled", st.State)
	}
	if st := e.jobState(t, other.body.Job); st.State != store.StateQueued {
		t.Errorf("another PR's job is %s, want queued", st.State)
	}
	reopened := e.send(t, "pull_request", e.nextID(), realPayload(t, "pull_request", "opened"), nil)
	if st := e.jobState(t, reopened.body.Job); reopened.body.Job != opened.body.Job || st.State != store.StateQueued {
		t.Errorf("a new trigger for the same head: job %d in state %s, want job %d queued again", reopened.body.Job, st.State, opened.body.Job)
	}
}
