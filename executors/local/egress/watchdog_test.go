package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

// BlockingCheckInterval: zero is the default, MinBlockingCheckInterval
// is the least accepted.
func TestBlockingCheckIntervalBounds(t *testing.T) {
	for _, tt := range []struct {
		in, want time.Duration
		ok       bool
	}{
		{0, DefaultBlockingCheckInterval, true},
		{MinBlockingCheckInterval, MinBlockingCheckInterval, true},
		{MinBlockingCheckInterval - 1, 0, false},
		{-1, 0, false},
	} {
		t.Run(tt.in.String(), func(t *testing.T) {
			p, err := New(Config{OwnAddrs: []netip.Addr{}, BlockingCheckInterval: tt.in})
			switch {
			case !tt.ok && err == nil:
				t.Fatalf("accepted %v", tt.in)
			case !tt.ok && !strings.Contains(err.Error(), "BlockingCheckInterval"):
				t.Fatalf("error does not name BlockingCheckInterval: %v", err)
			case tt.ok && err != nil:
				t.Fatal(err)
			case tt.ok && p.cfg.BlockingCheckInterval != tt.want:
				t.Errorf("interval %v, want %v", p.cfg.BlockingCheckInterval, tt.want)
			}
		})
	}
}

// sandboxHandoff hands a fresh TCP connection over to the proxy as the
// bridge does, but keeps, as hostile code in the sandbox would, a
// duplicate of the handed socket's descriptor (closed when the test
// ends). The duplicate shares the open file with the proxy's copy, so its
// file status flags are the proxy's. It returns the client's end and that
// descriptor once the proxy serves the connection.
func (tp *testProxy) sandboxHandoff(t testing.TB) (*net.TCPConn, int) {
	t.Helper()
	client, accepted := tcpPair(t)
	rc, err := accepted.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	t.Cleanup(func() { unix.Close(fd) })
	u := tp.dial(t)
	if err := handOff(u, accepted); err != nil {
		t.Fatal(err)
	}
	accepted.Close()
	// The proxy closes the bridge's connection once it has taken the
	// socket (and set it non-blocking, on the open file both share).
	expectClosed(t, u, u)
	return client, fd
}

// setBlocking clears O_NONBLOCK on fd, the sandbox's copy of a handed
// over socket: the proxy's copy is then in blocking mode too.
func setBlocking(t testing.TB, fd int) {
	t.Helper()
	if err := unix.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
}

// waitTaken waits until the proxy has read everything the client sent on
// the connection fd is the sandbox's copy of.
func waitTaken(t testing.TB, fd int) {
	t.Helper()
	waitFor(t, "the proxy to read what was sent", func() bool {
		n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		return err == nil && n == 0
	})
}

// expectHungUp waits, at most waitLimit, for the proxy to hang c up: a
// read ends in EOF or a reset. It returns what was read before.
func expectHungUp(t testing.TB, r io.Reader, c net.Conn) []byte {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read %q, then %v; want the connection hung up", b, err)
	}
	return b
}

// send writes s to c or fails the test.
func send(t testing.TB, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// ping sends a few bytes through a tunnel to an echo server and reads
// them back.
func ping(t testing.TB, c net.Conn, br *bufio.Reader) {
	t.Helper()
	send(t, c, "ping")
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Fatalf("echoed %q, %v", got, err)
	}
}

// get sends a plain-HTTP GET for url on a kept-alive connection and
// returns the response's status and body.
func get(t testing.TB, c net.Conn, br *bufio.Reader, url string) (int, string) {
	t.Helper()
	send(t, c, "GET "+url+" HTTP/1.1\r\nHost: ignored.example\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// watchEnv are the upstreams of the watchdog tests, on loopback: an echo
// server, one that reads everything and never says a word, and an HTTP
// server whose /gate holds its answer until the gate opens.
type watchEnv struct {
	echo, silent, web       string
	echoPort, silentPort    int
	webPort                 int
	gateEntered, gateOpened chan struct{}
	openGate                func()
}

func newWatchEnv(t *testing.T) *watchEnv {
	t.Helper()
	e := &watchEnv{gateEntered: make(chan struct{}, 1), gateOpened: make(chan struct{})}
	e.echoPort, _ = echoServer(t, "127.0.0.1:0")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.silentPort = l.Addr().(*net.TCPAddr).Port
	serveConns(t, l, func(c net.Conn) { io.Copy(io.Discard, c) })
	_, e.webPort = httpUpstream(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gate" {
			e.gateEntered <- struct{}{}
			<-e.gateOpened
		}
		fmt.Fprintf(w, "ok:%s", r.URL.Path)
	}), nil)
	var once sync.Once
	e.openGate = func() { once.Do(func() { close(e.gateOpened) }) }
	t.Cleanup(e.openGate) // before the server closes, which waits for handlers
	e.echo = "127.0.0.1:" + strconv.Itoa(e.echoPort)
	e.silent = "127.0.0.1:" + strconv.Itoa(e.silentPort)
	e.web = "127.0.0.1:" + strconv.Itoa(e.webPort)
	return e
}

