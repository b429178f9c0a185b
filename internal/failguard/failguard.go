// Package failguard limits clients that keep failing a check — a forged
// webhook signature, a wrong dashboard token — per client address in
// fixed windows, and finds a request's client address behind the
// operator's reverse proxies. Stdlib only.
package failguard

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// MaxTrackedClients bounds a guard's memory: past it, new clients are not
// tracked until the window turns (the guard fails open; the check itself
// still stands).
const MaxTrackedClients = 10_000

// Guard counts failures per client address in fixed windows.
type Guard struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu     sync.Mutex
	start  time.Time
	counts map[string]int
}

// New returns a guard that limits a client after limit failures in a
// window (a negative limit never limits). now is the clock.
func New(limit int, window time.Duration, now func() time.Time) *Guard {
	if now == nil {
		now = time.Now
	}
	return &Guard{limit: limit, window: window, now: now, counts: map[string]int{}}
}

// turn resets the counts when the window has passed; mu is held.
func (b *Guard) turn() {
	if now := b.now(); now.Sub(b.start) >= b.window {
		b.start, b.counts = now, map[string]int{}
	}
}

// Limited reports whether client has used up its failures for the window.
func (b *Guard) Limited(client string) bool {
	if b.limit < 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.turn()
	return b.counts[client] >= b.limit
}

// Failed counts one failure of client.
func (b *Guard) Failed(client string) {
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

// ClientOf is the client address a request came from: the peer's IP, or,
// when the peer is one of trusted (a reverse proxy of the operator's), the
// nearest address in X-Forwarded-For that is not itself trusted. The
// header is read right to left: entries left of the first untrusted one
// were written by whoever sent the request and prove nothing.
func ClientOf(r *http.Request, trusted []netip.Prefix) string {
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
