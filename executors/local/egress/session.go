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
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// errHeadTooLarge ends a head that used up its allowance.
var errHeadTooLarge = errors.New("head too large")

// session is one client connection: a sequence of plain-HTTP requests,
// or requests ending in one CONNECT tunnel.
type session struct {
	p     *Proxy
	c     net.Conn
	start time.Time // when the connection was accepted
	in    *connReader
	br    *bufio.Reader
	bw    *bufio.Writer
	out   *connWriter
	watch *watchdog // a handed-over connection's; nil for a direct client
}

// serveConn serves one client connection to its end: the connection
// accepted, or the one handed over on it.
func (p *Proxy) serveConn(ctx context.Context, c net.Conn) {
	start := time.Now()
	c, first, w, err := p.client(ctx, c, start.Add(p.cfg.HeaderTimeout))
	defer p.release(c, false)
	defer w.halt()
	if err != nil {
		return
	}
	s := &session{p: p, c: c, start: start, in: &connReader{c: c, remain: -1, first: first}, out: &connWriter{c: c, idle: p.cfg.IdleTimeout}, watch: w}
	s.br = bufio.NewReaderSize(s.in, readBufferBytes)
	s.bw = bufio.NewWriterSize(s.out, writeBufferBytes)
	for n := 0; ; n++ {
		req, ok := s.readRequest(ctx, n > 0)
		if !ok {
			return
		}
		if host, port, _ := requestDestination(req); host != "" {
			w.setDest(host, port)
		}
		if req.Method == http.MethodConnect {
			s.tunnel(ctx, req)
			return
		}
		if !s.forward(ctx, req) {
			return
		}
	}
}

// refuseConn answers a connection past MaxConns with 503. It reads the
// request head first, briefly, to record the destination asked for.
func (p *Proxy) refuseConn(ctx context.Context, c net.Conn) {
	wait := min(p.cfg.HeaderTimeout, RefuseTimeout)
	deadline := time.Now().Add(wait)
	c, first, w, cerr := p.client(ctx, c, deadline)
	defer p.release(c, true)
	defer w.halt()
	if errors.Is(cerr, errBadHandoff) {
		return
	}
	s := &session{p: p, c: c, in: &connReader{c: c, remain: p.cfg.MaxHeaderBytes, first: first}, out: &connWriter{c: c}}
	s.br = bufio.NewReaderSize(s.in, readBufferBytes)
	s.bw = bufio.NewWriterSize(s.out, readBufferBytes)
	if err := c.SetReadDeadline(deadline); err != nil {
		return
	}
	// A client that stalled or left before its first byte is refused
	// all the same, without a destination.
	host, port := "", 0
	if cerr == nil {
		if req, err := http.ReadRequest(s.br); err == nil {
			if h, pt, err := requestDestination(req); err == nil {
				host, port = h, pt
				w.setDest(host, port)
			}
		}
	}
	if err := c.SetWriteDeadline(time.Now().Add(wait)); err != nil {
		return
	}
	s.throttled(ctx, host, port)
}

// throttled answers a connection past MaxConns and counts it: a limit on
// volume, recorded apart from the policy's refusals.
func (s *session) throttled(ctx context.Context, host string, port int) {
	if s.p.isClosed() {
		return
	}
	s.p.stats.throttle()
	if s.p.stats.throttledFirst() {
		s.p.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "egress throttled",
			slog.String(logkey.Host, host), slog.Int(logkey.Port, port), slog.Int("max_conns", s.p.cfg.MaxConns))
	}
	s.answer(ctx, http.StatusServiceUnavailable, "gilf egress: throttled: too many connections at once\n")
}

// readRequest reads the next request's head: within HeaderTimeout, and
// for a later request on a kept-alive connection after at most
// IdleTimeout of silence. A head past MaxHeaderBytes is answered 431,
// one that does not parse 400; a client that went away or stalled is
// hung up on.
func (s *session) readRequest(ctx context.Context, later bool) (*http.Request, bool) {
	cfg := s.p.cfg
	s.in.head(cfg.MaxHeaderBytes)
	s.in.idle = 0
	if later {
		if err := s.c.SetReadDeadline(time.Now().Add(cfg.IdleTimeout)); err != nil {
			return nil, false
		}
		if _, err := s.br.Peek(1); err != nil {
			return nil, false
		}
	}
	headStart := s.start
	if later {
		headStart = time.Now()
	}
	if err := s.c.SetReadDeadline(headStart.Add(cfg.HeaderTimeout)); err != nil {
		return nil, false
	}
	req, err := http.ReadRequest(s.br)
	switch {
	case err == nil:
	case s.in.over:
		s.refuse(ctx, http.StatusRequestHeaderFieldsTooLarge, "", 0, ReasonBadRequest)
		return nil, false
	case gone(err), s.in.err != nil && gone(s.in.err):
		// The client left or stalled, perhaps in the middle of a
		// line (which net/textproto then hands on as if whole).
		return nil, false
	default:
		s.refuse(ctx, http.StatusBadRequest, "", 0, ReasonBadRequest)
		return nil, false
	}
	s.in.endHead()
	s.in.idle = cfg.IdleTimeout
	return req, true
}

