package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// Defaults of Config. Each limit has a name, a default and a test at its
// boundary.
const (
	// DefaultDialTimeout bounds the dial of one address, and the
	// resolution of a name.
	DefaultDialTimeout = 10 * time.Second
	// DefaultHeaderTimeout bounds the reading of one request's head,
	// from its first byte (from the connection's start for the first).
	DefaultHeaderTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a tunnel, or a plain-HTTP connection
	// between or within requests, that moved no byte either way.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxConns is how many client connections may be open at
	// once; past it a connection is answered 503 and counted as throttled.
	DefaultMaxConns = 256
	// DefaultMaxHeaderBytes bounds a request's head (request line and
	// header fields), and an upstream response's.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxRecorded is how many distinct allowed destinations, and
	// how many distinct denials, Report lists; past it they are counted.
	DefaultMaxRecorded = 200
	// DefaultBlockingCheckInterval is how often a connection handed over
	// from the sandbox is checked for blocking mode (see watchdog): the
	// longest a read or write of one the sandbox switched to blocking
	// mode waits in the kernel before the connection is hung up.
	DefaultBlockingCheckInterval = 250 * time.Millisecond
	// MinBlockingCheckInterval is the shortest BlockingCheckInterval New
	// accepts: each check is a system call per handed-over connection.
	MinBlockingCheckInterval = time.Millisecond
)

// Fixed limits of the proxy's machinery.
const (
	// RefuseTimeout bounds how long a connection past MaxConns is read
	// to learn the destination it asks for, before it is answered 503.
	// Such connections are themselves at most MaxConns at once; past
	// that they are closed unread.
	RefuseTimeout = 2 * time.Second
	// acceptPauseMax is the longest pause after a failed accept (out of
	// descriptors) before the next.
	acceptPauseMax = time.Second
	// readBufferBytes and writeBufferBytes size the buffers heads and
	// plain-HTTP bodies go through. Tunnels use none.
	readBufferBytes  = 4 << 10
	writeBufferBytes = 32 << 10
	// idleChecks is how often per IdleTimeout a tunnel checks it moved
	// bytes: an idle tunnel is closed between IdleTimeout and
	// IdleTimeout*(1+1/idleChecks) after its last byte.
	idleChecks = 4
)

// Config configures a Proxy. Zero fields take defaults.
type Config struct {
	// Rules are the destinations that may be reached; none means none.
	Rules []Rule
	// Resolve resolves a host name on the worker (the name comes
	// lower-case, without a trailing dot); nil means
	// net.DefaultResolver.LookupNetIP for the rooted name, so the
	// worker's search domains never apply.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial dials one checked address: always "tcp" and an IP:port,
	// never a name. nil means a net.Dialer with DialTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OwnAddrs are the worker's addresses, never dialed; nil means read
	// once from net.InterfaceAddrs in New.
	OwnAddrs []netip.Addr
	// DialTimeout bounds each address's dial and the resolution;
	// zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// HeaderTimeout bounds the reading of a request's head; zero means
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout closes a connection that moved no byte either way;
	// zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxConns bounds the client connections open at once; zero means
	// DefaultMaxConns.
	MaxConns int
	// MaxHeaderBytes bounds a request's or response's head; zero means
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxRecorded bounds Report's lists; zero means DefaultMaxRecorded.
	MaxRecorded int
	// BlockingCheckInterval is how often each connection handed over
	// from the sandbox is checked for blocking mode, and hung up
	// (ReasonTampered) once it is in it; zero means
	// DefaultBlockingCheckInterval, and it may not be below
	// MinBlockingCheckInterval.
	BlockingCheckInterval time.Duration
	// Tunnels are destinations whose TLS is passed through opaque even
	// when the proxy terminates TLS (a git host for git dependencies):
	// they are permitted as Rules are, and recorded as tunnels.
	Tunnels []Rule
	// CA, when set, makes the proxy terminate the TLS of every CONNECT
	// to a destination of Rules (not Tunnels) with a certificate it
	// signs, so that it sees each request: only GET and HEAD go out, and
	// the Cache serves what it can. Nil passes every CONNECT through as
	// an opaque tunnel.
	CA *CA
	// Upstreams is the pool requests go out through, shared by the
	// worker's proxies; nil makes one for this proxy from Rules,
	// Resolve, Dial and OwnAddrs.
	Upstreams *Upstreams
	// Cache is the shared verifying registry cache; nil caches nothing.
	Cache *Cache
	// Log receives a line for each new denial entry (Info), and for each
	// new allowed destination and each failed dial or resolution
	// (Debug); never a path or a header. nil discards.
	Log *slog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.HeaderTimeout == 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxRecorded == 0 {
		c.MaxRecorded = DefaultMaxRecorded
	}
	if c.BlockingCheckInterval == 0 {
		c.BlockingCheckInterval = DefaultBlockingCheckInterval
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Resolve == nil {
		c.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host+".")
		}
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{Timeout: c.DialTimeout}).DialContext
	}
	return c
}

