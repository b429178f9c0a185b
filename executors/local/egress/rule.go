package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Default ports of a Rule whose Port is zero.
const (
	// PortHTTPS is what a CONNECT names for a TLS registry.
	PortHTTPS = 443
	// PortHTTP is the port of a plain-HTTP absolute URI that names none.
	PortHTTP = 80
)

// Limits of a host name (RFC 1035 §2.3.4, as written without the root).
const (
	maxNameBytes  = 253
	maxLabelBytes = 63
)

// Rule is one allow-list entry.
type Rule struct {
	// Host is lower-case; for a wildcard, the suffix without "*."; an IP
	// literal is kept in canonical form (netip.Addr.String(), IPv4-mapped
	// addresses unmapped).
	Host string
	// Port is the one port the rule permits; 0 means the default ports
	// (PortHTTPS and PortHTTP).
	Port int
	// Wildcard: "*.example.com" matches any name strictly below
	// example.com, not example.com itself.
	Wildcard bool
}

// String returns the rule as it is written: "registry.npmjs.org",
// "*.example.com", "127.0.0.1:4873", "[::1]:4873", "[2001:db8::1]".
// ParseRule(r.String()) is r for every rule ParseRule returns.
func (r Rule) String() string {
	h := r.Host
	if r.Wildcard {
		h = "*." + h
	}
	if r.Port == 0 {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(r.Port))
}

// ParseRule parses one allow-list entry: "host", "host:port", "*.suffix"
// or "*.suffix:port", an IPv4 literal with or without a port, or an IPv6
// literal in brackets ("[2001:db8::1]", "[::1]:4873"). A loopback literal
// needs its port: it is the explicit exception Decide makes for a local
// registry. The error names the entry.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(strings.TrimSpace(s))
	if err != nil {
		return Rule{}, fmt.Errorf("allow-list entry %q: %w", s, err)
	}
	return r, nil
}

// ParseAllowList parses a comma-separated list of entries as
// GILF_INSTALL_ALLOW_HOSTS spells it (see ParseRule). Blank entries are
// ignored and repeated ones kept once; every bad entry is reported at once.
func ParseAllowList(s string) ([]Rule, error) {
	var rules []Rule
	var errs []error
	seen := map[Rule]bool{}
	for _, e := range strings.Split(s, ",") {
		if strings.TrimSpace(e) == "" {
			continue
		}
		r, err := ParseRule(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[r] {
			seen[r] = true
			rules = append(rules, r)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rules, nil
}

// RuleFromURL returns the rule of a registry URL's host and port
// ("https://registry.npmjs.org/" → registry.npmjs.org:443). A URL without
// a port gets its scheme's (https 443, http 80), so the rule always
// carries an explicit port; schemes other than http and https are an
// error. User info in the URL is ignored and never repeated in an error.
func RuleFromURL(u string) (Rule, error) {
	pu, err := url.Parse(strings.TrimSpace(u))
	if err != nil {
		// url.Error repeats the whole URL, credentials included.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return Rule{}, fmt.Errorf("registry URL: %w", err)
	}
	port := ""
	switch pu.Scheme {
	case "https":
		port = strconv.Itoa(PortHTTPS)
	case "http":
		port = strconv.Itoa(PortHTTP)
	default:
		return Rule{}, fmt.Errorf("registry URL: scheme %q is not http or https", pu.Scheme)
	}
	if pu.Host == "" {
		return Rule{}, errors.New("registry URL has no host")
	}
	if p := pu.Port(); p != "" {
		port = p
	}
	r, err := parseRule(net.JoinHostPort(pu.Hostname(), port))
	if err == nil && r.Wildcard {
		err = errors.New("a wildcard is not a host")
	}
	if err != nil {
		return Rule{}, fmt.Errorf("registry URL host %q: %w", pu.Host, err)
	}
	return r, nil
}

// parseRule parses a trimmed entry.
func parseRule(s string) (Rule, error) {
	switch {
	case s == "":
		return Rule{}, errors.New("empty entry")
	case strings.Contains(s, "://"):
		return Rule{}, errors.New("a host, not a URL: no scheme")
	case strings.ContainsAny(s, "/?#"):
		return Rule{}, errors.New("a host, not a URL: no path")
	case strings.Contains(s, "@"):
		return Rule{}, errors.New("user info is not allowed")
	}
	host, portText, hasPort, bracketed, err := splitEntry(s)
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	if hasPort {
		if r.Port, err = parsePort(portText); err != nil {
			return Rule{}, err
		}
	}
	if bracketed {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return Rule{}, errors.New("brackets hold an IPv6 address")
		}
		return literalRule(a, r.Port, hasPort)
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.Wildcard = true
		host = rest
	}
	switch {
	case host == "*":
		return Rule{}, errors.New(`"*" alone would allow every host`)
	case strings.Contains(host, "*"):
		return Rule{}, errors.New(`a wildcard may only be the whole first label ("*.example.com")`)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// Without brackets and with at most the port's colon, only
		// an IPv4 address parses here.
		if r.Wildcard {
			return Rule{}, errors.New("a wildcard cannot apply to an IP address")
		}
		return literalRule(a, r.Port, hasPort)
	}
	if r.Host, err = normalizeName(host); err != nil {
		return Rule{}, err
	}
	if r.Wildcard && !strings.Contains(r.Host, ".") {
		return Rule{}, errors.New("a wildcard over a whole top-level domain is not allowed")
	}
	return r, nil
}

// splitEntry splits an entry into host and port text. An IPv6 literal
// must be bracketed: "::1:4873" would otherwise be an address, not
// ::1 port 4873.
func splitEntry(s string) (host, port string, hasPort, bracketed bool, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", "", false, false, errors.New("unclosed [")
		}
		host, rest = rest[:end], rest[end+1:]
		if rest == "" {
			return host, "", false, true, nil
		}
		port, ok = strings.CutPrefix(rest, ":")
		if !ok {
			return "", "", false, false, errors.New("only a port may follow ]")
		}
		return host, port, true, true, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, false, nil
	case 1:
		host, port, _ = strings.Cut(s, ":")
		return host, port, true, false, nil
	}
	return "", "", false, false, errors.New(`an IPv6 address is written in brackets ("[2001:db8::1]:443")`)
}

// parsePort parses a decimal port in 1..65535.
func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("a port is a number from 1 to 65535")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, errors.New("a port is a number from 1 to 65535")
	}
	return n, nil
}

