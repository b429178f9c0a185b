package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestNewDefaultsAndValidation(t *testing.T) {
	p, err := New(Config{OwnAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	if c.DialTimeout != 10*time.Second || c.HeaderTimeout != 30*time.Second || c.IdleTimeout != 2*time.Minute ||
		c.MaxConns != 256 || c.MaxHeaderBytes != 64<<10 || c.MaxRecorded != 200 || c.BlockingCheckInterval != 250*time.Millisecond ||
		c.Log == nil || c.Resolve == nil || c.Dial == nil {
		t.Errorf("defaults: %+v", c)
	}
	if p, err := New(Config{}); err != nil || p.own == nil {
		t.Errorf("own addresses not read: %v", err)
	}
	_, err = New(Config{
		DialTimeout: -1, HeaderTimeout: -1, IdleTimeout: -1, MaxConns: -1, MaxHeaderBytes: -1, MaxRecorded: -1,
		BlockingCheckInterval: -1,
		Rules:                 []Rule{{Host: "127.0.0.1"}, {Host: "bad_host"}, {Host: "ok.example"}},
	})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, s := range []string{"DialTimeout", "HeaderTimeout", "IdleTimeout", "MaxConns", "MaxHeaderBytes", "MaxRecorded",
		"BlockingCheckInterval", `"127.0.0.1"`, `"bad_host"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not name %s:\n%v", s, err)
		}
	}
	// Rules built in code are made canonical.
	p, err = New(Config{OwnAddrs: []netip.Addr{}, Rules: []Rule{{Host: "Registry.NPMJS.org."}, {Host: "::ffff:127.0.0.1", Port: 4873}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Rule{{Host: "registry.npmjs.org"}, {Host: "127.0.0.1", Port: 4873}}, p.cfg.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

// Every forbidden destination is refused with its reason, and nothing is
// dialed for it.
func TestProxyDeniesBeforeDialing(t *testing.T) {
	names := map[string][]netip.Addr{
		"internal.example.com": addrs("10.0.0.5"),
		"localhost":            addrs("127.0.0.1", "::1"),
		"rebind.example.com":   addrs("127.0.0.1", "169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe"),
		"evil.example.com":     addrs("93.184.216.34"),
	}
	tests := []struct {
		name, allow, target string
		reason              Reason
		resolves            bool
	}{
		{"private literal", "10.1.2.3", "10.1.2.3:443", ReasonPrivate, false},
		{"metadata", "169.254.169.254", "169.254.169.254:80", ReasonLinkLocal, false},
		{"cgnat metadata", "100.100.100.200", "100.100.100.200:80", ReasonPrivate, false},
		{"name to private", "internal.example.com", "internal.example.com:443", ReasonPrivate, true},
		{"localhost", "localhost", "localhost:443", ReasonLoopback, true},
		{"localhost explicit port", "localhost:4873", "localhost:4873", ReasonLoopback, true},
		{"name to forbidden only", "rebind.example.com", "rebind.example.com:443", ReasonLoopback, true},
		{"loopback literal without its rule", "registry.npmjs.org", "127.0.0.1:443", ReasonNotAllowed, false},
		{"mapped loopback", "127.0.0.1:4873", "[::ffff:127.0.0.1]:4874", ReasonNotAllowed, false},
		{"not allowed", "registry.npmjs.org", "evil.example.com:443", ReasonNotAllowed, false},
		{"not allowed port", "registry.npmjs.org", "registry.npmjs.org:22", ReasonNotAllowed, false},
		{"unresolvable", "nxdomain.example.com", "nxdomain.example.com:443", ReasonResolve, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, names)
			tp := startProxy(t, Config{Rules: rules(t, tt.allow)}, rec)
			c := tp.dial(t)
			_, h := connect(t, c, tt.target)
			if h.status != http.StatusForbidden {
				t.Errorf("status %d, want 403", h.status)
			}
			if !strings.Contains(h.body, string(tt.reason)) {
				t.Errorf("body %q does not name %s", h.body, tt.reason)
			}
			expectClosed(t, c, c)
			if d := rec.dials(); len(d) != 0 {
				t.Errorf("dialed %v", d)
			}
			if got := len(rec.resolves()) > 0; got != tt.resolves {
				t.Errorf("resolved: %v, want %v", rec.resolves(), tt.resolves)
			}
			tp.stop(t)
			host, port, err := parseTarget(tt.target, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := Report{Denied: []validation.EgressDenial{{Host: host, Port: port, Reason: string(tt.reason), Count: 1}}}
			if diff := cmp.Diff(want, tp.Report()); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

// A name resolving to a mix is dialed only at its public addresses, by
// address.
func TestProxyDialsOnlyCheckedAddresses(t *testing.T) {
	rec := newRecorder(t, map[string][]netip.Addr{
		"mixed.example.com": addrs("10.0.0.5", "93.184.216.34", "127.0.0.1", "2606:4700::6810:123", "::ffff:93.184.216.34"),
	})
	tp := startProxy(t, Config{Rules: rules(t, "mixed.example.com")}, rec)
	c := tp.dial(t)
	_, h := connect(t, c, "MIXED.example.com.:443")
	if h.status != http.StatusBadGateway || !strings.Contains(h.body, string(ReasonDialFailed)) {
		t.Errorf("got %d %q, want 502 dial_failed (the test dialer refuses public addresses)", h.status, h.body)
	}
	if diff := cmp.Diff([]string{"93.184.216.34:443", "[2606:4700::6810:123]:443"}, rec.dials()); diff != "" {
		t.Errorf("dials (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mixed.example.com"}, rec.resolves()); diff != "" {
		t.Errorf("resolves (-want +got):\n%s", diff)
	}
	tp.stop(t)
	want := Report{Denied: []validation.EgressDenial{{Host: "mixed.example.com", Port: 443, Reason: "dial_failed", Count: 1}}}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestProxyDialFailed(t *testing.T) {
	port := closedPort(t)
	tp := startProxy(t, Config{Rules: rules(t, "127.0.0.1:"+strconv.Itoa(port))}, nil)
	c := tp.dial(t)
	_, h := connect(t, c, "127.0.0.1:"+strconv.Itoa(port))
	if h.status != http.StatusBadGateway {
		t.Errorf("status %d, want 502", h.status)
	}
	tp.stop(t)
	want := Report{Denied: []validation.EgressDenial{{Host: "127.0.0.1", Port: port, Reason: "dial_failed", Count: 1}}}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// Malformed and unsupported requests are refused 400 and recorded as
// bad_request, naming the destination only when it parsed; nothing is
// resolved or dialed for them.
func TestProxyBadRequests(t *testing.T) {
	tests := []struct {
		name, raw string
		status    int
	}{
		{"origin form", "GET /x HTTP/1.1\r\nHost: registry.npmjs.org\r\n\r\n", 400},
		{"asterisk form", "OPTIONS * HTTP/1.1\r\nHost: registry.npmjs.org\r\n\r\n", 400},
		{"https without CONNECT", "GET https://registry.npmjs.org/pkg HTTP/1.1\r\nHost: registry.npmjs.org\r\n\r\n", 400},
		{"ftp", "GET ftp://registry.npmjs.org/pkg HTTP/1.1\r\n\r\n", 400},
		{"user info", "GET http://user:pw@registry.npmjs.org/ HTTP/1.1\r\n\r\n", 400},
		{"empty port", "GET http://registry.npmjs.org:/ HTTP/1.1\r\n\r\n", 400},
		{"bad host", "GET http://bad_host.example/ HTTP/1.1\r\n\r\n", 400},
		{"CONNECT without port", "CONNECT registry.npmjs.org HTTP/1.1\r\n\r\n", 400},
		{"CONNECT user info", "CONNECT user@registry.npmjs.org:443 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT path", "CONNECT registry.npmjs.org:443/x HTTP/1.1\r\n\r\n", 400},
		{"CONNECT origin", "CONNECT /x HTTP/1.1\r\n\r\n", 400},
		{"CONNECT URI", "CONNECT http://registry.npmjs.org:443 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT unclosed bracket", "CONNECT [::1 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT bare v6", "CONNECT ::1:443 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT numeric name", "CONNECT 127.1:443 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT port 0", "CONNECT registry.npmjs.org:0 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT HTTP/2", "CONNECT registry.npmjs.org:443 HTTP/2.0\r\n\r\n", 400},
		{"lower-case connect", "connect registry.npmjs.org:443 HTTP/1.1\r\n\r\n", 400},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400},
		{"TLS without CONNECT", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400},
		{"bad header", "GET http://registry.npmjs.org/ HTTP/1.1\r\nBad Header\r\n\r\n", 400},
		{"bad version", "GET http://registry.npmjs.org/ HTTP/9\r\n\r\n", 400},
	}
	rec := newRecorder(t, map[string][]netip.Addr{"registry.npmjs.org": addrs("104.16.1.35")})
	tp := startProxy(t, Config{Rules: rules(t, "registry.npmjs.org")}, rec)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tp.dial(t)
			if _, err := io.WriteString(c, tt.raw); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			h := readHead(t, br)
			if h.status != tt.status || !strings.Contains(h.body, "bad_request") {
				t.Errorf("got %d %q, want %d bad_request", h.status, h.body, tt.status)
			}
			expectClosed(t, br, c)
		})
	}
	tp.stop(t)
	if d, r := rec.dials(), rec.resolves(); len(d)+len(r) != 0 {
		t.Errorf("dialed %v, resolved %v", d, r)
	}
	want := []validation.EgressDenial{
		{Host: "", Port: 0, Reason: "bad_request", Count: len(tests) - 2},
		{Host: "registry.npmjs.org", Port: 80, Reason: "bad_request", Count: 1},
		{Host: "registry.npmjs.org", Port: 443, Reason: "bad_request", Count: 1},
	}
	if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
}

// A head of exactly MaxHeaderBytes is read; one byte more is refused 431.
func TestProxyMaxHeaderBytes(t *testing.T) {
	const limit = 1024
	tp := startProxy(t, Config{MaxHeaderBytes: limit}, nil)
	headOf := func(size int) string {
		start, end := "CONNECT denied.example.com:443 HTTP/1.1\r\nX-Pad: ", "\r\n\r\n"
		return start + strings.Repeat("p", size-len(start)-len(end)) + end
	}
	for _, tt := range []struct {
		size, status int
	}{
		{limit, http.StatusForbidden},
		{limit + 1, http.StatusRequestHeaderFieldsTooLarge},
		{64 * limit, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(strconv.Itoa(tt.size), func(t *testing.T) {
			raw := headOf(tt.size)
			if len(raw) != tt.size {
				t.Fatalf("head is %d bytes", len(raw))
			}
			c := tp.dial(t)
			go io.WriteString(c, raw)
			br := bufio.NewReader(c)
			if h := readHead(t, br); h.status != tt.status {
				t.Errorf("status %d, want %d", h.status, tt.status)
			}
		})
	}
	tp.stop(t)
	want := []validation.EgressDenial{
		{Host: "", Port: 0, Reason: "bad_request", Count: 2},
		{Host: "denied.example.com", Port: 443, Reason: "not_allowed", Count: 1},
	}
	if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
}

// A client that does not finish its head within HeaderTimeout is hung up
// on; so is one that says nothing at all.
func TestProxyHeaderTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	tp := startProxy(t, Config{HeaderTimeout: timeout}, nil)
	for _, sent := range []string{"", "CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: regis"} {
		t.Run(strconv.Quote(sent), func(t *testing.T) {
			c := tp.dial(t)
			start := time.Now()
			if _, err := io.WriteString(c, sent); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c, c)
			if d := time.Since(start); d < timeout {
				t.Errorf("closed after %v, before the %v timeout", d, timeout)
			}
		})
	}
	tp.stop(t)
	if rep := tp.Report(); len(rep.Denied)+len(rep.Allowed) != 0 {
		t.Errorf("report: %+v", rep)
	}
}

// MaxConns connections are served; the next one is refused 503 and
// recorded with the destination it asked for.
func TestProxyMaxConns(t *testing.T) {
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target), MaxConns: 2}, nil)
	var open []net.Conn
	for range 2 {
		c := tp.dial(t)
		if _, h := connect(t, c, target); h.status != http.StatusOK {
			t.Fatalf("connection within the limit: %d", h.status)
		}
		open = append(open, c)
	}
	c := tp.dial(t)
	_, h := connect(t, c, target)
	if h.status != http.StatusServiceUnavailable || !strings.Contains(h.body, "throttled") {
		t.Fatalf("over the limit: %d %q", h.status, h.body)
	}
	// Throttled, not denied: no policy refused it.
	if rep := tp.Report(); rep.Throttled != 1 || len(rep.Denied) != 0 {
		t.Errorf("throttled %d, denied %+v; want 1 throttled, none denied", rep.Throttled, rep.Denied)
	}
	// A place freed is a place taken.
	open[0].Close()
	waitFor(t, "a freed place", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return tp.active < 2
	})
	c = tp.dial(t)
	if _, h := connect(t, c, target); h.status != http.StatusOK {
		t.Fatalf("after a place was freed: %d", h.status)
	}
}

// Report lists MaxRecorded distinct entries and counts the rest.
func TestProxyRecordCap(t *testing.T) {
	tp := startProxy(t, Config{MaxRecorded: 2}, nil)
	for _, host := range []string{"c.example.com", "a.example.com", "b.example.com", "b.example.com", "a.example.com"} {
		c := tp.dial(t)
		if _, h := connect(t, c, host+":443"); h.status != http.StatusForbidden {
			t.Fatalf("status %d", h.status)
		}
	}
	tp.stop(t)
	want := Report{
		Denied: []validation.EgressDenial{
			{Host: "a.example.com", Port: 443, Reason: "not_allowed", Count: 2},
			{Host: "c.example.com", Port: 443, Reason: "not_allowed", Count: 1},
		},
		DeniedOmitted: 2,
	}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if got := (&validation.Egress{Denied: want.Denied, DeniedOmitted: want.DeniedOmitted}).DeniedCount(); got != 5 {
		t.Errorf("DeniedCount %d, want 5", got)
	}
}

// Past MaxConns connections being served and MaxConns being refused, a
// connection is closed unread; a refused one that names no destination
// in time is recorded without one.
func TestProxyRefusalsAreBounded(t *testing.T) {
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target), MaxConns: 1, HeaderTimeout: 300 * time.Millisecond}, nil)
	served := tp.dial(t)
	if _, h := connect(t, served, target); h.status != http.StatusOK {
		t.Fatalf("status %d", h.status)
	}
	silent := tp.dial(t) // refused, after its head is awaited
	waitFor(t, "a connection being refused", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return tp.refusing == 1
	})
	third := tp.dial(t)
	if b, err := io.ReadAll(third); err != nil || len(b) != 0 {
		t.Errorf("third connection got %q, %v; want it closed unread", b, err)
	}
	br := bufio.NewReader(silent)
	if h := readHead(t, br); h.status != http.StatusServiceUnavailable {
		t.Errorf("silent connection: %d", h.status)
	}
	if rep := tp.Report(); rep.Throttled != 2 || len(rep.Denied) != 0 {
		t.Errorf("throttled %d, denied %+v; want 2 throttled, none denied", rep.Throttled, rep.Denied)
	}
}