// validate reports every problem of a defaulted Config at once, and
// returns its rules in canonical form.
func (c Config) validate() ([]Rule, error) {
	var errs []error
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"DialTimeout", c.DialTimeout < 0},
		{"HeaderTimeout", c.HeaderTimeout < 0},
		{"IdleTimeout", c.IdleTimeout < 0},
		{"MaxConns", c.MaxConns < 0},
		{"MaxHeaderBytes", c.MaxHeaderBytes < 0},
		{"MaxRecorded", c.MaxRecorded < 0},
	} {
		if f.negative {
			errs = append(errs, fmt.Errorf("%s must not be negative", f.name))
		}
	}
	if c.BlockingCheckInterval < MinBlockingCheckInterval {
		errs = append(errs, fmt.Errorf("BlockingCheckInterval must be at least %v", MinBlockingCheckInterval))
	}
	rules, err := canonicalRules("Rules", c.Rules)
	errs = append(errs, err)
	return rules, errors.Join(errs...)
}

// canonicalRules returns rules in canonical form, and an error naming
// field for each that does not parse back.
func canonicalRules(field string, rules []Rule) ([]Rule, error) {
	var errs []error
	out := make([]Rule, 0, len(rules))
	for _, r := range rules {
		cr, err := ParseRule(r.String())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			continue
		}
		out = append(out, cr)
	}
	return out, errors.Join(errs...)
}

// Proxy is the forward proxy of one sandboxed step: it serves HTTP/1.1
// CONNECT and plain-HTTP absolute-URI requests, lets through only what
// Decide allows, and records what it saw (Report). It may serve several
// listeners at once; Close ends all of them.
//
// Its own answers close the connection: 403 for a destination Decide
// refuses, 400 for a request it will not serve (ReasonBadRequest), 431
// for a head over MaxHeaderBytes, 502 when no permitted address could be
// dialed (ReasonDialFailed) or the upstream failed before its response,
// 503 past MaxConns (counted as throttled). A client that goes silent or away is
// hung up on without an answer or a record. The proxy never follows a
// redirect: the client gets the 3xx.
type Proxy struct {
	cfg   Config
	own   []netip.Addr
	stats *stats
	up    *Upstreams
	// ownUp says up is the proxy's own (Config.Upstreams was nil):
	// Close closes its idle connections.
	ownUp bool
	// tunnels are Config.Tunnels, canonical; Config.Rules holds them too.
	tunnels []Rule

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	stops     []context.CancelFunc
	conns     map[net.Conn]struct{} // client and upstream connections
	active    int                   // client connections being served
	refusing  int                   // client connections past MaxConns being refused
	wg        sync.WaitGroup        // every goroutine the proxy started
	// tampered is set once a watchdog caught a handed-off socket in
	// blocking mode: only hostile code does that, so no further handoff
	// is taken from this proxy's sandbox (a toggling attacker could
	// otherwise slip reads past the checks, one thread each).
	tampered atomic.Bool
}

