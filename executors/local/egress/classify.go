package egress

import (
	"net/netip"
	"slices"
)

// Reason is why a destination was refused. The strings are recorded in
// reviews' evidence: they are appended to, never renamed.
type Reason string

// The reasons, each with the addresses or requests it stands for.
const (
	// ReasonNotAllowed: host:port matches no rule.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonLoopback: 127.0.0.0/8, ::1.
	ReasonLoopback Reason = "address_loopback"
	// ReasonPrivate: 10/8, 172.16/12, 192.168/16, fc00::/7, 100.64.0.0/10
	// (CGNAT, where some clouds keep metadata, 100.100.100.200), and the
	// local-use NAT64 prefix 64:ff9b:1::/48.
	ReasonPrivate Reason = "address_private"
	// ReasonLinkLocal: 169.254/16 (cloud metadata, 169.254.169.254),
	// fe80::/10.
	ReasonLinkLocal Reason = "address_link_local"
	// ReasonUnspecified: 0.0.0.0/8, ::.
	ReasonUnspecified Reason = "address_unspecified"
	// ReasonMulticast: 224/4, ff00::/8, and the broadcast address
	// 255.255.255.255.
	ReasonMulticast Reason = "address_multicast"
	// ReasonReserved: any other address that is not globally routable
	// unicast (see reservedRanges).
	ReasonReserved Reason = "address_reserved"
	// ReasonOwnAddress: one of the worker's own interface addresses.
	ReasonOwnAddress Reason = "address_own"
	// ReasonResolve: the name did not resolve.
	ReasonResolve Reason = "resolve_failed"
	// ReasonBadRequest: a malformed CONNECT target, request line or
	// head, a head over the size limit, or an unsupported method or
	// scheme (an https:// absolute URI without CONNECT, ftp://, a
	// request in origin form).
	ReasonBadRequest Reason = "bad_request"
	// ReasonLimit: too many connections were open. No longer recorded as
	// a denial: a connection past MaxConns is counted as throttled
	// (Report.Throttled). Kept so older records read.
	ReasonLimit Reason = "connection_limit"
	// ReasonDialFailed: the destination was allowed but none of its
	// permitted addresses accepted a connection.
	ReasonDialFailed Reason = "dial_failed"
	// ReasonTampered: the sandbox switched a connection it handed over
	// to blocking mode (cleared O_NONBLOCK on the open file it shares
	// with the proxy), and the proxy hung it up. Host and port are what
	// the connection last asked for; "" and 0 before its first request.
	ReasonTampered Reason = "socket_tampered"
	// ReasonMethod: a request whose method is not GET or HEAD, or that
	// carries a body (npm publish, PUT, POST, DELETE), over plain HTTP
	// or inside a terminated TLS connection. Nothing of it is sent.
	ReasonMethod Reason = "method_not_allowed"
	// ReasonIntegrity: the registry served a tarball whose bytes do not
	// match the integrity it publishes for that version; nothing was
	// stored or passed on.
	ReasonIntegrity Reason = "integrity_mismatch"
	// ReasonUpstream: the destination was allowed and dialed, but the
	// connection failed before the response's head (closed, reset, an
	// unreadable or oversized head, no head in time). The proxy answers
	// 502; the worker's log has the error.
	ReasonUpstream Reason = "upstream_failed"
)

// addrRange is one block of addresses that may not be dialed.
type addrRange struct {
	prefix netip.Prefix
	reason Reason
}

