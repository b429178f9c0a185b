package egress

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/gilf-review/gilf/validation"
)

// Report is what a Proxy allowed and denied, each list sorted by host,
// then port, then reason.
type Report struct {
	// Allowed are the destinations reached: host as the client named it
	// (lower-case, or the canonical address), port, how many tunnels and
	// plain-HTTP requests, BytesOut sent by the client upstream and
	// BytesIn received from upstream.
	Allowed []validation.EgressHost
	// Denied are the refusals, one entry per host, port and reason. A
	// refusal that came before any destination could be read (a head
	// that does not parse, a connection past every limit) has host "".
	Denied []validation.EgressDenial
	// AllowedOmitted and DeniedOmitted count the connections (and
	// requests) to destinations past MaxRecorded distinct entries: they
	// were allowed or refused like the others, but are not listed.
	AllowedOmitted, DeniedOmitted int
	// Throttled counts connections turned away past MaxConns: recorded
	// apart from the denials, since no policy refused them.
	Throttled int
	// Cache is what the shared cache served; nil when the proxy has
	// none.
	Cache *validation.EgressCache
}

// hostPort is a destination as recorded.
type hostPort struct {
	host string
	port int
}

// denialKey is one entry of the denial list.
type denialKey struct {
	hostPort
	reason Reason
}

// stats is a Proxy's record; it is safe for concurrent use.
type stats struct {
	max int

	mu             sync.Mutex
	allowed        map[hostPort]*validation.EgressHost
	denied         map[denialKey]*validation.EgressDenial
	allowedOmitted int
	deniedOmitted  int
	throttled      int
	withCache      bool
	cache          validation.EgressCache
}

// newStats returns an empty record listing at most max entries of each
// kind.
func newStats(max int) *stats {
	return &stats{
		max:     max,
		allowed: map[hostPort]*validation.EgressHost{},
		denied:  map[denialKey]*validation.EgressDenial{},
	}
}

// allow counts one connection to a destination and reports whether it
// is the destination's first.
func (s *stats) allow(host string, port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := hostPort{host, port}
	if e, ok := s.allowed[k]; ok {
		e.Connections++
		return false
	}
	if len(s.allowed) >= s.max {
		s.allowedOmitted++
		return false
	}
	s.allowed[k] = &validation.EgressHost{Host: host, Port: port, Connections: 1}
	return true
}

// addBytes adds a connection's bytes to its destination, when it is
// listed.
func (s *stats) addBytes(host string, port int, out, in int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.allowed[hostPort{host, port}]; ok {
		e.BytesOut += out
		e.BytesIn += in
	}
}

// deny counts one refusal and reports whether it is its entry's first.
func (s *stats) deny(host string, port int, reason Reason) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := denialKey{hostPort{host, port}, reason}
	if e, ok := s.denied[k]; ok {
		e.Count++
		return false
	}
	if len(s.denied) >= s.max {
		s.deniedOmitted++
		return false
	}
	s.denied[k] = &validation.EgressDenial{Host: host, Port: port, Reason: string(reason), Count: 1}
	return true
}

// tunnel marks a listed destination as passed through opaque.
func (s *stats) tunnel(host string, port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.allowed[hostPort{host, port}]; ok {
		e.Tunnel = true
	}
}

// throttle counts one connection turned away past MaxConns.
func (s *stats) throttle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttled++
}

// throttledFirst reports whether exactly one connection was throttled
// so far (the one to log).
func (s *stats) throttledFirst() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled == 1
}

// cacheHits counts n requests (or seeded tarballs) served from the
// cache, size bytes in all.
func (s *stats) cacheHits(n int, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache.Hits += n
	s.cache.BytesServed += size
}

// cacheMiss counts one request the cache sent to the registry.
func (s *stats) cacheMiss() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache.Misses++
}

// report is a sorted copy of the record.
func (s *stats) report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Report{AllowedOmitted: s.allowedOmitted, DeniedOmitted: s.deniedOmitted, Throttled: s.throttled}
	if s.withCache {
		c := s.cache
		r.Cache = &c
	}
	for _, e := range s.allowed {
		r.Allowed = append(r.Allowed, *e)
	}
	for _, e := range s.denied {
		r.Denied = append(r.Denied, *e)
	}
	slices.SortFunc(r.Allowed, func(a, b validation.EgressHost) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
	})
	slices.SortFunc(r.Denied, func(a, b validation.EgressDenial) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port), strings.Compare(a.Reason, b.Reason))
	})
	return r
}