// New returns a Proxy for cfg, ready to Serve. It reports every problem of
// cfg at once (negative limits, rules that do not parse back).
func New(cfg Config) (*Proxy, error) {
	cfg = cfg.withDefaults()
	rules, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("egress proxy config: %w", err)
	}
	tunnels, err := canonicalRules("Tunnels", cfg.Tunnels)
	if err != nil {
		return nil, fmt.Errorf("egress proxy config: %w", err)
	}
	for _, r := range tunnels {
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	cfg.Rules = rules
	own := cfg.OwnAddrs
	if own == nil {
		if own, err = interfaceAddrs(); err != nil {
			return nil, err
		}
	}
	up, ownUp := cfg.Upstreams, cfg.Upstreams == nil
	if ownUp {
		if up, err = NewUpstreams(UpstreamConfig{
			Rules: rules, Resolve: cfg.Resolve, Dial: cfg.Dial, OwnAddrs: own,
			DialTimeout: cfg.DialTimeout, MaxHeaderBytes: cfg.MaxHeaderBytes,
		}); err != nil {
			return nil, err
		}
	}
	st := newStats(cfg.MaxRecorded)
	st.withCache = cfg.Cache != nil
	return &Proxy{
		cfg:       cfg,
		own:       own,
		stats:     st,
		up:        up,
		ownUp:     ownUp,
		tunnels:   tunnels,
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}, nil
}

// interfaceAddrs returns the worker's own addresses, unmapped.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %w", err)
	}
	own := []netip.Addr{}
	for _, a := range as {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			own = append(own, addr.Unmap())
		}
	}
	return own, nil
}

// Serve accepts connections on l until l is closed or Close is called,
// and serves each on its own goroutine. It returns nil after Close (also
// when called after Close, closing l), and the accept error when l fails
// otherwise. Handlers may outlive Serve; Close waits for them.
//
// On a unix listener a connection may hand over the TCP connection to
// serve instead of speaking itself: its first message is one marker byte
// with the connection's descriptor attached (SCM_RIGHTS: the bridge's
// handoff). The proxy checks that the descriptor is a TCP socket that is
// not listening, and closes and refuses anything else (ReasonBadRequest,
// no host); the TCP connection then takes the accepted one's place, under
// every limit. A first message without a descriptor is a client speaking
// on the unix connection itself.
func (p *Proxy) Serve(l net.Listener) error {
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cancel()
		l.Close()
		return nil
	}
	p.listeners[l] = struct{}{}
	p.stops = append(p.stops, cancel)
	p.mu.Unlock()
	var pause time.Duration
	for {
		c, err := l.Accept()
		if err == nil {
			pause = 0
			p.admit(ctx, c)
			continue
		}
		if p.isClosed() {
			return nil
		}
		if transientAccept(err) {
			pause = min(max(2*pause, 5*time.Millisecond), acceptPauseMax)
			p.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "egress proxy accept", slog.String(logkey.Err, err.Error()))
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
		return fmt.Errorf("egress proxy accept: %w", err)
	}
}

// transientAccept reports whether an accept error passes (the process or
// system ran out of descriptors or memory, or a client gave up early).
func transientAccept(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// admit starts serving an accepted connection, or refusing it past
// MaxConns.
func (p *Proxy) admit(ctx context.Context, c net.Conn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		return
	}
	var serve func(context.Context, net.Conn)
	switch {
	case p.active < p.cfg.MaxConns:
		p.active++
		serve = p.serveConn
	case p.refusing < p.cfg.MaxConns:
		p.refusing++
		serve = p.refuseConn
	default:
		p.mu.Unlock()
		c.Close()
		p.stats.throttle()
		return
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		serve(ctx, c)
	}()
}