// gone reports whether a read error means the peer left or stalled, so
// there is no one to answer.
func gone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// requestDestination is the host and port a request asks for, whether it
// is a CONNECT or a plain-HTTP request; host is "" when it names none
// that parses.
func requestDestination(req *http.Request) (string, int, error) {
	if req.Method == http.MethodConnect {
		return connectTarget(req)
	}
	return requestTarget(req)
}

// refuse records a refusal and answers it; the connection is closed
// after. Once Close has begun there is nothing to record: what fails
// then (a resolution or dial cut short) failed because of Close.
func (s *session) refuse(ctx context.Context, status int, host string, port int, reason Reason) {
	if s.p.isClosed() {
		return
	}
	s.p.deny(ctx, host, port, reason)
	dest := ""
	if host != "" {
		dest = hostPortString(host, port) + " "
	}
	s.answer(ctx, status, "gilf egress: "+dest+"refused: "+string(reason)+"\n")
}

// answer writes a short plain-text response that closes the connection.
// body holds only what the proxy itself validated: no request bytes.
func (s *session) answer(ctx context.Context, status int, body string) {
	fmt.Fprintf(s.bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if err := s.bw.Flush(); err != nil {
		s.p.cfg.Log.LogAttrs(ctx, slog.LevelDebug, "egress answer", slog.Int(logkey.Status, status), slog.String(logkey.Err, err.Error()))
	}
}

// connReader reads a connection for a bufio.Reader. While a head is read
// it hands out no more than what is left of the head's allowance, so a
// head past the limit is cut off where it crosses it; when idle is set,
// each read must see a byte within idle. It counts what it read.
//
// first are bytes already read from the connection (to learn it was not
// a handoff): it hands them out before reading more. The head is read
// through it before anything reads the connection directly, so the
// connection itself, not a wrapper, is what a tunnel splices.
type connReader struct {
	c      net.Conn
	first  []byte
	idle   time.Duration
	remain int   // what the head being read may still take; -1: no head
	over   bool  // a head used up its allowance
	err    error // the first error of the connection during the head
	n      int64 // bytes read
}

// head starts a head of at most limit bytes.
func (r *connReader) head(limit int) { r.remain, r.over, r.err = limit, false, nil }

// endHead ends the head: what follows is a body or a tunnel.
func (r *connReader) endHead() { r.remain = -1 }

// Read reads the connection; see connReader.
func (r *connReader) Read(p []byte) (int, error) {
	if r.remain == 0 {
		r.over = true
		return 0, errHeadTooLarge
	}
	if r.remain > 0 && len(p) > r.remain {
		p = p[:r.remain]
	}
	if len(r.first) > 0 {
		n := copy(p, r.first)
		r.first = r.first[n:]
		r.n += int64(n)
		if r.remain > 0 {
			r.remain -= n
		}
		return n, nil
	}
	if r.idle > 0 {
		if err := r.c.SetReadDeadline(time.Now().Add(r.idle)); err != nil {
			return 0, err
		}
	}
	n, err := r.c.Read(p)
	r.n += int64(n)
	if r.remain > 0 {
		r.remain -= n
	}
	if r.err == nil {
		r.err = err
	}
	return n, err
}

// connWriter writes a connection; when idle is set each write must
// finish within idle. It counts what it wrote.
type connWriter struct {
	c    net.Conn
	idle time.Duration
	n    int64
}

// Write writes the connection; see connWriter.
func (w *connWriter) Write(p []byte) (int, error) {
	if w.idle > 0 {
		if err := w.c.SetWriteDeadline(time.Now().Add(w.idle)); err != nil {
			return 0, err
		}
	}
	n, err := w.c.Write(p)
	w.n += int64(n)
	return n, err
}

// parseTarget parses a destination authority as a client sends it:
// "host:port", "[v6]:port", or without the port when defPort is not zero.
// It returns the canonical host (lower-case name, or unmapped address).
func parseTarget(s string, defPort int) (string, int, error) {
	hostText, portText, hasPort := s, "", false
	if rest, ok := strings.CutPrefix(s, "["); ok {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", 0, errors.New("unclosed [")
		}
		hostText = s[:end+2]
		if after := rest[end+1:]; after != "" {
			if portText, ok = strings.CutPrefix(after, ":"); !ok {
				return "", 0, errors.New("only a port may follow ]")
			}
			hasPort = true
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		hostText, portText, hasPort = s[:i], s[i+1:], true
	}
	port := defPort
	if hasPort {
		p, err := parsePort(portText)
		if err != nil {
			return "", 0, err
		}
		port = p
	}
	if port == 0 {
		return "", 0, errors.New("no port")
	}
	if !strings.HasPrefix(hostText, "[") && strings.Contains(hostText, ":") {
		return "", 0, errors.New("an IPv6 address is written in brackets")
	}
	host, _, err := normalizeHost(hostText)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}
