package webhook

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Limits of the bad-signature guard (reliability W4): a client that keeps
// sending deliveries that fail the signature check — a timing probe, a
// scanner — has its further failures answered 429 for the rest of the
// window. Every delivery is verified first, and one that verifies is never
// limited: behind a reverse proxy or a tunnel every client shares one peer
// address, and a forger must not be able to lock GitHub's deliveries out.
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

// MaxForwardedHops bounds how many X-Forwarded-For entries are walked.
const MaxForwardedHops = 32

// clientOf is the client address a request came from: the peer's IP, or,
// when the peer is one of trusted (a reverse proxy of the operator's), the
// nearest address in X-Forwarded-For that is not itself trusted. The
// header is read right to left: entries left of the first untrusted one
// were written by whoever sent the request and prove nothing.
func clientOf(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !inAny(peer.Unmap(), trusted) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	client := peer
	for i, walked := len(hops)-1, 0; i >= 0 && walked < MaxForwardedHops; i, walked = i-1, walked+1 {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			break // garbage: the last trusted hop is the client
		}
		client = a.Unmap()
		if !inAny(client, trusted) {
			break
		}
	}
	return client.String()
}

func inAny(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
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
