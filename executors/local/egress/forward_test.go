package egress

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// upstreamLog records what an HTTP upstream received.
type upstreamLog struct {
	mu    sync.Mutex
	reqs  []string
	conns int
}

func (u *upstreamLog) handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var hop []string
		for _, k := range []string{"Connection", "X-Hop", "Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "Te", "User-Agent", "Expect"} {
			if r.Header.Get(k) != "" {
				hop = append(hop, k)
			}
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, fmt.Sprintf("%s %s %s host=%s end=%s hop=%v", name, r.Method, r.RequestURI, r.Host, r.Header.Get("X-End"), hop))
		u.mu.Unlock()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://elsewhere.example.com/", http.StatusFound)
			return
		}
		if r.URL.Path == "/chunked" {
			w.Write([]byte("chunk one;"))
			w.(http.Flusher).Flush()
			w.Write([]byte("chunk two"))
			return
		}
		fmt.Fprintf(w, "%s:%s:%s", name, r.URL.Path, body)
	})
}

func (u *upstreamLog) connState(c net.Conn, s http.ConnState) {
	if s == http.StateNew {
		u.mu.Lock()
		u.conns++
		u.mu.Unlock()
	}
}

// Plain-HTTP requests on one kept-alive client connection go to two
// allowed hosts, each decided anew: hop-by-hop fields stripped, redirects
// passed back, and the next request to a denied host refused.
func TestProxyPlainHTTPKeepAlive(t *testing.T) {
	var log1, log2 upstreamLog
	_, p1 := httpUpstream(t, "127.0.0.1", log1.handler("one"), log1.connState)
	_, p2 := httpUpstream(t, "127.0.0.2", log2.handler("two"), log2.connState)
	h1, h2 := "127.0.0.1:"+strconv.Itoa(p1), "127.0.0.2:"+strconv.Itoa(p2)
	rec := newRecorder(t, map[string][]netip.Addr{"elsewhere.example.com": addrs("93.184.216.34")})
	tp := startProxy(t, Config{Rules: rules(t, h1+","+h2+",elsewhere.example.com")}, rec)
	c := tp.dial(t)
	br := bufio.NewReader(c)
	do := func(raw string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		method, _, _ := strings.Cut(raw, " ")
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return resp
	}
	body := func(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

	r := do("GET http://" + h1 + "/a?q=1 HTTP/1.1\r\nHost: ignored.example\r\n" +
		"Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n" +
		"Proxy-Connection: keep-alive\r\nKeep-Alive: 300\r\nTe: trailers\r\nX-End: kept\r\n\r\n")
	if r.StatusCode != 200 || body(r) != "one:/a:" {
		t.Fatalf("first: %d", r.StatusCode)
	}
	r = do("GET http://" + h1 + "/redirect HTTP/1.1\r\nHost: " + h1 + "\r\n\r\n")
	if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "http://elsewhere.example.com/" {
		t.Fatalf("redirect: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	r = do("GET http://" + h2 + "/b HTTP/1.1\r\nHost: " + h2 + "\r\nUser-Agent: npm/10\r\n\r\n")
	if r.StatusCode != 200 || body(r) != "two:/b:" {
		t.Fatalf("second host: %d", r.StatusCode)
	}
	r = do("GET http://" + h2 + "/chunked HTTP/1.1\r\nHost: " + h2 + "\r\n\r\n")
	if r.StatusCode != 200 || body(r) != "chunk one;chunk two" {
		t.Fatalf("chunked: %d", r.StatusCode)
	}
	r = do("HEAD http://" + h2 + "/head HTTP/1.1\r\nHost: " + h2 + "\r\n\r\n")
	if r.StatusCode != 200 {
		t.Fatalf("head: %d", r.StatusCode)
	}
	r = do("GET http://denied.example.com/x HTTP/1.1\r\nHost: denied.example.com\r\n\r\n")
	if r.StatusCode != http.StatusForbidden || !strings.Contains(body(r), "not_allowed") {
		t.Fatalf("denied: %d", r.StatusCode)
	}
	expectClosed(t, br, c)

	tp.stop(t)
	want1 := []string{
		"one GET /a?q=1 host=" + h1 + " end=kept hop=[]",
		"one GET /redirect host=" + h1 + " end= hop=[]",
	}
	want2 := []string{
		"two GET /b host=" + h2 + " end= hop=[User-Agent]",
		"two GET /chunked host=" + h2 + " end= hop=[]",
		"two HEAD /head host=" + h2 + " end= hop=[]",
	}
	if diff := cmp.Diff(want1, log1.reqs); diff != "" {
		t.Errorf("upstream one (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want2, log2.reqs); diff != "" {
		t.Errorf("upstream two (-want +got):\n%s", diff)
	}
	// One upstream connection per run of requests to the same host.
	if log1.conns != 1 || log2.conns != 1 {
		t.Errorf("upstream connections: %d and %d, want 1 each", log1.conns, log2.conns)
	}
	if len(rec.resolves()) != 0 {
		t.Errorf("the proxy followed the redirect: %v", rec.resolves())
	}
	rep := tp.Report()
	if len(rep.Allowed) != 2 || rep.Allowed[0].Host != "127.0.0.1" || rep.Allowed[0].Connections != 2 ||
		rep.Allowed[1].Host != "127.0.0.2" || rep.Allowed[1].Connections != 3 {
		t.Fatalf("allowed: %+v", rep.Allowed)
	}
	for _, a := range rep.Allowed {
		if a.BytesOut <= 0 || a.BytesIn <= 0 {
			t.Errorf("no bytes counted: %+v", a)
		}
	}
	wantDenied := []validation.EgressDenial{{Host: "denied.example.com", Port: 80, Reason: "not_allowed", Count: 1}}
	if diff := cmp.Diff(wantDenied, rep.Denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
}

// An HTTP/1.0 client gets the body without chunks, and the connection
// closes after it.
func TestProxyPlainHTTP10(t *testing.T) {
	var log upstreamLog
	_, port := httpUpstream(t, "127.0.0.1", log.handler("one"), nil)
	h := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, h)}, nil)
	c := tp.dial(t)
	if _, err := io.WriteString(c, "GET http://"+h+"/chunked HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(all, []byte("chunked")) || !bytes.HasSuffix(all, []byte("\r\n\r\nchunk one;chunk two")) {
		t.Errorf("response:\n%s", all)
	}
}

// Requests to one name on a kept-alive connection resolve it once and
// reuse the checked connection; a request to another name is decided
// anew, and a rebinding answer to loopback is refused.
func TestProxyKeepAliveResolvesOnce(t *testing.T) {
	var log upstreamLog
	_, port := httpUpstream(t, "127.0.0.1", log.handler("up"), log.connState)
	rec := newRecorder(t, map[string][]netip.Addr{
		"pkg.example.com":    addrs("93.184.216.34"),
		"rebind.example.com": addrs("127.0.0.1"),
	})
	local := "127.0.0.1:" + strconv.Itoa(port)
	var mu sync.Mutex
	var dialed []string
	// The test's network: every public address is the local upstream.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", local)
	}
	tp := startProxy(t, Config{Rules: rules(t, "pkg.example.com,rebind.example.com"), Dial: dial}, rec)
	c := tp.dial(t)
	br := bufio.NewReader(c)
	for _, path := range []string{"/a", "/b", "/c"} {
		if _, err := io.WriteString(c, "GET http://pkg.example.com"+path+" HTTP/1.1\r\nHost: pkg.example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r, err := http.ReadResponse(br, nil)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, r, err)
		}
		io.ReadAll(r.Body)
	}
	if _, err := io.WriteString(c, "GET http://rebind.example.com/x HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h := readHead(t, br)
	if h.status != http.StatusForbidden || !strings.Contains(h.body, "address_loopback") {
		t.Errorf("rebinding name: %d %q", h.status, h.body)
	}
	tp.stop(t)
	if diff := cmp.Diff([]string{"pkg.example.com", "rebind.example.com"}, rec.resolves()); diff != "" {
		t.Errorf("resolves (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"93.184.216.34:80"}, dialed); diff != "" {
		t.Errorf("dials (-want +got):\n%s", diff)
	}
	if log.conns != 1 {
		t.Errorf("%d upstream connections, want 1", log.conns)
	}
	rep := tp.Report()
	if len(rep.Allowed) != 1 || rep.Allowed[0].Connections != 3 {
		t.Errorf("allowed: %+v", rep.Allowed)
	}
}

// When the upstream has closed the kept connection, a request without a
// body is sent again on a fresh one.
func TestProxyRetriesClosedKeptUpstream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns, closed atomic.Int32
	serveConns(t, l, func(c net.Conn) {
		conns.Add(1)
		// One response, as if kept alive, then gone.
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		c.Close()
		closed.Add(1)
	})
	target := l.Addr().String()
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)
	c := tp.dial(t)
	br := bufio.NewReader(c)
	for i := range 3 {
		if _, err := io.WriteString(c, "GET http://"+target+"/ HTTP/1.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r, err := http.ReadResponse(br, nil)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("request %d: %v %v", i, r, err)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != "ok" {
			t.Fatalf("request %d: body %q", i, b)
		}
		// The upstream has closed this connection before the next
		// request is sent.
		waitFor(t, "the upstream's close", func() bool { return closed.Load() == int32(i+1) })
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d upstream connections, want 3", n)
	}
}

// An allowed upstream that takes the connection and closes it unanswered
// (the test registry's forwarder once Verdaccio behind it was gone): the
// client gets 502, and the record says why, which it once did not.
func TestProxyRecordsUpstreamFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveConns(t, l, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c)) // read, never answered
	})
	target := l.Addr().String()
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)
	c := tp.dial(t)
	if _, err := io.WriteString(c, "GET http://"+target+"/express HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h := readHead(t, bufio.NewReader(c))
	if h.status != http.StatusBadGateway || !strings.Contains(h.body, string(ReasonUpstream)) {
		t.Errorf("got %d %q, want 502 %s", h.status, h.body, ReasonUpstream)
	}
	tp.stop(t)
	host, port, err := parseTarget(target, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{Denied: []validation.EgressDenial{{Host: host, Port: port, Reason: string(ReasonUpstream), Count: 1}}}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
