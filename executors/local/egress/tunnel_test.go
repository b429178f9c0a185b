package egress

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// A tunnel carries bytes both ways, the client's early bytes first, with
// half-close, and counts them exactly.
func TestProxyTunnel(t *testing.T) {
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)
	echoTunnel(t, tp, tp.dial(t), target, port, nil)
	if diff := cmp.Diff([]string{target}, tp.rec.dials()); diff != "" {
		t.Errorf("dials (-want +got):\n%s", diff)
	}
}

// A tunnel that moves bytes in either direction stays open past
// IdleTimeout; one that moves none is closed after it.
func TestProxyIdleTimeout(t *testing.T) {
	// Long against the gaps between writes: only a stall of a whole
	// second on a loaded machine could close an active tunnel.
	const idle = time.Second
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target), IdleTimeout: idle}, nil)
	c := tp.dial(t)
	br, h := connect(t, c, target)
	if h.status != http.StatusOK {
		t.Fatalf("status %d", h.status)
	}
	// Active for one and a half idle timeouts: a byte each tenth of one.
	buf := make([]byte, 1)
	var start time.Time
	for i := range 16 {
		if i > 0 {
			time.Sleep(idle / 10)
		}
		// The tunnel's last activity is no sooner than this write.
		start = time.Now()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatalf("tunnel closed while active: %v", err)
		}
		if _, err := io.ReadFull(br, buf); err != nil {
			t.Fatalf("tunnel closed while active: %v", err)
		}
	}
	expectClosed(t, br, c)
	if d := time.Since(start); d < idle {
		t.Errorf("idle tunnel closed after %v, before %v", d, idle)
	}

	// A kept-alive plain-HTTP client connection that says nothing.
	var log upstreamLog
	_, hp := httpUpstream(t, "127.0.0.1", log.handler("one"), nil)
	h1 := "127.0.0.1:" + strconv.Itoa(hp)
	tp2 := startProxy(t, Config{Rules: rules(t, h1), IdleTimeout: idle}, nil)
	c2 := tp2.dial(t)
	// The proxy's wait for the next request starts after it answered
	// this one, so after this write: measured from here, the close can
	// come no sooner than idle (measured from the answer's end, it can).
	start = time.Now()
	if _, err := io.WriteString(c2, "GET http://"+h1+"/a HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br2 := bufio.NewReader(c2)
	if r, err := http.ReadResponse(br2, nil); err != nil || r.StatusCode != 200 {
		t.Fatalf("%v %v", r, err)
	} else {
		io.ReadAll(r.Body)
	}
	expectClosed(t, br2, c2)
	if d := time.Since(start); d < idle {
		t.Errorf("idle keep-alive connection closed after %v, before %v", d, idle)
	}
}

// Close ends open tunnels, idle clients and clients in the middle of a
// head, Serve returns nil, a second Close is harmless, Serve after Close
// returns at once, and no goroutine is left.
func TestProxyCloseEndsEverything(t *testing.T) {
	waitFor(t, "a quiet start", func() bool { return true })
	baseline := runtime.NumGoroutine()
	port, stopEcho := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)

	tunnel := tp.dial(t)
	tbr, h := connect(t, tunnel, target)
	if h.status != http.StatusOK {
		t.Fatalf("status %d", h.status)
	}
	if _, err := io.WriteString(tunnel, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(tbr, buf); err != nil {
		t.Fatal(err)
	}
	silent := tp.dial(t)
	partial := tp.dial(t)
	if _, err := io.WriteString(partial, "CONNECT 127.0.0.1:"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three served connections", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return tp.active == 3
	})

	tp.stop(t)
	for _, c := range []net.Conn{tunnel, silent, partial} {
		expectClosed(t, c, c)
	}
	if err := tp.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	l, err := net.Listen("unix", shortSocket(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Serve(l); err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Error("Serve after Close left the listener open")
	}
	want := Report{Allowed: []validation.EgressHost{{Host: "127.0.0.1", Port: port, Connections: 1, BytesOut: 4, BytesIn: 4}}}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	stopEcho()
	for _, c := range []net.Conn{tunnel, silent, partial} {
		c.Close()
	}
	waitGoroutines(t, baseline)
}

// echoTunnel opens a CONNECT tunnel on c to the echo server at target,
// sends early bytes with the head and 3 MiB after it, half-closes, checks
// every byte came back in order, stops the proxy and checks the report
// counted them exactly. afterSend, when set, runs once the head is sent.
func echoTunnel(t *testing.T, tp *testProxy, c interface {
	net.Conn
	CloseWrite() error
}, target string, port int, afterSend func()) {
	t.Helper()
	early := "early bytes, sent with the head;"
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n%s", target, target, early); err != nil {
		t.Fatal(err)
	}
	if afterSend != nil {
		afterSend()
	}
	br := bufio.NewReader(c)
	if h := readHead(t, br); h.status != http.StatusOK {
		t.Fatalf("status %d %q", h.status, h.body)
	}
	payload := make([]byte, 3<<20+17)
	rand.Read(payload)
	go func() {
		c.Write(payload)
		c.CloseWrite()
	}()
	got, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(early), payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("echoed %d bytes, want %d", len(got), len(want))
	}
	tp.stop(t)
	n := int64(len(want))
	wantRep := Report{Allowed: []validation.EgressHost{{Host: "127.0.0.1", Port: port, Connections: 1, BytesOut: n, BytesIn: n}}}
	if diff := cmp.Diff(wantRep, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