// classRanges returns the blocks that may not be dialed, each with its
// reason, the most specific first. It is a function, not a variable, so
// no package state can be changed.
//
// The documentation (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32, 3fff::/20) and benchmarking (198.18.0.0/15) blocks are
// not here on purpose: no internal service lives in them, while real
// networks resolve public names into them (fake-IP resolvers, transparent
// registry mirrors: the CI network here answers registry.npmjs.org with a
// 203.0.113.0/24 address). Refusing them would protect nothing.
func classRanges() []addrRange {
	return []addrRange{
		// IPv4.
		{netip.MustParsePrefix("0.0.0.0/8"), ReasonUnspecified},        // "this network" (RFC 791)
		{netip.MustParsePrefix("10.0.0.0/8"), ReasonPrivate},           // RFC 1918
		{netip.MustParsePrefix("100.64.0.0/10"), ReasonPrivate},        // shared address space, CGNAT (RFC 6598)
		{netip.MustParsePrefix("127.0.0.0/8"), ReasonLoopback},         // RFC 1122
		{netip.MustParsePrefix("169.254.0.0/16"), ReasonLinkLocal},     // RFC 3927
		{netip.MustParsePrefix("172.16.0.0/12"), ReasonPrivate},        // RFC 1918
		{netip.MustParsePrefix("192.0.0.0/24"), ReasonReserved},        // IETF protocol assignments (RFC 6890)
		{netip.MustParsePrefix("192.88.99.0/24"), ReasonReserved},      // 6to4 relay anycast, deprecated (RFC 7526)
		{netip.MustParsePrefix("192.168.0.0/16"), ReasonPrivate},       // RFC 1918
		{netip.MustParsePrefix("224.0.0.0/4"), ReasonMulticast},        // RFC 5771
		{netip.MustParsePrefix("255.255.255.255/32"), ReasonMulticast}, // limited broadcast (RFC 919)
		{netip.MustParsePrefix("240.0.0.0/4"), ReasonReserved},         // future use (RFC 1112)

		// IPv6.
		{netip.MustParsePrefix("::/128"), ReasonUnspecified},     // RFC 4291
		{netip.MustParsePrefix("::1/128"), ReasonLoopback},       // RFC 4291
		{netip.MustParsePrefix("64:ff9b:1::/48"), ReasonPrivate}, // local-use NAT64 (RFC 8215)
		{netip.MustParsePrefix("::/8"), ReasonReserved},          // IPv4-compatible, SIIT and the rest of ::/8 (RFC 4291)
		{netip.MustParsePrefix("100::/64"), ReasonReserved},      // discard-only (RFC 6666)
		{netip.MustParsePrefix("2001::/23"), ReasonReserved},     // IETF protocol assignments, Teredo among them (RFC 2928, 4380)
		{netip.MustParsePrefix("5f00::/16"), ReasonReserved},     // SRv6 SIDs (RFC 9602)
		{netip.MustParsePrefix("fc00::/7"), ReasonPrivate},       // unique local (RFC 4193)
		{netip.MustParsePrefix("fe80::/10"), ReasonLinkLocal},    // RFC 4291
		{netip.MustParsePrefix("fec0::/10"), ReasonReserved},     // site-local, deprecated (RFC 3879)
		{netip.MustParsePrefix("ff00::/8"), ReasonMulticast},     // RFC 4291
	}
}

// Classify says why addr may not be dialed, or "" when it may: it is
// globally routable unicast and not one of own, the worker's addresses.
// An IPv4-mapped address is judged as its IPv4 address; a NAT64
// (64:ff9b::/96) or 6to4 (2002::/16) address by the IPv4 address it
// embeds, and is the worker's own when either is. An invalid address is
// reserved. Zones are ignored.
func Classify(addr netip.Addr, own []netip.Addr) Reason {
	if !addr.IsValid() {
		return ReasonReserved
	}
	addr = addr.WithZone("").Unmap()
	if v4, ok := embeddedIPv4(addr); ok {
		if r := Classify(v4, own); r != "" {
			return r
		}
	} else if r := rangeReason(addr); r != "" {
		return r
	}
	if isOwn(addr, own) {
		return ReasonOwnAddress
	}
	return ""
}

// rangeReason is the reason of the first block holding addr.
func rangeReason(addr netip.Addr) Reason {
	for _, r := range classRanges() {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	// 2000::/3 is the only IPv6 block IANA allocates for global
	// unicast; whatever else no range above names is reserved.
	if addr.Is6() && !netip.MustParsePrefix("2000::/3").Contains(addr) {
		return ReasonReserved
	}
	return ""
}

// embeddedIPv4 returns the IPv4 address a NAT64 or 6to4 address carries.
func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() {
		return netip.Addr{}, false
	}
	b := addr.As16()
	switch {
	case netip.MustParsePrefix("64:ff9b::/96").Contains(addr):
		// NAT64, well-known prefix (RFC 6052): the last 32 bits.
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case netip.MustParsePrefix("2002::/16").Contains(addr):
		// 6to4 (RFC 3056): bits 16 to 47.
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// isOwn reports whether addr is one of own, compared unmapped and
// without zones.
func isOwn(addr netip.Addr, own []netip.Addr) bool {
	return slices.ContainsFunc(own, func(o netip.Addr) bool { return o.WithZone("").Unmap() == addr })
}
