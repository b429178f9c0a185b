package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait of these tests on something that must
// happen.
const waitLimit = 10 * time.Second

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// recorder stands in for the worker's resolver and dialer: it resolves
// from a table, and dials only loopback addresses (everything else is
// recorded and refused: these tests never send a byte off the host).
type recorder struct {
	t     testing.TB
	names map[string][]netip.Addr

	mu       sync.Mutex
	resolved []string
	dialed   []string
}

func newRecorder(t testing.TB, names map[string][]netip.Addr) *recorder {
	return &recorder{t: t, names: names}
}

func (r *recorder) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.resolved = append(r.resolved, host)
	r.mu.Unlock()
	if a, ok := r.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *recorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.dialed = append(r.dialed, addr)
	r.mu.Unlock()
	ap, err := netip.ParseAddrPort(addr)
	if network != "tcp" || err != nil {
		r.t.Errorf("dialed %s %q: not tcp to an address", network, addr)
		return nil, errors.New("test dialer: not an address")
	}
	if !ap.Addr().IsLoopback() {
		return nil, errors.New("test dialer: refusing a non-loopback address")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (r *recorder) dials() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.dialed...)
}

func (r *recorder) resolves() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.resolved...)
}

// testProxy is a Proxy serving on a unix socket, as the worker runs it.
type testProxy struct {
	*Proxy
	rec    *recorder
	socket string
	served chan error
}

// startProxy serves a proxy for cfg (with rec's resolver and dialer when
// cfg names none) and closes it when the test ends, checking Serve
// returned nil.
func startProxy(t testing.TB, cfg Config, rec *recorder) *testProxy {
	t.Helper()
	if rec == nil {
		rec = newRecorder(t, nil)
	}
	if cfg.Resolve == nil {
		cfg.Resolve = rec.resolve
	}
	if cfg.Dial == nil {
		cfg.Dial = rec.dial
	}
	if cfg.OwnAddrs == nil {
		cfg.OwnAddrs = []netip.Addr{}
	}
	if cfg.Log == nil {
		cfg.Log = testLogger(t)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sock := shortSocket(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{Proxy: p, rec: rec, socket: sock, served: make(chan error, 1)}
	go func() { tp.served <- p.Serve(l) }()
	t.Cleanup(func() { tp.stop(t) })
	return tp
}

// stop closes the proxy and waits for Serve to return nil.
func (tp *testProxy) stop(t testing.TB) {
	t.Helper()
	if err := tp.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err, ok := <-tp.served:
		if ok && err != nil {
			t.Errorf("Serve: %v", err)
		}
		if ok {
			close(tp.served)
		}
	case <-time.After(waitLimit):
		t.Error("Serve did not return after Close")
	}
}

// shortSocket is a socket path in a fresh directory short enough for
// sun_path.
func shortSocket(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "egress")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "p.sock")
}

// dialProxy opens a client connection to the proxy, closed when the test
// ends.
func (tp *testProxy) dial(t testing.TB) *net.UnixConn {
	t.Helper()
	c, err := net.Dial("unix", tp.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

// rules parses an allow-list or fails the test.
func rules(t testing.TB, s string) []Rule {
	t.Helper()
	r, err := ParseAllowList(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// head is a response head as the client reads it.
type head struct {
	status int
	header textproto.MIMEHeader
	body   string
}

// readHead reads a response head and, unless it is a CONNECT's 200, its
// Content-Length body.
func readHead(t testing.TB, br *bufio.Reader) head {
	t.Helper()
	tr := textproto.NewReader(br)
	line, err := tr.ReadLine()
	if err != nil {
		t.Fatalf("read status line: %v", err)
	}
	f := strings.SplitN(line, " ", 3)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		t.Fatalf("status line %q", line)
	}
	status, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("status line %q", line)
	}
	h, err := tr.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("read header: %v", err)
	}
	out := head{status: status, header: h}
	if n := h.Get("Content-Length"); n != "" {
		size, err := strconv.Atoi(n)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatalf("read body: %v", err)
		}
		out.body = string(b)
	}
	return out
}

// connect sends a CONNECT for target on c and returns the reader of the
// tunnel (or of the refusal) and the response head.
func connect(t testing.TB, c net.Conn, target string) (*bufio.Reader, head) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	return br, readHead(t, br)
}

// expectClosed waits for the peer to close c: a read returns EOF (or the
// connection was reset) before waitLimit.
func expectClosed(t testing.TB, r io.Reader, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %v (read %q)", waitLimit, b)
	}
}

// echoServer accepts on addr and echoes every connection back until its
// end, then half-closes it. It returns the port; the server stops when the
// test ends, or when stop is called.
func echoServer(t testing.TB, addr string) (port int, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			})
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			l.Close()
			mu.Lock()
			for c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return l.Addr().(*net.TCPAddr).Port, stop
}

// serveConns accepts on l until the test ends, handling each connection
// in its own goroutine (closed after handle returns); the cleanup closes l
// and waits for every handler.
func serveConns(t testing.TB, l net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
}

// httpUpstream serves h on ip:0 and returns the server and its port;
// connState, when set, watches its connections.
func httpUpstream(t testing.TB, ip string, h http.Handler, connState func(net.Conn, http.ConnState)) (*httptest.Server, int) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("cannot listen on %s: %v", ip, err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = l
	s.Config.ConnState = connState
	s.Start()
	t.Cleanup(s.Close)
	return s, l.Addr().(*net.TCPAddr).Port
}

// closedPort is a loopback port nothing listens on.
func closedPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGoroutines waits, at most waitLimit, until no more goroutines run
// than baseline.
func waitGoroutines(t testing.TB, baseline int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
