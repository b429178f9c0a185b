package egress

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// gatedStandin is a stand-in registry whose packuments are answered
// only once a tarball has been asked for (or after waitLimit, noted as
// late): it tells whether the proxy asks for a tarball while its
// integrity look-up is still waiting. holdTarballs makes each tarball
// request wait until the proxy drops it, and counts those it dropped.
type gatedStandin struct {
	*standin
	holdTarballs bool

	once        sync.Once
	tarballSeen chan struct{}
	late        atomic.Int32 // packuments answered with no tarball asked for
	dropped     chan struct{}
}

func newGatedStandin() *gatedStandin {
	return &gatedStandin{standin: newStandin(), tarballSeen: make(chan struct{}), dropped: make(chan struct{}, 8)}
}

// serveGated serves g on 127.0.0.1 over plain HTTP and returns its
// host:port.
func serveGated(t testing.TB, g *gatedStandin) string {
	t.Helper()
	_, port := httpUpstream(t, "127.0.0.1", g, nil)
	return "127.0.0.1:" + strconv.Itoa(port)
}

func (g *gatedStandin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := parseTarballPath(r.URL.Path); ok {
		g.once.Do(func() { close(g.tarballSeen) })
		if g.holdTarballs {
			g.standin.mu.Lock()
			g.standin.requests = append(g.standin.requests, r.Method+" "+r.URL.Path)
			g.standin.mu.Unlock()
			select {
			case <-r.Context().Done():
				g.dropped <- struct{}{}
			case <-time.After(waitLimit):
			}
			return
		}
	} else {
		select {
		case <-g.tarballSeen:
		case <-time.After(waitLimit):
			g.late.Add(1)
		}
	}
	g.standin.ServeHTTP(w, r)
}

// A tarball whose packument the cache does not keep is asked for while
// the packument is looked up, not after: the registry sees the tarball
// request before it answers the packument. It is still kept and served
// only once the packument's digest has checked it: a tampered one that
// arrived first is refused all the same and nothing is kept.
func TestCacheAsksTarballBesideItsPackument(t *testing.T) {
	for _, tamper := range []bool{false, true} {
		t.Run(map[bool]string{false: "honest", true: "tampered"}[tamper], func(t *testing.T) {
			reg := newGatedStandin()
			reg.tamper.Store(tamper)
			target := serveGated(t, reg)
			dir := t.TempDir()
			tp, c := run(t, target, openCache(t, dir, 0, 0))
			status, body := fetchVia(t, c, "http://"+target+pkgTarball)
			tp.stop(t)
			if n := reg.late.Load(); n != 0 {
				t.Errorf("the packument was answered %d times before the tarball was asked for (after %v)", n, waitLimit)
			}
			if n := reg.count("GET /pkg") - reg.count("GET /pkg/"); n != 1 {
				t.Errorf("the packument was asked for %d times, want once", n)
			}
			if n := reg.count("GET " + pkgTarball); n != 1 {
				t.Errorf("the tarball was asked for %d times, want once", n)
			}
			if tamper {
				if status != http.StatusBadGateway || !strings.Contains(string(body), "integrity_mismatch") || bytes.Contains(body, []byte("evil")) {
					t.Errorf("tampered tarball: %d %.100q", status, body)
				}
				if got := blobs(t, dir); len(got) != 0 {
					t.Errorf("kept %v from a tampered tarball", got)
				}
				return
			}
			if status != http.StatusOK || !bytes.Equal(body, reg.tarballs["pkg"]["1.0.0"]) {
				t.Fatalf("tarball: %d", status)
			}
			if got := blobs(t, dir); len(got) != 1 {
				t.Errorf("kept %v, want the tarball", got)
			}
			if diff := cmp.Diff(&validation.EgressCache{Misses: 1}, tp.Report().Cache); diff != "" {
				t.Errorf("cache record (-want +got):\n%s", diff)
			}
		})
	}
}

// When the packument, looked up beside the tarball, names a blob the
// cache keeps (here one another registry served with the same bytes),
// the kept one is served and the registry's request is dropped.
func TestCacheDropsEarlyTarballWhenKept(t *testing.T) {
	first := newStandin()
	second := newGatedStandin()
	second.holdTarballs = true
	a, b := serveStandin(t, first), serveGated(t, second)
	cache := openCache(t, t.TempDir(), 0, 0)
	ca := testCA(t)
	tp := terminating(t, a+","+b, ca, nil, cache, nil)
	c := proxyClient(t, tp, ca.Pool())
	if status, _ := fetchVia(t, c, "http://"+a+pkgTarball); status != http.StatusOK {
		t.Fatalf("first registry: %d", status)
	}
	status, body := fetchVia(t, c, "http://"+b+pkgTarball)
	if status != http.StatusOK || !bytes.Equal(body, first.tarballs["pkg"]["1.0.0"]) {
		t.Fatalf("second registry: %d", status)
	}
	select {
	case <-second.dropped:
	case <-time.After(waitLimit):
		t.Fatal("the early tarball request was not dropped")
	}
	tp.stop(t)
	if n := second.late.Load(); n != 0 {
		t.Errorf("the packument was answered %d times before the tarball was asked for", n)
	}
	if diff := cmp.Diff(&validation.EgressCache{Hits: 1, Misses: 1, BytesServed: int64(len(body))}, tp.Report().Cache); diff != "" {
		t.Errorf("cache record (-want +got):\n%s", diff)
	}
}

// A kept packument, fresh or not, answers the look-up (or has it
// revalidated) and the tarball is then likely kept: no tarball request
// goes out beside it.
func TestCacheNoEarlyTarballWithKeptPackument(t *testing.T) {
	reg := newStandin()
	target := serveStandin(t, reg)
	// Metadata revalidated every time: the kept packument is never
	// fresh.
	cache := openCache(t, t.TempDir(), 0, -1)
	for i := range 2 {
		tp, c := run(t, target, cache)
		if status, body := fetchVia(t, c, "http://"+target+pkgTarball); status != http.StatusOK || !bytes.Equal(body, reg.tarballs["pkg"]["1.0.0"]) {
			t.Fatalf("run %d: %d", i, status)
		}
		tp.stop(t)
	}
	if n := reg.count("GET " + pkgTarball); n != 1 {
		t.Errorf("the registry was asked for the tarball %d times, want once", n)
	}
	if n := reg.count("GET /pkg") - reg.count("GET /pkg/"); n != 2 {
		t.Errorf("the packument was asked for %d times, want twice (revalidated)", n)
	}
}
