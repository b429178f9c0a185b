package egress

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

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

// origin is where a request goes: scheme, host (as the client named it,
// canonical) and port.
type origin struct {
	scheme string
	host   string
	port   int
}

// base is the origin as a URL prefix, the scheme's default port left out.
func (o origin) base() string {
	if (o.scheme == "https" && o.port == PortHTTPS) || (o.scheme == "http" && o.port == PortHTTP) {
		return o.scheme + "://" + hostForURL(o.host)
	}
	return o.scheme + "://" + hostPortString(o.host, o.port)
}

// hostForURL brackets an IPv6 literal.
func hostForURL(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}

// forward serves one plain-HTTP request (absolute URI) and reports
// whether the client connection may carry another.
func (s *session) forward(ctx context.Context, req *http.Request) bool {
	host, port, err := requestTarget(req)
	if err != nil {
		s.refuse(ctx, http.StatusBadRequest, host, port, ReasonBadRequest)
		return false
	}
	return s.serveRequest(ctx, req, origin{scheme: "http", host: host, port: port})
}

// serveRequest serves one request to o, plain or inside a terminated TLS
// connection: only GET and HEAD without a body are forwarded; the rules
// are checked on the name before anything is resolved; the response
// comes from the verifying cache or the registry through the pool. It
// reports whether the client connection may carry another request.
func (s *session) serveRequest(ctx context.Context, req *http.Request, o origin) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		s.refuse(ctx, http.StatusMethodNotAllowed, o.host, o.port, ReasonMethod)
		return false
	}
	if req.ContentLength != 0 || len(req.TransferEncoding) > 0 {
		// A body on a GET is a way to send data out all the same.
		s.refuse(ctx, http.StatusMethodNotAllowed, o.host, o.port, ReasonMethod)
		return false
	}
	if _, ok := Matches(s.p.cfg.Rules, o.host, o.port); !ok {
		s.refuse(ctx, http.StatusForbidden, o.host, o.port, ReasonNotAllowed)
		return false
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, err := http.NewRequestWithContext(rctx, req.Method, o.base()+req.URL.RequestURI(), nil)
	if err != nil {
		s.refuse(ctx, http.StatusBadRequest, o.host, o.port, ReasonBadRequest)
		return false
	}
	out.Header = req.Header.Clone()
	stripHopByHop(out.Header)
	out.Header.Del("Expect")
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""}
	}
	in0 := s.out.n
	defer func() { s.p.stats.addBytes(o.host, o.port, headBytes(req), s.out.n-in0) }()
	resp, err := s.p.fetch(rctx, out, o, req.Header.Get("Authorization") != "")
	if err != nil {
		s.upstreamFailed(ctx, o, err)
		return false
	}
	s.p.allowed(ctx, o.host, o.port)
	return s.respond(req, resp)
}

// upstreamFailed records and answers a request the upstream did not
// answer: refused at the dial (a name that resolved to a forbidden
// address), not dialed, a tarball that failed its integrity, or an
// upstream that failed before its response. Each is in the record: a 502
// the record does not explain sends whoever reads it looking in the
// wrong place.
func (s *session) upstreamFailed(ctx context.Context, o origin, err error) {
	var denied *errDenied
	var dial *errDial
	switch {
	case errors.As(err, &denied):
		s.refuse(ctx, http.StatusForbidden, o.host, o.port, denied.reason)
	case errors.As(err, &dial):
		s.dialFailed(ctx, o.host, o.port, err)
	case errors.Is(err, errIntegrity):
		s.refuse(ctx, http.StatusBadGateway, o.host, o.port, ReasonIntegrity)
	case ctx.Err() != nil:
	default:
		s.p.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "egress upstream failed",
			slog.String(logkey.Host, o.host), slog.Int(logkey.Port, o.port), slog.String(logkey.Err, err.Error()))
		s.refuse(ctx, http.StatusBadGateway, o.host, o.port, ReasonUpstream)
	}
}

// headBytes is about what a request's head takes on the wire.
func headBytes(req *http.Request) int64 {
	n := len(req.Method) + len(req.RequestURI) + 12
	for k, vs := range req.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return int64(n)
}

// respond streams resp to the client and reports whether the client
// connection may carry another request.
func (s *session) respond(req *http.Request, resp *http.Response) bool {
	defer resp.Body.Close()
	stripHopByHop(resp.Header)
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	resp.Request = req
	resp.Trailer = nil
	keep := !req.Close && req.ProtoAtLeast(1, 1)
	hasBody := req.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
	resp.TransferEncoding = nil
	if hasBody && resp.ContentLength < 0 {
		if req.ProtoAtLeast(1, 1) {
			resp.TransferEncoding = []string{"chunked"}
		} else {
			// An HTTP/1.0 client reads to the connection's end.
			keep = false
		}
	}
	resp.Close = !keep
	err := resp.Write(s.bw)
	if err == nil {
		err = s.bw.Flush()
	}
	return err == nil && keep
}

// idleReader cancels a request whose upstream body moved no byte for
// idle (zero: never).
type idleReader struct {
	r      io.ReadCloser
	idle   time.Duration
	cancel context.CancelFunc
	timer  *time.Timer
}

func (r *idleReader) Read(p []byte) (int, error) {
	if r.idle > 0 {
		if r.timer == nil {
			r.timer = time.AfterFunc(r.idle, r.cancel)
		} else {
			r.timer.Reset(r.idle)
		}
	}
	n, err := r.r.Read(p)
	if r.timer != nil {
		r.timer.Stop()
	}
	return n, err
}

func (r *idleReader) Close() error {
	if r.timer != nil {
		r.timer.Stop()
	}
	return r.r.Close()
}
