package egress

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

// tcpPair is a loopback TCP connection: the client's end and the end a
// listener accepted (what the bridge hands over). Both are closed when
// the test ends.
func tcpPair(t testing.TB) (client, accepted *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		a.Close()
	})
	if err := c.SetDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn), a.(*net.TCPConn)
}

// handoff hands a fresh TCP connection over to the proxy, as the bridge
// does (closing its copies after), and returns the client's end and the
// unix connection it went over, which the proxy closes.
func (tp *testProxy) handoff(t testing.TB) (*net.TCPConn, *net.UnixConn) {
	t.Helper()
	client, accepted := tcpPair(t)
	u := tp.dial(t)
	if err := handOff(u, accepted); err != nil {
		t.Fatal(err)
	}
	accepted.Close()
	return client, u
}

// transports are the two ways a client reaches the proxy: on its unix
// socket itself, or through a TCP connection handed over on it.
var transports = []struct {
	name string
	dial func(t testing.TB, tp *testProxy) net.Conn
}{
	{"direct", func(t testing.TB, tp *testProxy) net.Conn { return tp.dial(t) }},
	{"handoff", func(t testing.TB, tp *testProxy) net.Conn {
		c, u := tp.handoff(t)
		u.Close()
		return c
	}},
}

// An allowed CONNECT through a handed-over socket: the proxy closes the
// bridge's unix connection, answers on the TCP connection (the marker
// never reaches the session), carries early bytes first and counts every
// byte exactly.
func TestHandoffTunnel(t *testing.T) {
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)
	c, u := tp.handoff(t)
	echoTunnel(t, tp, c, target, port, func() { expectClosed(t, u, u) })
}

// badHandoff is a first message that carries descriptors but is not a
// handoff the proxy takes.
type badHandoff struct {
	name string
	// make returns the message's byte and descriptors, a func that
	// closes the test's own copies of them once sent, and one that,
	// once the proxy closed the unix connection, fails unless what was
	// sent was released (nil: nothing to observe).
	make func(t *testing.T) (msg []byte, fds []int, closeOwn func(), released func(t *testing.T))
}

// badHandoffs are the descriptors the proxy must refuse.
var badHandoffs = []badHandoff{
	{"pipe", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		r, w := osPipe(t)
		return []byte{handoffMarker}, []int{int(w.Fd())}, func() { w.Close() }, func(t *testing.T) { expectEOF(t, r) }
	}},
	{"listening socket", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		addr := l.Addr().String()
		return []byte{handoffMarker}, []int{int(f.Fd())}, func() { f.Close() }, func(t *testing.T) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Errorf("%s still listening", addr)
			}
		}
	}},
	{"unix socket", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		ours, peer := unixPair(t)
		f, err := ours.File()
		if err != nil {
			t.Fatal(err)
		}
		ours.Close()
		return []byte{handoffMarker}, []int{int(f.Fd())}, func() { f.Close() }, func(t *testing.T) { expectEOF(t, peer) }
	}},
	{"UDP socket", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.File()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		return []byte{handoffMarker}, []int{int(f.Fd())}, func() { f.Close() }, nil
	}},
	{"O_PATH to a socket", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		path := shortSocket(t)
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return []byte{handoffMarker}, []int{fd}, func() { unix.Close(fd) }, nil
	}},
	{"two descriptors", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		r1, w1 := osPipe(t)
		r2, w2 := osPipe(t)
		return []byte{handoffMarker}, []int{int(w1.Fd()), int(w2.Fd())},
			func() { w1.Close(); w2.Close() },
			func(t *testing.T) { expectEOF(t, r1); expectEOF(t, r2) }
	}},
	{"three descriptors, truncated", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		var rs, ws []*os.File
		var fds []int
		for range 3 {
			r, w := osPipe(t)
			rs, ws, fds = append(rs, r), append(ws, w), append(fds, int(w.Fd()))
		}
		return []byte{handoffMarker}, fds,
			func() {
				for _, w := range ws {
					w.Close()
				}
			},
			func(t *testing.T) {
				for _, r := range rs {
					expectEOF(t, r)
				}
			}
	}},
	{"TCP socket, wrong marker", func(t *testing.T) ([]byte, []int, func(), func(*testing.T)) {
		client, accepted := tcpPair(t)
		f, err := accepted.File()
		if err != nil {
			t.Fatal(err)
		}
		accepted.Close()
		return []byte("C"), []int{int(f.Fd())}, func() { f.Close() }, func(t *testing.T) { expectEOF(t, client) }
	}},
}

