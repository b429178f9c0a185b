package egress

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// errIdle ends a tunnel that moved no byte either way for IdleTimeout.
var errIdle = errors.New("idle")

// connectTarget is the destination of a CONNECT: the request target must
// be exactly host:port (RFC 9110 §9.3.6), nothing else.
func connectTarget(req *http.Request) (string, int, error) {
	if req.ProtoMajor != 1 {
		return "", 0, errors.New("not HTTP/1")
	}
	return parseTarget(req.RequestURI, 0)
}

// tunnel serves a CONNECT: decide, dial a checked address, answer 200,
// then splice bytes both ways until both sides end.
func (s *session) tunnel(ctx context.Context, req *http.Request) {
	host, port, err := connectTarget(req)
	if err != nil {
		s.refuse(ctx, http.StatusBadRequest, "", 0, ReasonBadRequest)
		return
	}
	_, tunnel := Matches(s.p.tunnels, host, port)
	if s.p.cfg.CA != nil && !tunnel {
		s.terminate(ctx, host, port)
		return
	}
	dec := s.p.decide(ctx, host, port)
	if !dec.Allowed {
		s.refuse(ctx, http.StatusForbidden, host, port, dec.Reason)
		return
	}
	up, err := s.p.dial(ctx, dec.Addrs, port)
	if err != nil {
		s.dialFailed(ctx, host, port, err)
		return
	}
	defer s.p.drop(up)
	// Should the sandbox switch the client to blocking mode, the
	// watchdog ends the tunnel both ways.
	s.watch.also(up)
	s.p.allowed(ctx, host, port)
	if tunnel {
		s.p.stats.tunnel(host, port)
	}
	var out, in int64
	defer func() { s.p.stats.addBytes(host, port, out, in) }()
	if _, err := io.WriteString(s.bw, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if err := s.bw.Flush(); err != nil {
		return
	}
	// What the client sent after its head (a TLS ClientHello, eagerly)
	// is already buffered: it goes first.
	if n := s.br.Buffered(); n > 0 {
		b, err := s.br.Peek(n)
		if err != nil {
			return
		}
		w, err := up.Write(b)
		out = int64(w)
		if err != nil {
			return
		}
	}
	// The head's deadlines are no business of the tunnel's.
	if err := s.c.SetDeadline(time.Time{}); err != nil {
		return
	}
	sent, received := relay(s.c, up, s.p.cfg.IdleTimeout, s.p.spawn)
	out, in = out+sent, received
}

// dialFailed records and answers a destination none of whose permitted
// addresses could be dialed.
func (s *session) dialFailed(ctx context.Context, host string, port int, err error) {
	s.p.cfg.Log.LogAttrs(ctx, slog.LevelDebug, "egress dial",
		slog.String(logkey.Host, host), slog.Int(logkey.Port, port), slog.String(logkey.Err, err.Error()))
	s.refuse(ctx, http.StatusBadGateway, host, port, ReasonDialFailed)
}

// relay copies a to b and b to a, each direction on its own goroutine
// (spawn runs the second), until both have ended, and returns the bytes
// each way. A direction that reaches its source's end half-closes its
// destination (CloseWrite) and lets the other go on; one that fails, or a
// tunnel idle for idle (zero: never), closes both. The copies are plain
// io.Copy between the connections themselves, so TCP and unix sockets
// splice(2) in the kernel.
func relay(a, b net.Conn, idle time.Duration, spawn func(func())) (aToB, bToA int64) {
	act := newActivity()
	done := make(chan int64, 1)
	spawn(func() { done <- pipe(b, a, idle, act) })
	bToA = pipe(a, b, idle, act)
	return <-done, bToA
}

// pipe copies src to dst; see relay.
func pipe(dst, src net.Conn, idle time.Duration, act *activity) int64 {
	n, err := copyIdle(dst, src, idle, act)
	if err == nil && closeWrite(dst) == nil {
		return n
	}
	// Shut down first: the other direction may wait in the kernel on
	// a handed-over connection (see hangUp).
	hangUp(dst)
	hangUp(src)
	return n
}

// copyIdle is io.Copy(dst, src) that gives up when neither direction of
// the tunnel moved a byte for idle. It reads src with a deadline of a
// fraction of idle and starts io.Copy again after each one that passes:
// a deadline never loses data (it only ends a wait for more), and the
// kernel's splice stays in use.
func copyIdle(dst, src net.Conn, idle time.Duration, act *activity) (int64, error) {
	if idle <= 0 {
		return io.Copy(dst, src)
	}
	period := max(idle/idleChecks, time.Millisecond)
	var total int64
	for {
		if err := src.SetReadDeadline(time.Now().Add(period)); err != nil {
			return total, err
		}
		n, err := io.Copy(dst, src)
		total += n
		if n > 0 {
			act.touch()
		}
		switch {
		case err == nil:
			return total, nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return total, err
		case act.idleFor() >= idle:
			return total, errIdle
		}
	}
}

// closeWrite half-closes c when it can, and closes it otherwise.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// activity is when a tunnel last moved bytes, either way, on the
// monotonic clock.
type activity struct {
	start time.Time
	last  atomic.Int64 // nanoseconds since start
}

// newActivity starts the clock of a tunnel that has moved nothing yet.
func newActivity() *activity { return &activity{start: time.Now()} }

// touch notes that bytes moved now.
func (a *activity) touch() { a.last.Store(int64(time.Since(a.start))) }

// idleFor is how long ago the tunnel last moved a byte.
func (a *activity) idleFor() time.Duration {
	return time.Since(a.start) - time.Duration(a.last.Load())
}
