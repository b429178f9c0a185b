package webhook

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Limits of the bad-signature guard (reliability W4): a client that keeps
// sending deliveries that fail the signature check — a timing probe, a
// scanner — is answered 429 without another HMAC for the rest of the
// window. Deliveries that verify are never limited.
const (
	DefaultBadSignatureLimit  = 30
	DefaultBadSignatureWindow = time.Minute
	// MaxTrackedClients bounds the guard's memory: past it, new clients
	// are not tracked until the window turns (the guard fails open; the
	// signature check still stands).
	MaxTrackedClients = 10_000
)

// badSignatures counts signature failures per client address in fixed
// windows.
type badSignatures struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu     sync.Mutex
	start  time.Time
	counts map[string]int
}

func newBadSignatures(limit int, window time.Duration, now func() time.Time) *badSignatures {
	if limit == 0 {
		limit = DefaultBadSignatureLimit
	}
	if window <= 0 {
		window = DefaultBadSignatureWindow
	}
	return &badSignatures{limit: limit, window: window, now: now, counts: map[string]int{}}
}

// turn resets the counts when the window has passed; mu is held.
func (b *badSignatures) turn() {
	if now := b.now(); now.Sub(b.start) >= b.window {
		b.start, b.counts = now, map[string]int{}
	}
}

// limited reports whether client has used up its failures for the window.
func (b *badSignatures) limited(client string) bool {
	if b.limit < 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.turn()
	return b.counts[client] >= b.limit
}

// failed counts one signature failure of client.
func (b *badSignatures) failed(client string) {
	if b.limit < 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.turn()
	if _, ok := b.counts[client]; ok || len(b.counts) < MaxTrackedClients {
		b.counts[client]++
	}
}

// clientOf is the client address a request came from: the peer's IP (a
// proxy in front of gilf shares one budget across its clients).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Allowlist limits which GitHub accounts and installations gilf reviews
// (reliability W14: anyone can install a public App, and every install
// costs sandbox time). Empty lists allow everyone. A delivery outside it is
// recorded and answered 202 ignored, so GitHub shows no failure.
type Allowlist struct {
	// Accounts are owner logins (case-insensitive): the part of the
	// repository's full name before the slash.
	Accounts []string
	// Installations are installation ids.
	Installations []int64
}

func (a Allowlist) empty() bool { return len(a.Accounts) == 0 && len(a.Installations) == 0 }

// allows reports whether a delivery from installation for repo (owner/name)
// may make a job. With both lists set, either may allow it.
func (a Allowlist) allows(installation int64, repo string) bool {
	if a.empty() {
		return true
	}
	if installation != 0 && slices.Contains(a.Installations, installation) {
		return true
	}
	owner, _, _ := strings.Cut(repo, "/")
	return owner != "" && slices.ContainsFunc(a.Accounts, func(s string) bool { return strings.EqualFold(s, owner) })
}

// notAllowed is the decision for a delivery outside the allowlist.
func notAllowed() decision {
	return decision{status: validation.DeliveryIgnored, reason: "installation or account not in the allowlist", code: http.StatusAccepted}
}