// rules allows every upstream of e.
func (e *watchEnv) rules(t testing.TB) []Rule { return rules(t, e.echo+","+e.silent+","+e.web) }

// A handed-over connection the sandbox switches to blocking mode, so that
// the proxy's read of it waits in the kernel, is hung up by its watchdog
// (at the default interval) whatever the proxy was doing with it: reading
// its request head, splicing a tunnel to an upstream that says nothing,
// waiting on a kept-alive plain-HTTP connection. The refusal is recorded
// with what the connection asked for, every goroutine that served it
// ends, and an untampered connection in the same state goes on being
// served.
func TestWatchdogHangsUpBlockingMode(t *testing.T) {
	tests := []struct {
		name string
		// ready brings a handed-over connection c, whose sandbox copy
		// is fd, to the state under test. With tamper it switches c
		// to blocking mode on the way, so that the proxy's next read
		// of it waits in the kernel.
		ready func(t *testing.T, e *watchEnv, c *net.TCPConn, fd int, tamper bool) *bufio.Reader
		// serves checks that an untampered connection brought to the
		// state is still served.
		serves func(t *testing.T, e *watchEnv, c *net.TCPConn, br *bufio.Reader)
		// answered: the tampered connection may have had an answer
		// before it was hung up.
		answered bool
		// dest is what the denial names.
		dest func(e *watchEnv) (string, int)
	}{{
		name: "request head",
		ready: func(t *testing.T, e *watchEnv, c *net.TCPConn, fd int, tamper bool) *bufio.Reader {
			if tamper {
				setBlocking(t, fd)
			}
			// A byte wakes the proxy's read; once it is taken the
			// next read waits for more.
			send(t, c, "C")
			waitTaken(t, fd)
			return bufio.NewReader(c)
		},
		serves: func(t *testing.T, e *watchEnv, c *net.TCPConn, br *bufio.Reader) {
			send(t, c, "ONNECT "+e.echo+" HTTP/1.1\r\nHost: "+e.echo+"\r\n\r\n")
			if h := readHead(t, br); h.status != http.StatusOK {
				t.Fatalf("status %d %q", h.status, h.body)
			}
			ping(t, c, br)
		},
		dest: func(*watchEnv) (string, int) { return "", 0 },
	}, {
		name: "tunnel",
		ready: func(t *testing.T, e *watchEnv, c *net.TCPConn, fd int, tamper bool) *bufio.Reader {
			target := e.echo
			if tamper {
				target = e.silent
			}
			br, h := connect(t, c, target)
			if h.status != http.StatusOK {
				t.Fatalf("status %d %q", h.status, h.body)
			}
			if !tamper {
				ping(t, c, br)
				return br
			}
			setBlocking(t, fd)
			send(t, c, "x")
			waitTaken(t, fd)
			return br
		},
		serves: func(t *testing.T, e *watchEnv, c *net.TCPConn, br *bufio.Reader) { ping(t, c, br) },
		dest:   func(e *watchEnv) (string, int) { return "127.0.0.1", e.silentPort },
	}, {
		name: "keep-alive wait",
		ready: func(t *testing.T, e *watchEnv, c *net.TCPConn, fd int, tamper bool) *bufio.Reader {
			br := bufio.NewReader(c)
			if !tamper {
				if status, body := get(t, c, br, "http://"+e.web+"/a"); status != http.StatusOK || body != "ok:/a" {
					t.Fatalf("GET: %d %q", status, body)
				}
				return br
			}
			// Blocking mode from before the answer: once the proxy
			// has written it, its wait for the next request is a
			// read that waits in the kernel.
			send(t, c, "GET http://"+e.web+"/gate HTTP/1.1\r\nHost: ignored.example\r\n\r\n")
			select {
			case <-e.gateEntered:
			case <-time.After(waitLimit):
				t.Fatal("the request did not reach the upstream")
			}
			setBlocking(t, fd)
			e.openGate()
			return br
		},
		serves: func(t *testing.T, e *watchEnv, c *net.TCPConn, br *bufio.Reader) {
			if status, body := get(t, c, br, "http://"+e.web+"/b"); status != http.StatusOK || body != "ok:/b" {
				t.Fatalf("GET: %d %q", status, body)
			}
		},
		// The watchdog's check may come before the proxy wrote the
		// answer, or after.
		answered: true,
		dest:     func(e *watchEnv) (string, int) { return "127.0.0.1", e.webPort },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newWatchEnv(t)
			tp := startProxy(t, Config{Rules: e.rules(t)}, nil)
			healthy, hfd := tp.sandboxHandoff(t)
			hbr := tt.ready(t, e, healthy, hfd, false)
			baseline := runtime.NumGoroutine()

			c, fd := tp.sandboxHandoff(t)
			br := tt.ready(t, e, c, fd, true)
			if b := expectHungUp(t, br, c); len(b) > 0 && !tt.answered {
				t.Errorf("hung up after %q; want no answer", b)
			}
			host, port := tt.dest(e)
			want := []validation.EgressDenial{{Host: host, Port: port, Reason: "socket_tampered", Count: 1}}
			if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
				t.Errorf("denied (-want +got):\n%s", diff)
			}
			waitGoroutines(t, baseline)

			tt.serves(t, e, healthy, hbr)
			if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
				t.Errorf("denied after the untampered connection (-want +got):\n%s", diff)
			}

			// Once tampered with, the proxy takes no further handoff
			// from this sandbox: the socket is closed unread.
			late, lfd := tp.sandboxHandoff(t)
			unix.Close(lfd)
			expectClosed(t, late, late)
			want = append(want, validation.EgressDenial{Reason: "bad_request", Count: 1})
			if diff := cmp.Diff(want, tp.Report().Denied, cmpopts.SortSlices(func(a, b validation.EgressDenial) bool { return a.Reason < b.Reason })); diff != "" {
				t.Errorf("denied after a late handoff (-want +got):\n%s", diff)
			}
		})
	}
}

