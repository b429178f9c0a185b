package webhook

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestClientOf(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	many := strings.TrimSuffix(strings.Repeat("10.0.0.1, ", MaxForwardedHops+3), ", ")
	tests := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"untrusted peer, header ignored", "203.0.113.5:443", []string{"198.51.100.1"}, "203.0.113.5"},
		{"trusted peer, no header", "10.1.1.1:443", nil, "10.1.1.1"},
		{"trusted peer names the client", "10.1.1.1:443", []string{"198.51.100.1"}, "198.51.100.1"},
		{"right to left past trusted hops", "10.1.1.1:443", []string{"192.0.2.7, 198.51.100.1, 10.2.2.2"}, "198.51.100.1"},
		{"several headers are one list", "10.1.1.1:443", []string{"198.51.100.1", "10.2.2.2"}, "198.51.100.1"},
		{"garbage stops the walk at the last trusted hop", "10.1.1.1:443", []string{"198.51.100.1, not-an-ip, 10.2.2.2"}, "10.2.2.2"},
		{"v6 trusted peer, mapped client", "[::1]:443", []string{"::ffff:198.51.100.9"}, "198.51.100.9"},
		{"every hop trusted", "10.1.1.1:443", []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3"},
		{"walk bounded", "10.1.1.1:443", []string{"198.51.100.1, " + many}, "10.0.0.1"},
		{"no port", "203.0.113.5", nil, "203.0.113.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientOf(r, trusted); got != tt.want {
				t.Errorf("clientOf = %s, want %s", got, tt.want)
			}
		})
	}
}
