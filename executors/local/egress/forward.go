package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
)

// errBadInterim ends a response that switched protocols (the proxy
// strips Upgrade, so none may) or sent too many 1xx responses.
var errBadInterim = errors.New("unexpected interim response")

// hopHeaders are the hop-by-hop header fields (RFC 9110 §7.6.1), never
// forwarded either way, besides those the Connection field lists.
func hopHeaders() []string {
	return []string{
		"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	}
}

// stripHopByHop deletes the hop-by-hop fields of h.
func stripHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders() {
		h.Del(name)
	}
}

// requestTarget is the destination of a plain-HTTP request: its absolute
// URI must be http:// (https goes through CONNECT), without user info. The
// port defaults to 80. For a request refused for its scheme, host and
// port still name what it asked for when they parse.
func requestTarget(req *http.Request) (string, int, error) {
	u := req.URL
	if req.ProtoMajor != 1 || u == nil || !u.IsAbs() || u.Host == "" {
		return "", 0, errors.New("not an absolute URI")
	}
	defPort := 0
	switch u.Scheme {
	case "http":
		defPort = PortHTTP
	case "https":
		defPort = PortHTTPS
	}
	host, port, err := parseTarget(u.Host, defPort)
	switch {
	case err != nil:
		return "", 0, err
	case u.Scheme != "http":
		return host, port, errors.New("only http:// is forwarded")
	case u.User != nil:
		return host, port, errors.New("user info")
	}
	return host, port, nil
}

// upstream is the connection a session's plain-HTTP requests go to, kept
// while they name the same destination.
type upstream struct {
	key  hostPort
	conn net.Conn
	r    *connReader
	br   *bufio.Reader
	w    *connWriter
	bw   *bufio.Writer
}

// closeUpstream closes the kept upstream, if any.
func (s *session) closeUpstream() {
	if s.up != nil {
		s.p.drop(s.up.conn)
		s.up = nil
	}
}

// forward serves one plain-HTTP request: decide, send it to a checked
// address, stream the response back. It reports whether the client
// connection may carry another request.
//
// Every request is decided on its own destination. One naming the
// destination of the kept upstream reuses it without resolving again:
// that connection goes to an address checked when it was dialed, and the
// rules do not change.
func (s *session) forward(ctx context.Context, req *http.Request) bool {
	host, port, err := requestTarget(req)
	if err != nil {
		s.refuse(ctx, http.StatusBadRequest, host, port, ReasonBadRequest)
		return false
	}
	key := hostPort{host, port}
	reused := s.up != nil && s.up.key == key
	if !reused {
		s.closeUpstream()
		if !s.openUpstream(ctx, key) {
			return false
		}
	}
	s.p.allowed(ctx, host, port)
	out := outgoing(req)
	up := s.up
	in0, out0 := up.r.n, up.w.n
	resp, err := s.roundTrip(req, out)
	if err != nil && reused && up.r.n == in0 && req.Body == http.NoBody {
		// The upstream had closed the kept connection: once more on a
		// fresh one, when nothing was read and there is no body to
		// send again.
		s.p.stats.addBytes(host, port, up.w.n-out0, 0)
		s.closeUpstream()
		if !s.openUpstream(ctx, key) {
			return false
		}
		up = s.up
		in0, out0 = 0, 0
		resp, err = s.roundTrip(req, out)
	}
	defer func() { s.p.stats.addBytes(host, port, up.w.n-out0, up.r.n-in0) }()
	if err != nil {
		s.closeUpstream()
		s.answer(ctx, http.StatusBadGateway, "gilf egress: "+hostPortString(host, port)+": upstream failed\n")
		return false
	}
	return s.respond(req, resp)
}

// openUpstream decides the destination, dials its first permitted
// address that answers and keeps the connection as the session's
// upstream; otherwise it answers the refusal.
func (s *session) openUpstream(ctx context.Context, key hostPort) bool {
	dec := s.p.decide(ctx, key.host, key.port)
	if !dec.Allowed {
		s.refuse(ctx, http.StatusForbidden, key.host, key.port, dec.Reason)
		return false
	}
	c, err := s.p.dial(ctx, dec.Addrs, key.port)
	if err != nil {
		s.dialFailed(ctx, key.host, key.port, err)
		return false
	}
	idle := s.p.cfg.IdleTimeout
	up := &upstream{key: key, conn: c, r: &connReader{c: c, idle: idle, remain: -1}, w: &connWriter{c: c, idle: idle}}
	up.br = bufio.NewReaderSize(up.r, readBufferBytes)
	up.bw = bufio.NewWriterSize(up.w, writeBufferBytes)
	s.up = up
	return true
}

// outgoing is the request as it goes upstream: origin form, the Host of
// its URI, no hop-by-hop fields, no Expect (the proxy answers 100 itself),
// and no User-Agent added where the client sent none.
func outgoing(req *http.Request) *http.Request {
	h := req.Header.Clone()
	stripHopByHop(h)
	h.Del("Expect")
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""}
	}
	return &http.Request{
		Method:           req.Method,
		URL:              req.URL,
		Proto:            "HTTP/1.1",
		ProtoMajor:       1,
		ProtoMinor:       1,
		Header:           h,
		Body:             req.Body,
		ContentLength:    req.ContentLength,
		TransferEncoding: req.TransferEncoding,
		Host:             req.URL.Host,
	}
}

// roundTrip sends out upstream and returns the final response, after
// passing on any 1xx responses to an HTTP/1.1 client.
func (s *session) roundTrip(req, out *http.Request) (*http.Response, error) {
	if req.ContentLength != 0 && strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		if _, err := io.WriteString(s.bw, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return nil, err
		}
		if err := s.bw.Flush(); err != nil {
			return nil, err
		}
	}
	up := s.up
	if err := out.Write(up.bw); err != nil {
		return nil, err
	}
	if err := up.bw.Flush(); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		up.r.head(s.p.cfg.MaxHeaderBytes)
		resp, err := http.ReadResponse(up.br, out)
		up.r.endHead()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= http.StatusOK {
			return resp, nil
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusSwitchingProtocols || i == maxInterim {
			return nil, errBadInterim
		}
		if req.ProtoAtLeast(1, 1) {
			stripHopByHop(resp.Header)
			fmt.Fprintf(s.bw, "HTTP/1.1 %d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
			if err := resp.Header.Write(s.bw); err != nil {
				return nil, err
			}
			if _, err := io.WriteString(s.bw, "\r\n"); err != nil {
				return nil, err
			}
			if err := s.bw.Flush(); err != nil {
				return nil, err
			}
		}
	}
}

// respond streams resp to the client and reports whether the client
// connection may carry another request. The kept upstream is closed when
// it cannot carry one either.
func (s *session) respond(req *http.Request, resp *http.Response) bool {
	defer resp.Body.Close()
	stripHopByHop(resp.Header)
	upKeep := !resp.Close
	keep := !req.Close && req.ProtoAtLeast(1, 1)
	chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
	hasBody := req.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
	if hasBody && resp.ContentLength < 0 && (!chunked || !req.ProtoAtLeast(1, 1)) {
		// The body ends when the connection does: an HTTP/1.0
		// client cannot read chunks, and an upstream body of no
		// stated length is passed on as it came.
		resp.TransferEncoding = nil
		keep = false
	}
	resp.Close = !keep
	err := resp.Write(s.bw)
	if err == nil {
		err = s.bw.Flush()
	}
	if err != nil {
		s.closeUpstream()
		return false
	}
	if !upKeep {
		s.closeUpstream()
	}
	return keep
}