// A watchdog checking every few milliseconds leaves healthy handed-over
// connections alone (one waiting for its head, a kept-alive plain-HTTP
// one, a tunnel) for many intervals, and still watches: the tunnel is hung
// up once the sandbox switches it to blocking mode, the others go on.
func TestWatchdogSparesHealthyConnections(t *testing.T) {
	const interval = 10 * time.Millisecond
	e := newWatchEnv(t)
	tp := startProxy(t, Config{Rules: e.rules(t), BlockingCheckInterval: interval}, nil)
	waiting, _ := tp.sandboxHandoff(t)
	kept, _ := tp.sandboxHandoff(t)
	kbr := bufio.NewReader(kept)
	if status, body := get(t, kept, kbr, "http://"+e.web+"/a"); status != http.StatusOK || body != "ok:/a" {
		t.Fatalf("GET: %d %q", status, body)
	}
	tunnel, tfd := tp.sandboxHandoff(t)
	tbr, h := connect(t, tunnel, e.echo)
	if h.status != http.StatusOK {
		t.Fatalf("status %d %q", h.status, h.body)
	}

	// The tunnel's bytes are the clock: it moves them for more than 20
	// intervals, each round waiting for its echo.
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 64)
	got := make([]byte, len(chunk))
	var moved, rounds int
	for start := time.Now(); time.Since(start) <= 25*interval; rounds++ {
		if _, err := tunnel.Write(chunk); err != nil {
			t.Fatalf("after %d bytes: %v", moved, err)
		}
		if _, err := io.ReadFull(tbr, got); err != nil || !bytes.Equal(got, chunk) {
			t.Fatalf("after %d bytes: echoed %d bytes, %v", moved, len(got), err)
		}
		moved += len(chunk)
	}
	t.Logf("moved %d bytes in %d rounds", moved, rounds)
	if status, body := get(t, kept, kbr, "http://"+e.web+"/b"); status != http.StatusOK || body != "ok:/b" {
		t.Fatalf("GET after: %d %q", status, body)
	}
	wbr, h := connect(t, waiting, e.echo)
	if h.status != http.StatusOK {
		t.Fatalf("the waiting connection: status %d %q", h.status, h.body)
	}
	ping(t, waiting, wbr)
	if rep := tp.Report(); len(rep.Denied) != 0 {
		t.Fatalf("denied healthy connections: %+v", rep.Denied)
	}

	setBlocking(t, tfd)
	send(t, tunnel, "x")
	expectHungUp(t, tbr, tunnel) // perhaps after the echo of "x"
	want := []validation.EgressDenial{{Host: "127.0.0.1", Port: e.echoPort, Reason: "socket_tampered", Count: 1}}
	if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
	ping(t, waiting, wbr)
	if status, body := get(t, kept, kbr, "http://"+e.web+"/c"); status != http.StatusOK || body != "ok:/c" {
		t.Fatalf("GET after the tampering: %d %q", status, body)
	}
}
