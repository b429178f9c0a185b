package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// Defaults of UpstreamConfig.
const (
	// DefaultUpstreamIdlePerHost is how many idle connections to one
	// registry the pool keeps (HTTP/1.1; an HTTP/2 registry needs one).
	DefaultUpstreamIdlePerHost = 64
	// DefaultUpstreamIdleTimeout closes a pooled connection unused for
	// that long.
	DefaultUpstreamIdleTimeout = 90 * time.Second
	// DefaultResponseHeaderTimeout bounds the wait for an upstream's
	// response head once the request is sent.
	DefaultResponseHeaderTimeout = time.Minute
)

// UpstreamConfig configures Upstreams. Zero fields take defaults.
type UpstreamConfig struct {
	// Rules are checked again at each dial (Decide on the addresses the
	// name resolves to then), whatever the proxy decided before.
	Rules []Rule
	// Resolve, Dial, OwnAddrs and DialTimeout are as in Config.
	Resolve     func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	OwnAddrs    []netip.Addr
	DialTimeout time.Duration
	// RootCAs verify the registries' certificates; nil means the
	// worker's system roots.
	RootCAs *x509.CertPool
	// Credentials are the Authorization values the proxy adds to
	// requests to a registry, by "host:port" (see ReadCredentials). The
	// sandbox never sees them.
	Credentials map[string]string
	// IdlePerHost, IdleTimeout and ResponseHeaderTimeout bound the
	// pool; zero means their defaults.
	IdlePerHost           int
	IdleTimeout           time.Duration
	ResponseHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a response's head; zero means
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int
}

// Upstreams is the worker's one pool of connections to the registries,
// shared by every step's proxy: keep-alive, HTTP/2 where the registry
// offers it, so a connection from the sandbox costs a loopback hop, not a
// dial and a TLS handshake. It adds the configured credentials to each
// request. It is safe for concurrent use.
type Upstreams struct {
	cfg UpstreamConfig
	own []netip.Addr
	// dec is the Config its dials decide and dial with.
	dec Config
	tr  *http.Transport
}

// errDenied is a dial the rules refused once the name was resolved.
type errDenied struct{ reason Reason }

func (e *errDenied) Error() string { return "refused: " + string(e.reason) }

// errDial is a dial none of whose permitted addresses answered.
type errDial struct{ err error }

func (e *errDial) Error() string { return "dial: " + e.err.Error() }
func (e *errDial) Unwrap() error { return e.err }

// NewUpstreams returns a ready pool for cfg.
func NewUpstreams(cfg UpstreamConfig) (*Upstreams, error) {
	pc := Config{Rules: cfg.Rules, Resolve: cfg.Resolve, Dial: cfg.Dial, DialTimeout: cfg.DialTimeout, MaxHeaderBytes: cfg.MaxHeaderBytes}.withDefaults()
	rules, err := pc.validate()
	if err != nil {
		return nil, fmt.Errorf("egress upstreams: %w", err)
	}
	pc.Rules = rules
	cfg.DialTimeout, cfg.MaxHeaderBytes = pc.DialTimeout, pc.MaxHeaderBytes
	if cfg.IdlePerHost <= 0 {
		cfg.IdlePerHost = DefaultUpstreamIdlePerHost
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultUpstreamIdleTimeout
	}
	if cfg.ResponseHeaderTimeout <= 0 {
		cfg.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	own := cfg.OwnAddrs
	if own == nil {
		if own, err = interfaceAddrs(); err != nil {
			return nil, err
		}
	}
	u := &Upstreams{cfg: cfg, own: own, dec: pc}
	u.tr = &http.Transport{
		Proxy:                  nil, // never the worker's own proxy settings
		DialContext:            u.dial,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.DialTimeout,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true, // the client's Accept-Encoding, passed as it came
		MaxIdleConns:           0,
		MaxIdleConnsPerHost:    cfg.IdlePerHost,
		IdleConnTimeout:        cfg.IdleTimeout,
		ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: int64(cfg.MaxHeaderBytes),
	}
	return u, nil
}

// Close closes the pool's idle connections.
func (u *Upstreams) Close() { u.tr.CloseIdleConnections() }

// dial resolves addr's host (a name only when the rules permit it), keeps
// the addresses Decide permits, and dials them in order, by address.
func (u *Upstreams) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, err
	}
	dec := resolveAndDecide(ctx, u.dec, u.own, host, port)
	if !dec.Allowed {
		return nil, &errDenied{dec.Reason}
	}
	c, err := dialFirst(ctx, u.dec, dec.Addrs, port)
	if err != nil {
		return nil, &errDial{err}
	}
	return c, nil
}

// roundTrip sends req upstream with the registry's credentials, if any.
func (u *Upstreams) roundTrip(req *http.Request, host string, port int) (*http.Response, error) {
	if v, ok := u.cfg.Credentials[hostPortString(host, port)]; ok {
		req.Header.Set("Authorization", v)
	}
	return u.tr.RoundTrip(req)
}
