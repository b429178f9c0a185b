package egress

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// standin is an npm registry on loopback speaking the registry's wire
// format: packuments (abbreviated or whole) whose versions publish
// dist.integrity, tarballs at <name>/-/<base>-<version>.tgz, ETags and
// 304s. It accepts any other method as a registry accepting a publish
// would, so a test can see whether one reached it. tamper makes it serve
// tarball bytes that do not match what it publishes.
type standin struct {
	tarballs map[string]map[string][]byte // name → version → bytes
	tamper   atomic.Bool
	// token, when set, is the bearer token every request must carry.
	token string

	mu       sync.Mutex
	requests []string // "METHOD path"
	auths    []string // the Authorization fields seen
	protos   []string // the protocol of each request
}

// newStandin is a registry of pkg (two versions) and @scope/lib.
func newStandin() *standin {
	tb := func(s string) []byte { return []byte(strings.Repeat(s, 2000)) }
	return &standin{tarballs: map[string]map[string][]byte{
		"pkg":        {"1.0.0": tb("pkg one;"), "1.1.0": tb("pkg one dot one;")},
		"@scope/lib": {"2.0.0": tb("scoped lib;")},
	}}
}

func (s *standin) integrity(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

func (s *standin) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (s *standin) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *standin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.auths = append(s.auths, r.Header.Get("Authorization"))
	s.protos = append(s.protos, r.Proto)
	s.mu.Unlock()
	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"ok":"stored"}`)
		return
	}
	if ref, ok := parseTarballPath(r.URL.Path); ok {
		b, ok := s.tarballs[ref.name][ref.version]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if s.tamper.Load() {
			b = append([]byte("evil"), b[4:]...)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/")
	versions, ok := s.tarballs[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	base := "http://" + r.Host
	if r.TLS != nil {
		base = "https://" + r.Host
	}
	doc := map[string]any{"name": name}
	vs := map[string]any{}
	for v, b := range versions {
		vs[v] = map[string]any{"name": name, "version": v, "dist": map[string]any{
			"integrity": s.integrity(b),
			"tarball":   base + "/" + name + "/-/" + name[strings.LastIndex(name, "/")+1:] + "-" + v + ".tgz",
		}}
	}
	doc["versions"] = vs
	body, _ := json.Marshal(doc)
	sum := sha256.Sum256(body)
	etag := fmt.Sprintf(`"%x"`, sum[:8])
	w.Header().Set("Etag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/vnd.npm.install-v1+json") {
		w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		// As the npm registry answers a package manager.
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		gz.Write(body)
		gz.Close()
		return
	}
	w.Write(body)
}

// serveStandin serves s on 127.0.0.1 over plain HTTP and returns its
// host:port.
func serveStandin(t testing.TB, s *standin) string {
	t.Helper()
	_, port := httpUpstream(t, "127.0.0.1", s, nil)
	return "127.0.0.1:" + strconv.Itoa(port)
}

// serveStandinTLS serves s on 127.0.0.1 over TLS (HTTP/2 offered) and
// returns its host:port and the roots that verify it.
func serveStandinTLS(t testing.TB, s *standin) (string, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv.Listener.Addr().String(), roots
}

// proxyClient is an HTTP client whose every request goes through tp (its
// proxy setting names tp; its dials reach tp's socket), trusting roots.
func proxyClient(t testing.TB, tp *testProxy, roots *x509.CertPool) *http.Client {
	t.Helper()
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "gilf-proxy.test:3128"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", tp.socket)
		},
		DisableCompression: true,
	}
	tr.TLSClientConfig = tlsClientConfig(roots)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// fetchVia fetches u through c and returns the status and body.
func fetchVia(t testing.TB, c *http.Client, u string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp.StatusCode, b
}