// osPipe is an os.Pipe closed when the test ends.
func osPipe(t testing.TB) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		w.Close()
	})
	return r, w
}

// unixPair is a connected pair of unix stream sockets, closed when the
// test ends.
func unixPair(t testing.TB) (a, b *net.UnixConn) {
	t.Helper()
	l, err := net.Listen("unix", shortSocket(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c.(*net.UnixConn), s.(*net.UnixConn)
}

// expectEOF fails unless r ends, at once, without a byte: every copy of
// its other end is closed.
func expectEOF(t testing.TB, r interface {
	io.Reader
	SetReadDeadline(time.Time) error
}) {
	t.Helper()
	if err := r.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if len(b) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("read %q, %v; want the other end closed", b, err)
	}
}

// sendBad sends a bad handoff to the proxy, closes the test's copies of
// what it sent, and returns the unix connection and the release check.
func (tp *testProxy) sendBad(t *testing.T, bh badHandoff) (*net.UnixConn, func(*testing.T)) {
	t.Helper()
	msg, fds, closeOwn, released := bh.make(t)
	u := tp.dial(t)
	if _, _, err := u.WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
		t.Fatal(err)
	}
	closeOwn()
	return u, released
}

// Every descriptor that is not a TCP socket, and every message that is
// not exactly a handoff, is refused as bad_request with no host, and every
// descriptor it carried is closed; the unix connection is closed
// unanswered.
func TestHandoffRefused(t *testing.T) {
	for _, bh := range badHandoffs {
		t.Run(bh.name, func(t *testing.T) {
			tp := startProxy(t, Config{}, nil)
			u, released := tp.sendBad(t, bh)
			if b, err := io.ReadAll(u); len(b) != 0 || err != nil {
				t.Errorf("unix connection got %q, %v; want it closed unanswered", b, err)
			}
			if released != nil {
				released(t)
			}
			want := []validation.EgressDenial{{Host: "", Port: 0, Reason: "bad_request", Count: 1}}
			if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
				t.Errorf("denied (-want +got):\n%s", diff)
			}
		})
	}
}

// Control data is taken only when it is SCM_RIGHTS alone; descriptors in
// it are found whatever else it holds, so they can be closed.
func TestHandoffRights(t *testing.T) {
	creds := unix.UnixCredentials(&unix.Ucred{Pid: 1, Uid: 2, Gid: 3})
	tests := []struct {
		name string
		oob  []byte
		fds  []int
		only bool
	}{
		{"none", nil, nil, true},
		{"one", unix.UnixRights(7), []int{7}, true},
		{"two in one message", unix.UnixRights(7, 8), []int{7, 8}, true},
		{"two messages", append(unix.UnixRights(7), unix.UnixRights(8)...), []int{7, 8}, true},
		{"credentials", creds, nil, false},
		{"credentials and rights", append(creds, unix.UnixRights(9)...), []int{9}, false},
		{"rights and a torn header", append(unix.UnixRights(9), 1, 2, 3), []int{9}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds, only := rights(tt.oob)
			if !slices.Equal(fds, tt.fds) || only != tt.only {
				t.Errorf("rights = %v, %t; want %v, %t", fds, only, tt.fds, tt.only)
			}
		})
	}
}

// A received descriptor is close-on-exec before the proxy wraps it.
func TestHandoffCloseOnExec(t *testing.T) {
	a, b := unixPair(t)
	_, accepted := tcpPair(t)
	if err := handOff(a, accepted); err != nil {
		t.Fatal(err)
	}
	first, fd, err := receiveHandoff(b)
	if err != nil || fd < 0 {
		t.Fatalf("receiveHandoff = %q, %d, %v", first, fd, err)
	}
	defer unix.Close(fd)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("received descriptor %d has flags %#x: not close-on-exec", fd, flags)
	}
}

