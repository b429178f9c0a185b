package failguard

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
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
			if got := ClientOf(r, trusted); got != tt.want {
				t.Errorf("ClientOf = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestGuardWindowAndBounds(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	g := New(3, time.Minute, clock)
	for i := range 3 {
		if g.Limited("a") {
			t.Fatalf("limited after %d failures, limit 3", i)
		}
		g.Failed("a")
	}
	if !g.Limited("a") || g.Limited("b") {
		t.Fatal("a must be limited after 3 failures, b not")
	}
	now = now.Add(time.Minute) // the window turns
	if g.Limited("a") {
		t.Fatal("still limited in the next window")
	}
	off := New(-1, time.Minute, clock)
	for range 10 {
		off.Failed("a")
	}
	if off.Limited("a") {
		t.Fatal("a negative limit limited")
	}
	full := New(1, time.Minute, clock)
	for i := range MaxTrackedClients {
		full.Failed(strconv.Itoa(i))
	}
	full.Failed("one-too-many")
	if full.Limited("one-too-many") || !full.Limited("0") {
		t.Fatal("past MaxTrackedClients new clients are not tracked; tracked ones stay limited")
	}
}
