package egress

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// openCache opens a cache in dir or fails the test.
func openCache(t testing.TB, dir string, max int64, ttl time.Duration) *Cache {
	t.Helper()
	c, err := OpenCache(CacheConfig{Dir: dir, MaxBytes: max, MetadataTTL: ttl, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// blobs lists the tarballs kept in a cache directory.
func blobs(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, cacheBlobDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// run is one step's proxy over the shared cache, serving plain HTTP to
// the stand-in at target, or TLS when roots verify it.
func run(t testing.TB, target string, cache *Cache) (*testProxy, *http.Client) {
	t.Helper()
	ca := testCA(t)
	tp := terminating(t, target, ca, nil, cache, nil)
	return tp, proxyClient(t, tp, ca.Pool())
}

const (
	pkgTarball    = "/pkg/-/pkg-1.0.0.tgz"
	pkg11Tarball  = "/pkg/-/pkg-1.1.0.tgz"
	scopedTarball = "/@scope/lib/-/lib-2.0.0.tgz"
)

// A tarball is served from the cache to a later run only after it was
// checked against the integrity its packument publishes; the later run
// asks the registry for nothing (the packument is fresh), and each
// step's record counts its hits, misses and bytes.
func TestCacheServesVerifiedTarballs(t *testing.T) {
	reg := newStandin()
	target := serveStandin(t, reg)
	dir := t.TempDir()
	cache := openCache(t, dir, 0, 0)
	base := "http://" + target
	tp1, c1 := run(t, target, cache)
	for _, p := range []string{pkgTarball, scopedTarball} {
		status, body := fetchVia(t, c1, base+p)
		ref, _ := parseTarballPath(p)
		if status != http.StatusOK || !bytes.Equal(body, reg.tarballs[ref.name][ref.version]) {
			t.Fatalf("first run %s: %d", p, status)
		}
	}
	tp1.stop(t)
	if diff := cmp.Diff(&validation.EgressCache{Misses: 2}, tp1.Report().Cache); diff != "" {
		t.Errorf("first run's cache record (-want +got):\n%s", diff)
	}
	if n := len(blobs(t, dir)); n != 2 {
		t.Errorf("%d tarballs kept, want 2", n)
	}
	seen := len(reg.seen())
	tp2, c2 := run(t, target, cache)
	var served int64
	for _, p := range []string{pkgTarball, scopedTarball} {
		status, body := fetchVia(t, c2, base+p)
		ref, _ := parseTarballPath(p)
		if status != http.StatusOK || !bytes.Equal(body, reg.tarballs[ref.name][ref.version]) {
			t.Fatalf("second run %s: %d", p, status)
		}
		served += int64(len(body))
	}
	tp2.stop(t)
	if got := reg.seen()[seen:]; len(got) != 0 {
		t.Errorf("the second run asked the registry for %v", got)
	}
	if diff := cmp.Diff(&validation.EgressCache{Hits: 2, BytesServed: served}, tp2.Report().Cache); diff != "" {
		t.Errorf("second run's cache record (-want +got):\n%s", diff)
	}
	if st := cache.Stats(); st.Hits != 2 || st.Misses != 2 || st.BytesServed != served {
		t.Errorf("cache totals %+v", st)
	}
}

// The integrity of a tarball comes from the packument the client itself
// just asked for, kept by the proxy in the variant it was asked in
// (abbreviated or whole, gzip or not; a scope's slash escaped either
// way): the registry is asked for each packument once, not again in
// another variant before the tarball. A stale kept packument is not used.
func TestCacheIntegrityFromTheClientsPackument(t *testing.T) {
	for _, tc := range []struct {
		name, packument, tarball string
		header                   []string
	}{
		{"abbreviated gzip", "/pkg", pkgTarball, []string{"Accept", corgiAccept, "Accept-Encoding", "gzip"}},
		{"whole identity", "/pkg", pkgTarball, nil},
		{"scoped, upper-case escape", "/@scope%2Flib", scopedTarball, []string{"Accept", corgiAccept, "Accept-Encoding", "gzip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := newStandin()
			target := serveStandin(t, reg)
			base := "http://" + target
			tp, c := run(t, target, openCache(t, t.TempDir(), 0, time.Hour))
			if status, _ := fetchVia(t, c, base+tc.packument, tc.header...); status != http.StatusOK {
				t.Fatalf("packument: %d", status)
			}
			ref, _ := parseTarballPath(tc.tarball)
			if status, body := fetchVia(t, c, base+tc.tarball); status != http.StatusOK || !bytes.Equal(body, reg.tarballs[ref.name][ref.version]) {
				t.Fatalf("tarball: %d", status)
			}
			tp.stop(t)
			var asked []string
			for _, r := range reg.seen() {
				if !strings.Contains(r, "/-/") {
					asked = append(asked, r)
				}
			}
			if len(asked) != 1 {
				t.Errorf("the registry was asked for the packument %d times (%v), want once", len(asked), asked)
			}
			if rc := tp.Report().Cache; rc == nil || rc.Misses != 2 {
				t.Errorf("cache record %+v, want the packument and the tarball as misses", rc)
			}
		})
	}
	t.Run("stale", func(t *testing.T) {
		reg := newStandin()
		target := serveStandin(t, reg)
		base := "http://" + target
		tp, c := run(t, target, openCache(t, t.TempDir(), 0, -1))
		fetchVia(t, c, base+"/pkg", "Accept", corgiAccept, "Accept-Encoding", "gzip")
		if status, _ := fetchVia(t, c, base+pkgTarball); status != http.StatusOK {
			t.Fatalf("tarball: %d", status)
		}
		tp.stop(t)
		if n := reg.count("GET /pkg") - reg.count("GET /pkg/"); n != 2 {
			t.Errorf("the registry was asked for the packument %d times, want twice (the kept one revalidates every time)", n)
		}
	})
}

// A registry that serves bytes that do not match its published integrity
// gets nothing stored and nothing served: the request fails as the
// registry's fault (502 integrity_mismatch), every time, until it serves
// the right bytes.
func TestCacheRefusesTamperedTarball(t *testing.T) {
	reg := newStandin()
	reg.tamper.Store(true)
	target := serveStandin(t, reg)
	dir := t.TempDir()
	cache := openCache(t, dir, 0, 0)
	for i := range 2 {
		tp, c := run(t, target, cache)
		status, body := fetchVia(t, c, "http://"+target+pkgTarball)
		if status != http.StatusBadGateway || !strings.Contains(string(body), "integrity_mismatch") || bytes.Contains(body, []byte("evil")) {
			t.Fatalf("tampered tarball, run %d: %d %.100q", i, status, body)
		}
		tp.stop(t)
		want := []validation.EgressDenial{{Host: "127.0.0.1", Port: tp.Report().Denied[0].Port, Reason: "integrity_mismatch", Count: 1}}
		if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
			t.Errorf("denied (-want +got):\n%s", diff)
		}
		if got := blobs(t, dir); len(got) != 0 {
			t.Fatalf("kept %v from a tampered tarball", got)
		}
	}
	if n := reg.count("GET " + pkgTarball); n != 2 {
		t.Errorf("the registry was asked %d times for the tarball, want 2 (nothing served from the cache)", n)
	}
	reg.tamper.Store(false)
	_, c := run(t, target, cache)
	if status, body := fetchVia(t, c, "http://"+target+pkgTarball); status != http.StatusOK || !bytes.Equal(body, reg.tarballs["pkg"]["1.0.0"]) {
		t.Fatalf("honest tarball: %d", status)
	}
	if got := blobs(t, dir); len(got) != 1 {
		t.Errorf("kept %v, want the honest tarball", got)
	}
}

// The cache survives a restart: a new Cache on the same directory serves
// what the old one kept.
func TestCacheSurvivesRestart(t *testing.T) {
	reg := newStandin()
	target := serveStandin(t, reg)
	dir := t.TempDir()
	tp, c := run(t, target, openCache(t, dir, 0, 0))
	fetchVia(t, c, "http://"+target+pkgTarball)
	tp.stop(t)
	again := openCache(t, dir, 0, 0)
	if st := again.Stats(); st.Entries < 2 || st.Bytes < int64(len(reg.tarballs["pkg"]["1.0.0"])) {
		t.Fatalf("reopened cache holds %+v", st)
	}
	tp, c = run(t, target, again)
	if status, body := fetchVia(t, c, "http://"+target+pkgTarball); status != http.StatusOK || !bytes.Equal(body, reg.tarballs["pkg"]["1.0.0"]) {
		t.Fatalf("after restart: %d", status)
	}
	tp.stop(t)
	if n := reg.count("GET " + pkgTarball); n != 1 {
		t.Errorf("the registry was asked %d times for the tarball, want 1", n)
	}
	if rc := tp.Report().Cache; rc == nil || rc.Hits != 1 {
		t.Errorf("after restart: %+v", rc)
	}
}

// The cache holds at most MaxBytes: past it the entries used longest ago
// go first; a tarball larger than the whole bound is served, not kept.
func TestCacheBound(t *testing.T) {
	reg := newStandin()
	target := serveStandin(t, reg)
	one, onePlus := len(reg.tarballs["pkg"]["1.0.0"]), len(reg.tarballs["pkg"]["1.1.0"])
	// Room for the two pkg tarballs and their packument, not the
	// scoped one as well.
	max := int64(one + onePlus + 2048)
	dir := t.TempDir()
	cache := openCache(t, dir, max, 0)
	_, c := run(t, target, cache)
	for _, p := range []string{pkgTarball, pkg11Tarball} {
		if status, _ := fetchVia(t, c, "http://"+target+p); status != http.StatusOK {
			t.Fatalf("%s: %d", p, status)
		}
	}
	if n := len(blobs(t, dir)); n != 2 {
		t.Fatalf("%d tarballs kept within the bound, want 2", n)
	}
	// 1.0.0 is used again: 1.1.0 is now the least recently used.
	fetchVia(t, c, "http://"+target+pkgTarball)
	fetchVia(t, c, "http://"+target+scopedTarball)
	if st := cache.Stats(); st.Bytes > max {
		t.Errorf("cache holds %d bytes, over its bound of %d", st.Bytes, max)
	}
	before := reg.count("GET " + pkg11Tarball)
	fetchVia(t, c, "http://"+target+pkgTarball)
	fetchVia(t, c, "http://"+target+pkg11Tarball)
	if reg.count("GET "+pkgTarball) != 1 {
		t.Error("the recently used tarball was evicted")
	}
	if reg.count("GET "+pkg11Tarball) != before+1 {
		t.Error("the least recently used tarball was not evicted")
	}

	small := openCache(t, t.TempDir(), int64(one-1), 0)
	_, c = run(t, target, small)
	if status, body := fetchVia(t, c, "http://"+target+pkgTarball); status != http.StatusOK || len(body) != one {
		t.Fatalf("over the bound: %d", status)
	}
	if st := small.Stats(); st.Bytes > int64(one-1) {
		t.Errorf("a tarball over the bound was kept: %+v", st)
	}
}

// Two runs at once share the cache: every answer is right, and a third
// run is served wholly from it.
func TestCacheSharedByConcurrentRuns(t *testing.T) {
	reg := newStandin()
	target := serveStandin(t, reg)
	cache := openCache(t, t.TempDir(), 0, 0)
	paths := []string{pkgTarball, pkg11Tarball, scopedTarball}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for range 2 {
		_, c := run(t, target, cache)
		wg.Go(func() {
			for range 4 {
				for _, p := range paths {
					status, body := fetchVia(t, c, "http://"+target+p)
					ref, _ := parseTarballPath(p)
					if status != http.StatusOK || !bytes.Equal(body, reg.tarballs[ref.name][ref.version]) {
						errs <- p
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for p := range errs {
		t.Errorf("wrong answer for %s", p)
	}
	seen := len(reg.seen())
	tp, c := run(t, target, cache)
	for _, p := range paths {
		fetchVia(t, c, "http://"+target+p)
	}
	tp.stop(t)
	if got := reg.seen()[seen:]; len(got) != 0 {
		t.Errorf("a third run asked the registry for %v", got)
	}
	if rc := tp.Report().Cache; rc == nil || rc.Hits != 3 || rc.Misses != 0 {
		t.Errorf("third run: %+v", rc)
	}
}

// Metadata is served from the cache within MetadataTTL; past it, it is
// revalidated with its ETag, and a 304 serves the kept document.
func TestCacheMetadataTTL(t *testing.T) {
	reg := newStandin()
	target := serveStandin(t, reg)
	for _, tc := range []struct {
		name      string
		ttl       time.Duration
		wantAsked int
	}{
		{"fresh", time.Hour, 1},
		{"revalidated", -1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := openCache(t, t.TempDir(), 0, tc.ttl)
			before := reg.count("GET /pkg")
			var first []byte
			for i := range 3 {
				tp, c := run(t, target, cache)
				status, body := fetchVia(t, c, "http://"+target+"/pkg", "Accept", corgiAccept)
				if status != http.StatusOK || (first != nil && !bytes.Equal(body, first)) {
					t.Fatalf("request %d: %d", i, status)
				}
				first = body
				tp.stop(t)
				if i > 0 {
					if rc := tp.Report().Cache; rc == nil || rc.Hits != 1 {
						t.Errorf("request %d: %+v, want a hit", i, rc)
					}
				}
			}
			if got := reg.count("GET /pkg") - before - reg.count("GET /pkg/"); got != tc.wantAsked {
				t.Errorf("the registry was asked %d times, want %d", got, tc.wantAsked)
			}
		})
	}
}

// Through a terminated TLS connection to an HTTP/2 registry, the cache
// serves the second run.
func TestCacheThroughTLS(t *testing.T) {
	reg := newStandin()
	target, roots := serveStandinTLS(t, reg)
	cache := openCache(t, t.TempDir(), 0, 0)
	for i := range 2 {
		ca := testCA(t)
		tp := terminating(t, target, ca, roots, cache, nil)
		c := proxyClient(t, tp, ca.Pool())
		if status, body := fetchVia(t, c, "https://"+target+scopedTarball); status != http.StatusOK || !bytes.Equal(body, reg.tarballs["@scope/lib"]["2.0.0"]) {
			t.Fatalf("run %d: %d", i, status)
		}
		tp.stop(t)
		if rc := tp.Report().Cache; rc == nil || rc.Hits != i {
			t.Errorf("run %d: %+v", i, rc)
		}
	}
	if n := reg.count("GET " + scopedTarball); n != 1 {
		t.Errorf("the registry was asked %d times for the tarball", n)
	}
	// The pool speaks HTTP/2 to a registry that offers it.
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for i, p := range reg.protos {
		if p != "HTTP/2.0" {
			t.Errorf("request %s came over %s", reg.requests[i], p)
		}
	}
}
