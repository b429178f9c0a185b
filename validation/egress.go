package validation

import (
	"fmt"
	"strings"
)

// Egress is the record of one step's network (SPEC §4.2, §7 egress): what
// it was allowed to reach, who enforced that, and what it tried. It never
// holds request paths, headers or bodies: only destinations and counts.
type Egress struct {
	// Network is the network the step was given (NetworkNone,
	// NetworkRegistry, or NetworkHost where no namespace could be made).
	Network Network `json:"network"`
	// Enforcement says who enforced the policy: the worker's kernel and
	// proxy, the provider, or nobody gilf can observe (intent only).
	Enforcement Enforcement `json:"enforcement"`
	// AllowList is the destinations that were permitted, as configured
	// ("registry.npmjs.org", "*.example.com", "127.0.0.1:4873").
	AllowList []string `json:"allowList,omitempty"`
	// Allowed and Denied are what the proxy saw, when gilf runs one.
	Allowed []EgressHost   `json:"allowed,omitempty"`
	Denied  []EgressDenial `json:"denied,omitempty"`
	// DeniedOmitted counts denials of destinations past the listing cap;
	// they were refused like the others.
	DeniedOmitted int `json:"deniedOmitted,omitempty"`
	// Observed is true when the Allowed and Denied lists are the whole
	// truth (gilf's own proxy saw every connection); false when gilf
	// could not observe the step's connections.
	Observed bool `json:"observed"`
	// Throttled counts connections the proxy turned away because too
	// many were open at once: a limit on volume, not a policy refusal.
	Throttled int `json:"throttled,omitempty"`
	// Cache is what the proxy's shared registry cache served the step.
	Cache *EgressCache `json:"cache,omitempty"`
}

// EgressCache counts one step's requests to the proxy's verifying
// registry cache: metadata and tarballs served from it (Hits, with the
// BytesServed), and those fetched from the registry (Misses).
type EgressCache struct {
	Hits        int   `json:"hits"`
	Misses      int   `json:"misses"`
	BytesServed int64 `json:"bytesServed"`
}

// Enforcement names who enforces a step's egress policy.
type Enforcement string

const (
	// EnforcedByWorker: the step ran in its own network namespace and
	// its only way out was gilf's forward proxy.
	EnforcedByWorker Enforcement = "kernel namespace and gilf proxy"
	// EnforcedByKernel: the step ran in its own network namespace with
	// nothing to reach at all.
	EnforcedByKernel Enforcement = "kernel namespace, no network"
	// EnforcedByProvider: the remote sandbox provider applied the rules
	// gilf sent; gilf saw no connection.
	EnforcedByProvider Enforcement = "provider"
	// EnforcedIntentOnly: gilf only passed the intent on (self-host);
	// nothing gilf observes enforces it.
	EnforcedIntentOnly Enforcement = "intent only"
	// EnforcedNone: no namespace could be made (tier none).
	EnforcedNone Enforcement = "not enforced"
)

// EgressHost is one destination a step reached.
type EgressHost struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	// Connections counts the tunnels (CONNECT) opened to it and the
	// plain-HTTP requests forwarded to it, each decided on its own.
	Connections int `json:"connections"`
	// Tunnel says the proxy passed this destination's TLS through
	// opaque (a host named as a tunnel): it saw neither methods nor
	// content.
	Tunnel bool `json:"tunnel,omitempty"`
	// BytesOut is what the step sent, BytesIn what it received.
	BytesOut int64 `json:"bytesOut"`
	BytesIn  int64 `json:"bytesIn"`
}

// EgressDenial is one destination a step was refused, with how often.
type EgressDenial struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Summary is the one line the review shows for the step's network, in the
// words of what happened.
func (e *Egress) Summary() string {
	if e == nil {
		return ""
	}
	switch e.Network {
	case NetworkNone:
		return "none"
	case NetworkHost:
		return "host network (" + string(e.Enforcement) + ")"
	}
	var b strings.Builder
	switch e.Enforcement {
	case EnforcedByWorker:
		fmt.Fprintf(&b, "registry via proxy: %d host", len(e.Allowed))
		if len(e.Allowed) != 1 {
			b.WriteString("s")
		}
	case EnforcedByProvider:
		fmt.Fprintf(&b, "registry allow-list, enforced by the provider (%d entries)", len(e.AllowList))
	case EnforcedIntentOnly:
		b.WriteString("registry (intent only: the command enforces it)")
	default:
		b.WriteString(string(e.Network) + " (" + string(e.Enforcement) + ")")
	}
	if n := e.DeniedCount(); n > 0 {
		fmt.Fprintf(&b, ", %d denied", n)
	}
	if e.Throttled > 0 {
		fmt.Fprintf(&b, ", %d throttled", e.Throttled)
	}
	if c := e.Cache; c != nil && c.Hits+c.Misses > 0 {
		fmt.Fprintf(&b, ", cache %d/%d hits", c.Hits, c.Hits+c.Misses)
	}
	return b.String()
}

// DeniedCount is how many connections were refused in all.
func (e *Egress) DeniedCount() int {
	if e == nil {
		return 0
	}
	n := e.DeniedOmitted
	for _, d := range e.Denied {
		n += d.Count
	}
	return n
}
