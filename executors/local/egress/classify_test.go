package egress

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassify(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("93.184.216.99"), netip.MustParseAddr("2606:4700::99")}
	tests := []struct {
		addr string
		want Reason
	}{
		// Public.
		{"93.184.216.34", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:82b::200e", ""},

		// Unspecified.
		{"0.0.0.0", ReasonUnspecified},
		{"0.255.255.255", ReasonUnspecified},
		{"1.0.0.0", ""},
		{"::", ReasonUnspecified},

		// Private and its boundaries.
		{"9.255.255.255", ""},
		{"10.0.0.0", ReasonPrivate},
		{"10.255.255.255", ReasonPrivate},
		{"11.0.0.0", ""},
		{"172.15.255.255", ""},
		{"172.16.0.0", ReasonPrivate},
		{"172.31.255.255", ReasonPrivate},
		{"172.32.0.0", ""},
		{"192.167.255.255", ""},
		{"192.168.0.0", ReasonPrivate},
		{"192.168.255.255", ReasonPrivate},
		{"192.169.0.0", ""},
		{"100.63.255.255", ""},
		{"100.64.0.0", ReasonPrivate},
		{"100.100.100.200", ReasonPrivate},
		{"100.127.255.255", ReasonPrivate},
		{"100.128.0.0", ""},
		{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonReserved},
		{"fc00::", ReasonPrivate},
		{"fd12:3456::1", ReasonPrivate},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonPrivate},
		{"64:ff9b:1::1", ReasonPrivate},

		// Loopback.
		{"126.255.255.255", ""},
		{"127.0.0.0", ReasonLoopback},
		{"127.0.0.1", ReasonLoopback},
		{"127.255.255.255", ReasonLoopback},
		{"128.0.0.0", ""},
		{"::1", ReasonLoopback},

		// Link-local.
		{"169.253.255.255", ""},
		{"169.254.0.0", ReasonLinkLocal},
		{"169.254.169.254", ReasonLinkLocal},
		{"169.254.255.255", ReasonLinkLocal},
		{"169.255.0.0", ""},
		{"fe80::", ReasonLinkLocal},
		{"fe80::1%eth0", ReasonLinkLocal},
		{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonLinkLocal},
		{"fec0::", ReasonReserved},

		// Multicast and broadcast.
		{"223.255.255.255", ""},
		{"224.0.0.0", ReasonMulticast},
		{"239.255.255.255", ReasonMulticast},
		{"255.255.255.255", ReasonMulticast},
		{"ff02::1", ReasonMulticast},

		// Reserved.
		{"240.0.0.0", ReasonReserved},
		{"255.255.255.254", ReasonReserved},
		{"192.0.0.0", ReasonReserved},
		{"192.0.0.255", ReasonReserved},
		{"192.0.1.0", ""},
		{"192.0.2.0", ""},   // documentation and benchmark blocks are dialed (see classRanges),
		{"192.0.2.255", ""}, // documentation and benchmark blocks are dialed (see classRanges),
		{"192.0.3.0", ""},
		{"192.88.99.1", ReasonReserved},
		{"198.17.255.255", ""},
		{"198.18.0.0", ""},     // documentation and benchmark blocks are dialed (see classRanges),
		{"198.19.255.255", ""}, // documentation and benchmark blocks are dialed (see classRanges),
		{"198.20.0.0", ""},
		{"198.51.100.7", ""},  // documentation and benchmark blocks are dialed (see classRanges),
		{"203.0.113.255", ""}, // documentation and benchmark blocks are dialed (see classRanges),
		{"203.0.114.0", ""},
		{"2001:db8::1", ""}, // documentation and benchmark blocks are dialed (see classRanges),
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:db9::", ""},
		{"2001::1", ReasonReserved},         // Teredo
		{"2001:1ff:ffff::", ReasonReserved}, // end of 2001::/23
		{"2001:200::1", ""},
		{"3fff::1", ""}, // documentation and benchmark blocks are dialed (see classRanges),
		{"5f00::1", ReasonReserved},
		{"100::1", ReasonReserved},
		{"::2", ReasonReserved},
		{"::7f00:1", ReasonReserved}, // IPv4-compatible, deprecated
		{"::ffff:0:7f00:1", ReasonReserved},
		{"4000::1", ReasonReserved}, // outside 2000::/3
		{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ReasonReserved},

		// IPv4-mapped: the IPv4 address decides.
		{"::ffff:127.0.0.1", ReasonLoopback},
		{"::ffff:10.0.0.1", ReasonPrivate},
		{"::ffff:169.254.169.254", ReasonLinkLocal},
		{"::ffff:93.184.216.34", ""},

		// NAT64 and 6to4: the embedded IPv4 address decides.
		{"64:ff9b::7f00:1", ReasonLoopback},
		{"64:ff9b::a00:5", ReasonPrivate},
		{"64:ff9b::a9fe:a9fe", ReasonLinkLocal},
		{"64:ff9b::5db8:d822", ""},
		{"2002:7f00:1::", ReasonLoopback},
		{"2002:a00:5:1234::1", ReasonPrivate},
		{"2002:c0a8:101::", ReasonPrivate},
		{"2002:5db8:d822::1", ""},

		// The worker's own addresses, directly or embedded.
		{"93.184.216.99", ReasonOwnAddress},
		{"::ffff:93.184.216.99", ReasonOwnAddress},
		{"64:ff9b::5db8:d863", ReasonOwnAddress},
		{"2002:5db8:d863::", ReasonOwnAddress},
		{"2606:4700::99", ReasonOwnAddress},
		{"2606:4700::98", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := Classify(netip.MustParseAddr(tt.addr), own); got != tt.want {
				t.Errorf("Classify(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
	if got := Classify(netip.Addr{}, nil); got != ReasonReserved {
		t.Errorf("invalid address: %q", got)
	}
	// A loopback own address is loopback first.
	if got := Classify(netip.MustParseAddr("127.0.0.1"), []netip.Addr{netip.MustParseAddr("127.0.0.1")}); got != ReasonLoopback {
		t.Errorf("own loopback: %q", got)
	}
}

func TestReasonsAreStable(t *testing.T) {
	got := []Reason{ReasonNotAllowed, ReasonLoopback, ReasonPrivate, ReasonLinkLocal, ReasonUnspecified, ReasonMulticast,
		ReasonReserved, ReasonOwnAddress, ReasonResolve, ReasonBadRequest, ReasonLimit, ReasonDialFailed, ReasonTampered,
		ReasonMethod, ReasonIntegrity, ReasonUpstream}
	want := []Reason{"not_allowed", "address_loopback", "address_private", "address_link_local", "address_unspecified",
		"address_multicast", "address_reserved", "address_own", "resolve_failed", "bad_request", "connection_limit", "dial_failed", "socket_tampered",
		"method_not_allowed", "integrity_mismatch", "upstream_failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
}