// literalRule is the rule of an IP literal.
func literalRule(a netip.Addr, port int, hasPort bool) (Rule, error) {
	if a.Zone() != "" {
		return Rule{}, errors.New("an address with a zone is not allowed")
	}
	a = a.Unmap()
	switch Classify(a, nil) {
	case ReasonUnspecified:
		return Rule{}, errors.New("the unspecified address cannot be dialed")
	case ReasonMulticast:
		return Rule{}, errors.New("a multicast or broadcast address cannot be dialed")
	case ReasonLoopback:
		if !hasPort {
			return Rule{}, errors.New("a loopback address needs an explicit port (e.g. 127.0.0.1:4873)")
		}
	}
	return Rule{Host: a.String(), Port: port}, nil
}

// normalizeName validates a host name and returns it lower-case without
// its one optional trailing dot. Only letters, digits and inner hyphens
// make a label (the A-label of an internationalised name is fine). A name
// whose last label is a number is refused: URL parsers and inet_aton read
// such a name ("127.1", "0x7f.1") as an IPv4 address.
func normalizeName(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", errors.New("empty host")
	}
	if len(h) > maxNameBytes {
		return "", fmt.Errorf("a host name is at most %d bytes", maxNameBytes)
	}
	b := []byte(h)
	for i, c := range b {
		switch {
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.':
		default:
			return "", errors.New("a host name holds only letters, digits, hyphens and dots")
		}
	}
	h = string(b)
	labels := strings.Split(h, ".")
	for _, l := range labels {
		switch {
		case l == "":
			return "", errors.New("empty label")
		case len(l) > maxLabelBytes:
			return "", fmt.Errorf("a label is at most %d bytes", maxLabelBytes)
		case l[0] == '-' || l[len(l)-1] == '-':
			return "", errors.New("a label neither starts nor ends with a hyphen")
		}
	}
	if numeric(labels[len(labels)-1]) {
		return "", errors.New("a host name whose last label is a number reads as an IPv4 address")
	}
	return h, nil
}

// numeric reports whether a label is a decimal or 0x-hexadecimal number,
// as the WHATWG URL standard's ends-in-a-number check has it.
func numeric(l string) bool {
	if hex, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// normalizeHost reads a destination host as a client wrote it: an IP
// literal, bracketed or not, or a name. It returns the canonical host
// (unmapped address or lower-case name) and the address when it is one.
func normalizeHost(host string) (canon string, addr netip.Addr, err error) {
	if inner, ok := strings.CutPrefix(host, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		a, err := netip.ParseAddr(inner)
		if !ok || err != nil || !a.Is6() {
			return "", netip.Addr{}, errors.New("brackets hold an IPv6 address")
		}
		host = inner
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, errors.New("an address with a zone is not allowed")
		}
		a = a.Unmap()
		return a.String(), a, nil
	}
	name, err := normalizeName(host)
	return name, netip.Addr{}, err
}

// Match ranks, best last: Matches prefers the rule that names the host
// itself over a wildcard, and an explicit port over the default ones.
const (
	matchNone = iota
	matchWildcardDefault
	matchWildcardPort
	matchHostDefault
	matchHostPort
)

// Matches reports the rule that permits host:port, if any. host is as the
// client wrote it (an IP literal may be bracketed); port is explicit.
// Names compare case-insensitively and without one trailing dot; an IP
// literal matches only a rule with the same address (IPv4-mapped
// addresses unmapped). A rule with Port 0 permits ports 443 and 80 only.
// When several rules match, the most specific wins: the host itself before
// a wildcard, an explicit port before the default ones, then list order.
func Matches(rules []Rule, host string, port int) (Rule, bool) {
	canon, addr, err := normalizeHost(host)
	if err != nil || port < 1 || port > 65535 {
		return Rule{}, false
	}
	best, bestRank := Rule{}, matchNone
	for _, r := range rules {
		if rank := matchRank(r, canon, addr, port); rank > bestRank {
			best, bestRank = r, rank
		}
	}
	return best, bestRank != matchNone
}

// matchRank is how well r permits the canonical host (addr when it is a
// literal) at port.
func matchRank(r Rule, canon string, addr netip.Addr, port int) int {
	explicit := false
	switch {
	case r.Port == port:
		explicit = true
	case r.Port == 0 && (port == PortHTTPS || port == PortHTTP):
	default:
		return matchNone
	}
	if addr.IsValid() {
		ra, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]"))
		if r.Wildcard || err != nil || ra.WithZone("").Unmap() != addr {
			return matchNone
		}
	} else {
		rh := strings.ToLower(strings.TrimSuffix(r.Host, "."))
		switch {
		case rh == "":
			return matchNone
		case r.Wildcard:
			if !strings.HasSuffix(canon, "."+rh) {
				return matchNone
			}
			if explicit {
				return matchWildcardPort
			}
			return matchWildcardDefault
		case rh != canon:
			return matchNone
		}
	}
	if explicit {
		return matchHostPort
	}
	return matchHostDefault
}
