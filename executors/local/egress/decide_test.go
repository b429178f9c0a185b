package egress

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestDecide(t *testing.T) {
	rules := []Rule{
		{Host: "registry.npmjs.org"},
		{Host: "localhost"},
		{Host: "localhost", Port: 4873},
		{Host: "127.0.0.1", Port: 4873},
		{Host: "::1", Port: 4874},
		{Host: "10.1.2.3"},
		{Host: "10.9.9.9", Port: 8080},
		{Host: "169.254.169.254", Port: 80},
		{Host: "example.com", Wildcard: true},
		{Host: "93.184.216.34"},
	}
	own := addrs("93.184.216.99")
	tests := []struct {
		name     string
		host     string
		port     int
		resolved []netip.Addr
		want     Decision
	}{
		{
			name: "not allowed ignores the resolver", host: "evil.example", port: 443,
			resolved: addrs("93.184.216.34"),
			want:     Decision{Reason: ReasonNotAllowed},
		},
		{
			name: "not allowed port", host: "registry.npmjs.org", port: 22,
			resolved: addrs("93.184.216.34"),
			want:     Decision{Reason: ReasonNotAllowed},
		},
		{
			name: "public name", host: "registry.npmjs.org", port: 443,
			resolved: addrs("104.16.1.35", "2606:4700::6810:123"),
			want:     Decision{Allowed: true, Rule: rules[0], Addrs: addrs("104.16.1.35", "2606:4700::6810:123")},
		},
		{
			name: "allow-listed name resolving to loopback", host: "registry.npmjs.org", port: 443,
			resolved: addrs("127.0.0.1"),
			want:     Decision{Rule: rules[0], Reason: ReasonLoopback},
		},
		{
			name: "localhost is never loopback's way in", host: "localhost", port: 443,
			resolved: addrs("127.0.0.1", "::1"),
			want:     Decision{Rule: rules[1], Reason: ReasonLoopback},
		},
		{
			name: "localhost with its explicit port rule", host: "localhost", port: 4873,
			resolved: addrs("127.0.0.1"),
			want:     Decision{Rule: rules[2], Reason: ReasonLoopback},
		},
		{
			name: "mix keeps only the public addresses", host: "registry.npmjs.org", port: 443,
			resolved: addrs("10.0.0.5", "104.16.1.35", "::ffff:127.0.0.1", "169.254.169.254", "::ffff:104.16.1.35", "104.16.2.35", "93.184.216.99"),
			want:     Decision{Allowed: true, Rule: rules[0], Addrs: addrs("104.16.1.35", "104.16.2.35")},
		},
		{
			name: "all forbidden: the first one's reason", host: "a.example.com", port: 443,
			resolved: addrs("169.254.169.254", "10.0.0.5"),
			want:     Decision{Rule: rules[8], Reason: ReasonLinkLocal},
		},
		{
			name: "own address", host: "a.example.com", port: 443,
			resolved: addrs("93.184.216.99"),
			want:     Decision{Rule: rules[8], Reason: ReasonOwnAddress},
		},
		{
			name: "nothing resolved", host: "registry.npmjs.org", port: 443,
			want: Decision{Rule: rules[0], Reason: ReasonResolve},
		},
		{
			name: "invalid addresses only", host: "registry.npmjs.org", port: 443,
			resolved: []netip.Addr{{}},
			want:     Decision{Rule: rules[0], Reason: ReasonReserved},
		},
		{
			name: "explicit loopback literal", host: "127.0.0.1", port: 4873,
			resolved: addrs("93.184.216.34"), // ignored for a literal
			want:     Decision{Allowed: true, Rule: rules[3], Addrs: addrs("127.0.0.1")},
		},
		{
			name: "explicit loopback literal, mapped", host: "::ffff:127.0.0.1", port: 4873,
			want: Decision{Allowed: true, Rule: rules[3], Addrs: addrs("127.0.0.1")},
		},
		{
			name: "explicit loopback literal, other port", host: "127.0.0.1", port: 4874,
			want: Decision{Reason: ReasonNotAllowed},
		},
		{
			name: "explicit loopback literal, other loopback address", host: "127.0.0.2", port: 4873,
			want: Decision{Reason: ReasonNotAllowed},
		},
		{
			name: "explicit v6 loopback literal", host: "::1", port: 4874,
			want: Decision{Allowed: true, Rule: rules[4], Addrs: addrs("::1")},
		},
		{
			name: "private literal without explicit port", host: "10.1.2.3", port: 443,
			want: Decision{Rule: rules[5], Reason: ReasonPrivate},
		},
		{
			name: "private literal with explicit port", host: "10.9.9.9", port: 8080,
			want: Decision{Allowed: true, Rule: rules[6], Addrs: addrs("10.9.9.9")},
		},
		{
			// The metadata address is never dialed, even when an
			// operator lists it.
			name: "metadata literal explicitly listed", host: "169.254.169.254", port: 80,
			want: Decision{Reason: ReasonLinkLocal, Rule: rules[7]},
		},
		{
			name: "public literal", host: "93.184.216.34", port: 443,
			resolved: addrs("10.0.0.1"),
			want:     Decision{Allowed: true, Rule: rules[9], Addrs: addrs("93.184.216.34")},
		},
		{
			name: "literal not in the rules", host: "93.184.216.35", port: 443,
			want: Decision{Reason: ReasonNotAllowed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(rules, tt.host, tt.port, tt.resolved, own)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// A rule built in code rather than parsed cannot open the unspecified or a
// multicast address, even as an explicit literal.
func TestDecideNeverUnspecified(t *testing.T) {
	rules := []Rule{{Host: "0.0.0.0", Port: 4873}, {Host: "224.0.0.1", Port: 4873}}
	for _, host := range []string{"0.0.0.0", "224.0.0.1"} {
		if d := Decide(rules, host, 4873, nil, nil); d.Allowed {
			t.Errorf("%s allowed: %+v", host, d)
		}
	}
}
