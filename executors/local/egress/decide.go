package egress

import (
	"net/netip"
	"slices"
)

// Decision is the verdict on one destination.
type Decision struct {
	Allowed bool
	// Reason is set when !Allowed.
	Reason Reason
	// Rule is the matching rule, when one matched.
	Rule Rule
	// Addrs are the addresses that may be dialed, in order, unmapped and
	// without duplicates; non-empty when Allowed.
	Addrs []netip.Addr
}

// Decide is the whole decision on host:port, and pure. The rules come
// first: no match is ReasonNotAllowed, and resolved is not looked at.
// Then every address is classified (Classify, with own the worker's
// addresses); forbidden ones are dropped, and when none is left the
// destination is denied with the reason of the first forbidden one (with
// ReasonResolve when there was none at all).
//
// For an IP-literal host, resolved is ignored and the literal itself is
// the only address. The one way to a loopback, private or own address
// (a registry on the worker or its LAN): the matching rule is that same
// literal with an explicit port, and the client asked for exactly that
// port. Link-local (the cloud metadata address), reserved, unspecified and
// multicast addresses are never dialed, whatever the allow-list says. A name is never excepted,
// so an allow-listed "localhost" that resolves to loopback is denied.
func Decide(rules []Rule, host string, port int, resolved []netip.Addr, own []netip.Addr) Decision {
	rule, ok := Matches(rules, host, port)
	if !ok {
		return Decision{Reason: ReasonNotAllowed}
	}
	d := Decision{Rule: rule}
	_, literal, err := normalizeHost(host)
	if err != nil { // Matches accepted it; defensive only
		d.Reason = ReasonBadRequest
		return d
	}
	if literal.IsValid() {
		reason := Classify(literal, own)
		if reason == "" || (explicitLiteral(rule, literal, port) && exceptable(reason)) {
			d.Allowed, d.Addrs = true, []netip.Addr{literal}
		} else {
			d.Reason = reason
		}
		return d
	}
	var first Reason
	for _, a := range resolved {
		a = a.WithZone("").Unmap()
		if reason := Classify(a, own); reason != "" {
			if first == "" {
				first = reason
			}
			continue
		}
		if !slices.Contains(d.Addrs, a) {
			d.Addrs = append(d.Addrs, a)
		}
	}
	switch {
	case len(d.Addrs) > 0:
		d.Allowed = true
	case first != "":
		d.Reason = first
	default:
		d.Reason = ReasonResolve
	}
	return d
}

// explicitLiteral reports whether r is the IP literal addr with exactly
// port: the allow-list entry that excepts addr from classification.
func explicitLiteral(r Rule, addr netip.Addr, port int) bool {
	if r.Wildcard || r.Port == 0 || r.Port != port {
		return false
	}
	ra, err := netip.ParseAddr(r.Host)
	return err == nil && ra.WithZone("").Unmap() == addr
}

// exceptable reports whether an explicit literal rule may open an address
// refused for reason. Own is among them: the worker's interfaces include
// 127.0.0.1.
func exceptable(reason Reason) bool {
	switch reason {
	case ReasonLoopback, ReasonPrivate, ReasonOwnAddress:
		return true
	}
	return false
}
