package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// terminate serves a CONNECT to a registry whose TLS the proxy
// terminates: it answers 200, completes the client's TLS handshake with a
// certificate the worker's CA signs for host, and then serves each
// request inside as a plain one to https://host:port (serveRequest: GET
// and HEAD only, the cache, the pool). A request inside must name the
// CONNECT's own authority. Nothing is resolved for a name the rules do
// not permit.
func (s *session) terminate(ctx context.Context, host string, port int) {
	if _, ok := Matches(s.p.cfg.Rules, host, port); !ok {
		s.refuse(ctx, http.StatusForbidden, host, port, ReasonNotAllowed)
		return
	}
	if _, err := io.WriteString(s.bw, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if err := s.bw.Flush(); err != nil {
		return
	}
	// The first byte says what the client speaks in the tunnel: a TLS
	// handshake record, or a plain HTTP request (npm tunnels http://
	// registries too).
	if err := s.c.SetReadDeadline(time.Now().Add(s.p.cfg.HeaderTimeout)); err != nil {
		return
	}
	first, err := s.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] != tlsHandshakeRecord {
		s.serveTunneled(ctx, origin{scheme: "http", host: host, port: port})
		return
	}
	// What the client sent after its head (its ClientHello, eagerly)
	// is already buffered: the handshake reads it first.
	early, err := s.br.Peek(s.br.Buffered())
	if err != nil {
		return
	}
	early = append([]byte(nil), early...)
	ca := s.p.cfg.CA
	tc := tls.Server(&prefixConn{Conn: s.c, prefix: early}, &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.certFor(host) },
		NextProtos:     []string{"http/1.1"},
		MinVersion:     tls.VersionTLS12,
	})
	if err := s.c.SetDeadline(time.Now().Add(s.p.cfg.HeaderTimeout)); err != nil {
		return
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		s.p.cfg.Log.LogAttrs(ctx, slog.LevelDebug, "egress tls handshake",
			slog.String(logkey.Host, host), slog.Int(logkey.Port, port), slog.String(logkey.Err, err.Error()))
		return
	}
	if err := s.c.SetDeadline(time.Time{}); err != nil {
		return
	}
	in := &session{p: s.p, c: tc, start: time.Now(), watch: s.watch,
		in: &connReader{c: tc, remain: -1}, out: &connWriter{c: tc, idle: s.p.cfg.IdleTimeout}}
	in.br = bufio.NewReaderSize(in.in, readBufferBytes)
	in.bw = bufio.NewWriterSize(in.out, writeBufferBytes)
	in.serveTunneled(ctx, origin{scheme: "https", host: host, port: port})
}

// tlsHandshakeRecord is the first byte of a TLS connection.
const tlsHandshakeRecord = 0x16

// serveTunneled serves the requests a client sends inside a CONNECT to
// o, each of which must name o's own authority.
func (s *session) serveTunneled(ctx context.Context, o origin) {
	defPort := PortHTTPS
	if o.scheme == "http" {
		defPort = PortHTTP
	}
	for {
		// Each request, the first too, may come after IdleTimeout of
		// silence and must be whole within HeaderTimeout.
		req, ok := s.readRequest(ctx, true)
		if !ok {
			return
		}
		if h, p, err := parseTarget(req.Host, defPort); err != nil || h != o.host || p != o.port {
			s.refuse(ctx, http.StatusBadRequest, o.host, o.port, ReasonBadRequest)
			return
		}
		if req.URL.IsAbs() && req.URL.Scheme != o.scheme {
			s.refuse(ctx, http.StatusBadRequest, o.host, o.port, ReasonBadRequest)
			return
		}
		if !s.serveRequest(ctx, req, o) {
			return
		}
	}
}

// prefixConn reads prefix before the connection itself.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
