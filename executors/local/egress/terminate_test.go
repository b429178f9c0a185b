package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func tlsClientConfig(roots *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// testCA is a worker CA made in a fresh directory.
func testCA(t testing.TB) *CA {
	t.Helper()
	ca, err := LoadOrCreateCA(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// terminating serves a proxy that terminates TLS with ca for the rules,
// its pool verifying upstreams with roots; cache may be nil.
func terminating(t testing.TB, allow string, ca *CA, roots *x509.CertPool, cache *Cache, creds map[string]string) *testProxy {
	t.Helper()
	rec := newRecorder(t, nil)
	up, err := NewUpstreams(UpstreamConfig{Rules: rules(t, allow), Resolve: rec.resolve, Dial: rec.dial, OwnAddrs: []netip.Addr{}, RootCAs: roots, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	return startProxy(t, Config{Rules: rules(t, allow), CA: ca, Upstreams: up, Cache: cache}, rec)
}

// Inside a terminated TLS connection, and over plain HTTP, only GET and
// HEAD without a body reach the registry: a publish (PUT), POST, DELETE,
// PATCH or a GET with a body is answered 405 and recorded, and the
// registry sees nothing of it.
func TestOnlyGetAndHeadLeave(t *testing.T) {
	for _, scheme := range []string{"https", "http"} {
		t.Run(scheme, func(t *testing.T) {
			reg := newStandin()
			var target string
			var roots *x509.CertPool
			if scheme == "https" {
				target, roots = serveStandinTLS(t, reg)
			} else {
				target = serveStandin(t, reg)
			}
			ca := testCA(t)
			tp := terminating(t, target, ca, roots, nil, nil)
			c := proxyClient(t, tp, ca.Pool())
			base := scheme + "://" + target
			if status, body := fetchVia(t, c, base+"/pkg"); status != http.StatusOK || !strings.Contains(string(body), `"1.1.0"`) {
				t.Fatalf("GET: %d %.80q", status, body)
			}
			resp, err := c.Head(base + "/pkg")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("HEAD: %v %v", resp, err)
			}
			for _, m := range []string{http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodPatch, http.MethodGet} {
				req, err := http.NewRequest(m, base+"/pkg", strings.NewReader(`{"_attachments":{"secret":"source code"}}`))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", m, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(b), "method_not_allowed") {
					t.Errorf("%s with a body: %d %q, want 405 method_not_allowed", m, resp.StatusCode, b)
				}
			}
			tp.stop(t)
			if diff := cmp.Diff([]string{"GET /pkg", "HEAD /pkg"}, reg.seen()); diff != "" {
				t.Errorf("the registry saw (-want +got):\n%s", diff)
			}
			host, port, _ := parseTarget(target, 0)
			want := []validation.EgressDenial{{Host: host, Port: port, Reason: "method_not_allowed", Count: 5}}
			if diff := cmp.Diff(want, tp.Report().Denied); diff != "" {
				t.Errorf("denied (-want +got):\n%s", diff)
			}
		})
	}
}

// npm publish, run for real against an allow-listed registry through
// the terminating proxy, delivers nothing: the PUT is refused inside TLS
// and recorded, and npm fails.
func TestNpmPublishIsRefused(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is a test tool (scripts/test --install-only): %v", err)
	}
	reg := newStandin()
	local, roots := serveStandinTLS(t, reg)
	// npm checks a name (its certificate covers example.com): the
	// test's network routes example.com's public address to the
	// stand-in.
	_, port, _ := parseTarget(local, 0)
	target := fmt.Sprintf("example.com:%d", port)
	ca := testCA(t)
	tp := routed(t, target, local, ca, roots)
	// npm speaks to a TCP proxy.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go tp.Serve(l)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	files := map[string]string{
		"pkg/package.json": `{"name":"exfil","version":"1.0.0","files":["secret.txt"]}`,
		"pkg/secret.txt":   "the private repository's source\n",
		"ca.pem":           string(ca.PEM()),
		"npmrc":            "//" + target + "/:_authToken=not-a-secret\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxyURL := "http://" + l.Addr().String()
	cmd := exec.CommandContext(ctx, npm, "publish", "--registry", "https://"+target+"/", "--userconfig", filepath.Join(dir, "npmrc"),
		"--fetch-retries=0", "--ignore-scripts", "--provenance=false")
	cmd.Dir = filepath.Join(dir, "pkg")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"npm_config_cache=" + filepath.Join(dir, "cache"),
		"HTTPS_PROXY=" + proxyURL, "https_proxy=" + proxyURL, "npm_config_https_proxy=" + proxyURL,
		"npm_config_cafile=" + caFile, "NO_PROXY=", "npm_config_update_notifier=false",
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("npm publish succeeded:\n%s", out)
	}
	tp.stop(t)
	for _, r := range reg.seen() {
		if !strings.HasPrefix(r, "GET ") && !strings.HasPrefix(r, "HEAD ") {
			t.Errorf("the registry received %s", r)
		}
	}
	var refused bool
	for _, d := range tp.Report().Denied {
		refused = refused || d.Reason == string(ReasonMethod)
	}
	if !refused {
		t.Errorf("no method_not_allowed recorded: %+v\nnpm:\n%s", tp.Report().Denied, out)
	}
}

// routed serves a terminating proxy for the name target (host:port),
// whose public address the test's dialer takes to local, a loopback
// address: how a test reaches a registry by name without leaving the
// host.
func routed(t testing.TB, target, local string, ca *CA, roots *x509.CertPool) *testProxy {
	t.Helper()
	host, _, _ := parseTarget(target, 0)
	rec := newRecorder(t, map[string][]netip.Addr{host: addrs("93.184.216.34")})
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !strings.HasPrefix(addr, "93.184.216.34:") {
			return nil, fmt.Errorf("test dialer: %s is not the routed address", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", local)
	}
	up, err := NewUpstreams(UpstreamConfig{Rules: rules(t, target), Resolve: rec.resolve, Dial: dial, OwnAddrs: []netip.Addr{}, RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	return startProxy(t, Config{Rules: rules(t, target), CA: ca, Upstreams: up, Dial: dial}, rec)
}

// A request inside a terminated connection must name the CONNECT's own
// authority: another Host is refused before anything leaves.
func TestTerminatedHostMustMatch(t *testing.T) {
	reg := newStandin()
	target, roots := serveStandinTLS(t, reg)
	ca := testCA(t)
	tp := terminating(t, target, ca, roots, nil, nil)
	c := tp.dial(t)
	if _, h := connect(t, c, target); h.status != http.StatusOK {
		t.Fatalf("CONNECT: %d", h.status)
	}
	tc := tls.Client(c, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with the proxy's certificate: %v", err)
	}
	fmt.Fprintf(tc, "GET /pkg HTTP/1.1\r\nHost: registry.example.com\r\n\r\n")
	h := readHead(t, bufio.NewReader(tc))
	if h.status != http.StatusBadRequest || !strings.Contains(h.body, "bad_request") {
		t.Errorf("another Host: %d %q", h.status, h.body)
	}
	if got := reg.seen(); len(got) != 0 {
		t.Errorf("the registry saw %v", got)
	}
}

// A host named as a tunnel stays opaque: the client's TLS reaches the
// host's own certificate, and the record says it was a tunnel.
func TestTunnelHostStaysOpaque(t *testing.T) {
	reg := newStandin()
	target, roots := serveStandinTLS(t, reg)
	ca := testCA(t)
	tp := startProxy(t, Config{Tunnels: rules(t, target), CA: ca}, nil)
	c := proxyClient(t, tp, roots) // trusts the host, not the worker's CA
	if status, _ := fetchVia(t, c, "https://"+target+"/pkg"); status != http.StatusOK {
		t.Fatalf("GET through the tunnel: %d", status)
	}
	tp.stop(t)
	rep := tp.Report()
	if len(rep.Allowed) != 1 || !rep.Allowed[0].Tunnel {
		t.Errorf("allowed %+v, want one tunnel", rep.Allowed)
	}
}

// The worker's CA is made once, its key 0600, and loaded again; a half
// CA is an error.
func TestCAKeptAndLoaded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key: %v %v", st, err)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.PEM()) != string(ca.PEM()) {
		t.Error("a second start made a new CA")
	}
	leaf, err := again.certFor("registry.npmjs.org")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "registry.npmjs.org"}); err != nil {
		t.Errorf("leaf does not verify against the CA: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, CACertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("half a CA: %v", err)
	}
}
