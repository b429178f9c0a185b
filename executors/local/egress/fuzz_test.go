package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// fuzzSeeds are request heads of every kind the proxy meets.
func fuzzSeeds() []string {
	return []string{
		"CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n\r\n",
		"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n\x16\x03\x01",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"GET http://registry.npmjs.org/pkg HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, X-A\r\n\r\nGET http://127.0.0.1:1/ HTTP/1.1\r\n\r\n",
		"POST http://registry.npmjs.org/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET https://registry.npmjs.org/ HTTP/1.1\r\n\r\n",
		"GET /x HTTP/1.0\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"CONNECT user@registry.npmjs.org:443 HTTP/1.1\r\n\r\n",
	}
}

// Whatever destination a request names and the proxy accepts is
// canonical: it parses back to itself.
func FuzzRequestDestination(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		host, port, err := requestDestination(req)
		if err != nil {
			return
		}
		h, p, err := parseTarget(hostPortString(host, port), 0)
		if err != nil || h != host || p != port {
			t.Fatalf("%q:%d parses back as %q:%d, %v", host, port, h, p, err)
		}
		if _, _, err := normalizeHost(host); err != nil {
			t.Fatalf("accepted host %q: %v", host, err)
		}
	})
}

// Whatever bytes a client sends, the proxy never dials anything but an
// allowed, checked address, and lets the connection go.
func FuzzProxySession(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var mu sync.Mutex
		var dialed []string
		p, err := New(Config{
			Rules:         []Rule{{Host: "registry.npmjs.org"}, {Host: "127.0.0.1", Port: 1}},
			OwnAddrs:      []netip.Addr{},
			HeaderTimeout: 200 * time.Millisecond,
			IdleTimeout:   200 * time.Millisecond,
			Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
				if host != "registry.npmjs.org" {
					t.Errorf("resolved %q", host)
				}
				return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.1")}, nil
			},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				mu.Lock()
				dialed = append(dialed, addr)
				mu.Unlock()
				return nil, errors.New("fuzz: no dialing")
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		client, server := net.Pipe()
		p.admit(context.Background(), server)
		client.SetDeadline(time.Now().Add(waitLimit))
		go func() {
			client.Write(raw)
		}()
		if _, err := io.Copy(io.Discard, client); err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("the proxy kept the connection: %v", err)
		}
		client.Close()
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		for _, d := range dialed {
			if !slices.Contains([]string{"127.0.0.1:1", "93.184.216.34:443", "93.184.216.34:80"}, d) {
				t.Errorf("dialed %s", d)
			}
		}
	})
}