// A client that speaks on the unix socket itself is served as before,
// its first bytes intact however they were written; a first byte equal to
// the marker but without a descriptor is just a byte of a bad request.
func TestHandoffDirectClient(t *testing.T) {
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)
	head := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\nearly"
	for _, tt := range []struct {
		name   string
		writes []string
	}{
		{"at once", []string{head}},
		{"first byte alone", []string{head[:1], head[1:]}},
		{"a byte a time", strings.Split(head, "")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tp.dial(t)
			go func() {
				for _, w := range tt.writes {
					if _, err := io.WriteString(c, w); err != nil {
						return
					}
				}
			}()
			br := bufio.NewReader(c)
			if h := readHead(t, br); h.status != http.StatusOK {
				t.Fatalf("status %d %q", h.status, h.body)
			}
			got := make([]byte, len("early"))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != "early" {
				t.Errorf("echoed %q, %v", got, err)
			}
		})
	}
	c := tp.dial(t)
	if _, err := c.Write([]byte{handoffMarker, 'G', 'E', 'T', ' ', '/', '\r', '\n', '\r', '\n'}); err != nil {
		t.Fatal(err)
	}
	if h := readHead(t, bufio.NewReader(c)); h.status != http.StatusBadRequest {
		t.Errorf("marker without a descriptor: %d", h.status)
	}
	tp.stop(t)
	want := Report{
		Allowed: []validation.EgressHost{{Host: "127.0.0.1", Port: port, Connections: 3, BytesOut: 15, BytesIn: 15}},
		Denied:  []validation.EgressDenial{{Host: "", Port: 0, Reason: "bad_request", Count: 1}},
	}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// Every limit holds for a handed-over connection as for a direct one:
// MaxHeaderBytes at its boundary, HeaderTimeout, IdleTimeout, and
// MaxConns, which counts both kinds alike.
func TestHandoffLimits(t *testing.T) {
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	for _, tr := range transports {
		t.Run(tr.name+"/MaxHeaderBytes", func(t *testing.T) {
			const limit = 1024
			tp := startProxy(t, Config{MaxHeaderBytes: limit}, nil)
			for _, tt := range []struct{ size, status int }{
				{limit, http.StatusForbidden},
				{limit + 1, http.StatusRequestHeaderFieldsTooLarge},
			} {
				start, end := "CONNECT denied.example.com:443 HTTP/1.1\r\nX-Pad: ", "\r\n\r\n"
				raw := start + strings.Repeat("p", tt.size-len(start)-len(end)) + end
				c := tr.dial(t, tp)
				go io.WriteString(c, raw)
				if h := readHead(t, bufio.NewReader(c)); h.status != tt.status {
					t.Errorf("%d bytes: status %d, want %d", tt.size, h.status, tt.status)
				}
			}
		})
		t.Run(tr.name+"/HeaderTimeout", func(t *testing.T) {
			const timeout = 150 * time.Millisecond
			tp := startProxy(t, Config{HeaderTimeout: timeout}, nil)
			start := time.Now()
			c := tr.dial(t, tp)
			io.WriteString(c, "CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: regis")
			expectClosed(t, c, c)
			if d := time.Since(start); d < timeout {
				t.Errorf("closed after %v, before the %v timeout", d, timeout)
			}
			tp.stop(t)
			if rep := tp.Report(); len(rep.Denied)+len(rep.Allowed) != 0 {
				t.Errorf("report: %+v", rep)
			}
		})
		t.Run(tr.name+"/IdleTimeout", func(t *testing.T) {
			const idle = 300 * time.Millisecond
			tp := startProxy(t, Config{Rules: rules(t, target), IdleTimeout: idle}, nil)
			c := tr.dial(t, tp)
			br, h := connect(t, c, target)
			if h.status != http.StatusOK {
				t.Fatalf("status %d", h.status)
			}
			start := time.Now()
			expectClosed(t, br, c)
			if d := time.Since(start); d < idle {
				t.Errorf("idle tunnel closed after %v, before %v", d, idle)
			}
		})
		t.Run(tr.name+"/MaxConns", func(t *testing.T) {
			tp := startProxy(t, Config{Rules: rules(t, target), MaxConns: 2}, nil)
			// One of each kind fills the limit.
			for _, other := range transports {
				if _, h := connect(t, other.dial(t, tp), target); h.status != http.StatusOK {
					t.Fatalf("%s within the limit: %d", other.name, h.status)
				}
			}
			_, h := connect(t, tr.dial(t, tp), target)
			if h.status != http.StatusServiceUnavailable || !strings.Contains(h.body, "throttled") {
				t.Fatalf("over the limit: %d %q", h.status, h.body)
			}
			// Throttled, not denied: no policy refused it.
			if rep := tp.Report(); rep.Throttled != 1 || len(rep.Denied) != 0 {
				t.Errorf("throttled %d, denied %+v; want 1 throttled, none denied", rep.Throttled, rep.Denied)
			}
		})
	}
}