// Close stops accepting, shuts down and closes every open client and
// upstream connection (tunnels and handed-over connections included), and
// waits for every goroutine the proxy started. It is safe to call twice;
// after it, Report is final.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	listeners, conns, stops := p.listeners, p.conns, p.stops
	p.listeners, p.conns, p.stops = map[net.Listener]struct{}{}, map[net.Conn]struct{}{}, nil
	p.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	var errs []error
	for l := range listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("close listener: %w", err))
		}
	}
	for c := range conns {
		hangUp(c)
	}
	p.wg.Wait()
	if p.ownUp {
		p.up.Close()
	}
	return errors.Join(errs...)
}

// Report returns a snapshot of what the proxy allowed and denied. A
// tunnel's or request's bytes are counted when it ends.
func (p *Proxy) Report() Report { return p.stats.report() }

// isClosed reports whether Close has begun.
func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track registers an upstream connection so Close closes it. After Close
// it closes c instead and reports false.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// drop closes a tracked connection and forgets it.
func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// release drops a client connection and frees its place.
func (p *Proxy) release(c net.Conn, refused bool) {
	p.mu.Lock()
	if refused {
		p.refusing--
	} else {
		p.active--
	}
	p.mu.Unlock()
	p.drop(c)
}

// spawn runs f on a goroutine Close waits for. It is only called from a
// goroutine Close already waits for, so the group is never empty then.
func (p *Proxy) spawn(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// decide resolves host when the rules permit it (and it is a name) and
// returns Decide's verdict.
func (p *Proxy) decide(ctx context.Context, host string, port int) Decision {
	return resolveAndDecide(ctx, p.cfg, p.own, host, port)
}

// resolveAndDecide is Decide on host:port with cfg's rules, the name
// resolved (within DialTimeout) only when a rule permits it: a refused
// name is never looked up.
func resolveAndDecide(ctx context.Context, cfg Config, own []netip.Addr, host string, port int) Decision {
	var resolved []netip.Addr
	if _, ok := Matches(cfg.Rules, host, port); ok {
		if _, literal, err := normalizeHost(host); err == nil && !literal.IsValid() {
			rctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
			addrs, err := cfg.Resolve(rctx, host)
			cancel()
			if err != nil {
				cfg.Log.LogAttrs(ctx, slog.LevelDebug, "egress resolve",
					slog.String(logkey.Host, host), slog.String(logkey.Err, err.Error()))
			}
			resolved = addrs
		}
	}
	return Decide(cfg.Rules, host, port, resolved, own)
}

// dial connects to the first of addrs (each one a checked address) that
// answers, each within DialTimeout, and tracks the connection.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, error) {
	c, err := dialFirst(ctx, p.cfg, addrs, port)
	if err != nil {
		return nil, err
	}
	if !p.track(c) {
		return nil, net.ErrClosed
	}
	return c, nil
}

// dialFirst connects to the first of addrs that answers, each within
// cfg.DialTimeout, by address.
func dialFirst(ctx context.Context, cfg Config, addrs []netip.Addr, port int) (net.Conn, error) {
	var errs []error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		c, err := cfg.Dial(dctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("no address to dial")
	}
	return nil, errors.Join(errs...)
}

// deny records a refusal, and logs it the first time it is recorded.
func (p *Proxy) deny(ctx context.Context, host string, port int, reason Reason) {
	if p.stats.deny(host, port, reason) {
		p.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "egress denied",
			slog.String(logkey.Host, host), slog.Int(logkey.Port, port), slog.String(logkey.Reason, string(reason)))
	}
}

// allowed records one allowed connection or request, and logs the
// destination the first time.
func (p *Proxy) allowed(ctx context.Context, host string, port int) {
	if p.stats.allow(host, port) {
		p.cfg.Log.LogAttrs(ctx, slog.LevelDebug, "egress allowed",
			slog.String(logkey.Host, host), slog.Int(logkey.Port, port))
	}
}

// hostPortString joins a recorded host and port for a message.
func hostPortString(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