// Close ends handed-over tunnels and silent handed-over clients, also one
// the sandbox switched to blocking mode behind the proxy's back (so its
// read waits in the kernel), and leaves no goroutine.
func TestHandoffCloseEndsEverything(t *testing.T) {
	waitFor(t, "a quiet start", func() bool { return true })
	baseline := runtime.NumGoroutine()
	port, stopEcho := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)

	tunnel, _ := tp.handoff(t)
	tbr, h := connect(t, tunnel, target)
	if h.status != http.StatusOK {
		t.Fatalf("status %d", h.status)
	}
	if _, err := io.WriteString(tunnel, "ping"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(tbr, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	silent, _ := tp.handoff(t)

	// The sandbox keeps its own copy of the socket it hands over and
	// clears O_NONBLOCK on the open file they share.
	blocking, accepted := tcpPair(t)
	if err := handOff(tp.dial(t), accepted); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three handed-over connections", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		n := 0
		for c := range tp.conns {
			if _, ok := c.(*net.TCPConn); ok {
				n++
			}
		}
		return n == 3+1 // and the tunnel's upstream
	})
	rc, err := accepted.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetNonblock(int(fd), false) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	// A byte wakes the proxy's read; once it is taken, the next read
	// blocks in the kernel.
	if _, err := io.WriteString(blocking, "C"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the proxy to read the byte", func() bool {
		var n int
		rc.Control(func(fd uintptr) { n, serr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		return serr == nil && n == 0
	})

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tp.stop(t)
	}()
	select {
	case <-stopped:
	case <-time.After(waitLimit):
		t.Fatal("Close did not return")
	}
	for _, c := range []net.Conn{tunnel, silent, blocking} {
		expectClosed(t, c, c)
	}
	want := Report{Allowed: []validation.EgressHost{{Host: "127.0.0.1", Port: port, Connections: 1, BytesOut: 4, BytesIn: 4}}}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	stopEcho()
	for _, c := range []net.Conn{tunnel, silent, blocking, accepted} {
		c.Close()
	}
	waitGoroutines(t, baseline)
}

// openFDs lists this process's open descriptors and what they are.
func openFDs(t testing.TB) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := map[string]string{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil {
			fds[e.Name()] = target
		}
	}
	return fds
}

// A burst of handoffs, allowed tunnels and every kind of refusal, leaves
// no descriptor open once the proxy is done with them.
func TestHandoffLeaksNoDescriptor(t *testing.T) {
	const rounds = 10
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)
	// Each in a subtest, whose cleanups close the test's own copies
	// (pipes, peers, the unix connections) when it ends.
	tunnel := func(t *testing.T) {
		c, _ := tp.handoff(t)
		br, h := connect(t, c, target)
		if h.status != http.StatusOK {
			t.Fatalf("status %d", h.status)
		}
		io.WriteString(c, "x")
		if _, err := io.ReadFull(br, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		c.CloseWrite()
		expectClosed(t, br, c)
	}
	settled := func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return tp.active == 0
	}
	t.Run("warm-up", tunnel) // the runtime's own descriptors exist from here
	waitFor(t, "the first tunnel to end", settled)
	before := openFDs(t)

	for i := range rounds {
		t.Run("tunnel "+strconv.Itoa(i), tunnel)
		for _, bh := range badHandoffs {
			t.Run(bh.name+" "+strconv.Itoa(i), func(t *testing.T) {
				u, released := tp.sendBad(t, bh)
				expectClosed(t, u, u)
				if released != nil {
					released(t)
				}
			})
		}
	}
	waitFor(t, "every connection to end", settled)
	wantRep := Report{
		Allowed: []validation.EgressHost{{Host: "127.0.0.1", Port: port, Connections: rounds + 1, BytesOut: rounds + 1, BytesIn: rounds + 1}},
		Denied:  []validation.EgressDenial{{Host: "", Port: 0, Reason: "bad_request", Count: rounds * len(badHandoffs)}},
	}
	if diff := cmp.Diff(wantRep, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// Fewer than before is fine (the warm-up's upstream ends on its
	// own time); a new one is a leak. The runtime keeps the pipes splice
	// used in a pool, closed when a collection empties it.
	var extra []string
	deadline := time.Now().Add(waitLimit)
	for {
		runtime.GC()
		now := openFDs(t)
		extra = extra[:0]
		for fd, what := range now {
			if before[fd] != what {
				extra = append(extra, fd+" "+what)
			}
		}
		if len(extra) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		t.Errorf("%d descriptors before, now also: %v", len(before), extra)
	}
}
