package local

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// The sandbox side of the install step's network: the bridge binary and
// the proxy's socket directory are mounted here, and the bridge listens
// on egress.SandboxProxyAddr.
const (
	SandboxBridgePath = "/run/gilf/egress-bridge"
	SandboxSocketDir  = "/run/gilf/egress"
	SandboxSocketPath = SandboxSocketDir + "/" + proxySocketName
	proxySocketName   = "proxy.sock"
)

// DefaultRegistry is the npm registry npm itself uses when nothing is
// configured: the install step's allow-list when EgressOptions gives none.
const DefaultRegistry = "https://registry.npmjs.org/"

// InstallMaxConns bounds the connections one install step's proxy serves
// at once: well above what package managers open (npm 15 sockets, pnpm
// 16, yarn classic one per package in flight, bun up to 64 requests at
// once, each a short loopback hop now that the proxy keeps the upstream
// connections), so a normal install never meets it; and low enough that
// a step that hands over sockets and plays with their blocking mode pins
// a bounded number of worker threads (at most two per connection, see
// egress's watchdog). Past it a connection is throttled, and recorded so.
const InstallMaxConns = 256

// EgressOptions configure the install step's only way out: gilf's forward
// proxy on the host, reached from the sandbox's own network namespace
// through a unix socket and the bridge. Script steps never get it.
type EgressOptions struct {
	// AllowHosts are the destinations the proxy permits; nil means the
	// host of DefaultRegistry. An empty, non-nil list permits nothing.
	AllowHosts []egress.Rule
	// Registries are the worker's registry settings (npm's "registry" and
	// "@scope:registry" keys, values are URLs) written into the
	// sandbox's own user .npmrc, so the install asks the registry the
	// worker is configured for; a repository's .npmrc still wins, and the
	// proxy still decides. Keys must be "registry" or "@scope:registry".
	Registries map[string]string
	// BridgeBinary is a host binary that runs egress.BridgeMain when its
	// first argument is egress.BridgeArg (the gilf binary); empty means
	// this process's own executable.
	BridgeBinary string
	// Tunnels are destinations the proxy passes through as opaque TLS
	// tunnels even when it terminates TLS (a git host over TLS for git
	// dependencies); they are permitted like AllowHosts and recorded as
	// tunnels.
	Tunnels []egress.Rule
	// CA, when set, is the worker's CA: the proxy terminates the TLS of
	// the registries with it (so only GET and HEAD leave, and the cache
	// serves them), and the sandbox's CA bundle holds it after
	// Options.CAFile. Nil passes TLS through opaque.
	CA *egress.CA
	// Cache is the worker's shared verifying registry cache; nil caches
	// nothing.
	Cache *egress.Cache
	// Credentials are added by the proxy to requests to a registry, by
	// "host:port" (egress.ReadCredentials); the sandbox never holds them.
	Credentials map[string]string
	// RootCAs verify the registries' certificates; nil means the
	// worker's system roots.
	RootCAs *x509.CertPool
	// Resolve and Dial replace the proxy's resolver and dialer (tests).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// newUpstreams is the executor's one pool of registry connections, shared
// by every install step's proxy.
func (o EgressOptions) newUpstreams() (*egress.Upstreams, error) {
	rules := slices.Clone(o.AllowHosts)
	for _, r := range o.Tunnels {
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	up, err := egress.NewUpstreams(egress.UpstreamConfig{
		Rules: rules, Resolve: o.Resolve, Dial: o.Dial, RootCAs: o.RootCAs, Credentials: o.Credentials,
	})
	if err != nil {
		return nil, fmt.Errorf("egress upstreams: %w", err)
	}
	return up, nil
}

// proxyEnv is what an install step is told about its proxy: every
// spelling the package managers read. NO_PROXY is empty: nothing bypasses
// it (nothing could).
func proxyEnv() map[string]string {
	u := "http://" + egress.SandboxProxyAddr
	env := map[string]string{}
	for _, k := range []string{
		"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
		"npm_config_proxy", "npm_config_https_proxy",
		"YARN_HTTP_PROXY", "YARN_HTTPS_PROXY",
	} {
		env[k] = u
	}
	for _, k := range []string{"NO_PROXY", "no_proxy", "npm_config_noproxy"} {
		env[k] = ""
	}
	return env
}

// stepProxy is the proxy of one install step, serving on a unix socket in
// the run directory that is bound into the sandbox.
type stepProxy struct {
	proxy    *egress.Proxy
	listener net.Listener
	dir      string
	bridge   string // host path of the bridge binary, which bwrap copies in
	served   chan error
	allow    []string
	closed   sync.Once
	// dirFD is the socket directory, through which the socket was bound
	// (and is unlinked at close); held until stop.
	dirFD *os.File
}

// startProxy makes the socket directory and serves the proxy on it. The
// directory is on the run's own file system, the worker's and mode 0711
// (bound read-only besides): the step can reach the socket, which is its
// uid's, and write nothing there.
func (s *sandbox) startProxy(log *slog.Logger) (*stepProxy, error) {
	dir := filepath.Join(s.dirs.Base, "egress")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("egress socket dir: %w", err)
	}
	if err := mkdirOwned(dir, 0o711, -1, -1); err != nil {
		return nil, fmt.Errorf("egress socket dir: %w", err)
	}
	bridge, err := s.opts.Egress.bridgeBinary()
	if err != nil {
		return nil, err
	}
	rules := s.opts.Egress.AllowHosts
	p, err := egress.New(egress.Config{
		Rules:     rules,
		Tunnels:   s.opts.Egress.Tunnels,
		CA:        s.opts.Egress.CA,
		Cache:     s.opts.Egress.Cache,
		Upstreams: s.up,
		Resolve:   s.opts.Egress.Resolve,
		Dial:      s.opts.Egress.Dial,
		MaxConns:  InstallMaxConns,
		Log:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	// The socket is bound through a descriptor of its directory: the
	// name a unix socket was bound with is what getpeername tells every
	// client, and a client in the sandbox must learn no host path.
	dirFD, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress socket dir: %w", err)
	}
	sock := filepath.Join(dir, proxySocketName)
	l, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", dirFD.Fd(), proxySocketName))
	if err != nil {
		dirFD.Close()
		return nil, fmt.Errorf("egress proxy socket: %w", err)
	}
	if err := errors.Join(os.Chown(sock, int(s.opts.SandboxUID), int(s.opts.SandboxGID)), os.Chmod(sock, 0o600)); err != nil {
		l.Close()
		dirFD.Close()
		return nil, fmt.Errorf("egress proxy socket: %w", err)
	}
	sp := &stepProxy{proxy: p, listener: l, dir: dir, dirFD: dirFD, bridge: bridge, served: make(chan error, 1)}
	// The package manager's own cache, seeded from the verifying cache,
	// spares it the requests the proxy would answer from it (see
	// seedInstallCache).
	n, size, err := seedInstallCache(s.manager, s.opts.Egress.Cache, s.dirs, int(s.opts.SandboxUID), int(s.opts.SandboxGID), MaxSeedBytes)
	if err != nil {
		log.Info("package manager cache not seeded", logkey.Manager, string(s.manager), logkey.Err, err.Error())
	}
	p.Seeded(n, size)
	for _, r := range rules {
		sp.allow = append(sp.allow, r.String())
	}
	for _, r := range s.opts.Egress.Tunnels {
		sp.allow = append(sp.allow, r.String()+" (tunnel)")
	}
	go func() { sp.served <- p.Serve(l) }()
	return sp, nil
}

// stop closes the proxy (and every tunnel still open) and returns what it
// saw. Safe to call twice; the second call returns an empty record.
func (sp *stepProxy) stop() (*validation.Egress, error) {
	var rec *validation.Egress
	var err error
	sp.closed.Do(func() {
		cerr := sp.proxy.Close()
		serr := <-sp.served
		rep := sp.proxy.Report()
		rec = &validation.Egress{
			Network:       validation.NetworkRegistry,
			Enforcement:   validation.EnforcedByWorker,
			AllowList:     sp.allow,
			Allowed:       rep.Allowed,
			Denied:        rep.Denied,
			DeniedOmitted: rep.DeniedOmitted,
			Throttled:     rep.Throttled,
			Cache:         rep.Cache,
			Observed:      true,
		}
		if rep.AllowedOmitted > 0 {
			rec.Observed = false
		}
		err = errors.Join(cerr, serr, sp.dirFD.Close(), os.RemoveAll(sp.dir))
		if err != nil {
			err = fmt.Errorf("egress proxy: %w", err)
		}
	})
	return rec, err
}

// noNetwork is the record of a sandboxed step with no network at all.
func noNetwork() *validation.Egress {
	return &validation.Egress{Network: validation.NetworkNone, Enforcement: validation.EnforcedByKernel, Observed: true}
}

// hostNetwork is the record of a tier-none step: no namespace at all.
func hostNetwork() *validation.Egress {
	return &validation.Egress{Network: validation.NetworkHost, Enforcement: validation.EnforcedNone}
}

// userNpmrc is the sandbox's own ~/.npmrc: the worker's registry settings
// and nothing else (never a credential). Empty when there are none.
func userNpmrc(reg map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(reg)) {
		b.WriteString(k + "=" + reg[k] + "\n")
	}
	return b.String()
}

// userYarnrc is the sandbox's own ~/.yarnrc.yml, for Yarn 2+ (which reads
// no .npmrc): the worker's registry settings, http registries allowed by
// host (Yarn refuses them otherwise; the proxy still decides), telemetry
// off. A repository's own .yarnrc.yml still wins. Empty when there are no
// registry settings.
func userYarnrc(reg map[string]string) string {
	if len(reg) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("enableTelemetry: false\n")
	var httpHosts []string
	addHost := func(u string) {
		if rest, ok := strings.CutPrefix(u, "http://"); ok {
			host, _, _ := strings.Cut(rest, "/")
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if !slices.Contains(httpHosts, host) {
				httpHosts = append(httpHosts, host)
			}
		}
	}
	if u, ok := reg["registry"]; ok {
		b.WriteString("npmRegistryServer: " + strconv.Quote(strings.TrimSuffix(u, "/")) + "\n")
		addHost(u)
	}
	var scopes []string
	for _, k := range slices.Sorted(maps.Keys(reg)) {
		if scope, ok := strings.CutSuffix(k, ":registry"); ok && strings.HasPrefix(scope, "@") {
			scopes = append(scopes, "  "+strconv.Quote(scope[1:])+":\n    npmRegistryServer: "+strconv.Quote(strings.TrimSuffix(reg[k], "/"))+"\n")
			addHost(reg[k])
		}
	}
	if len(scopes) > 0 {
		b.WriteString("npmScopes:\n" + strings.Join(scopes, ""))
	}
	if len(httpHosts) > 0 {
		b.WriteString("unsafeHttpWhitelist:\n")
		for _, h := range httpHosts {
			b.WriteString("  - " + strconv.Quote(h) + "\n")
		}
	}
	return b.String()
}

// validRegistries checks EgressOptions.Registries: only registry keys,
// only http(s) URLs, nothing that could smuggle another setting in.
func validRegistries(reg map[string]string) error {
	var errs []error
	for k, v := range reg {
		okKey := k == "registry" || (strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry") && len(k) > len("@:registry") && !strings.ContainsAny(k, " \t\r\n=/"))
		if !okKey {
			errs = append(errs, fmt.Errorf("Egress.Registries: key %q is not registry or @scope:registry", k))
		}
		if _, err := egress.RuleFromURL(v); err != nil || strings.ContainsAny(v, " \t\r\n") {
			errs = append(errs, fmt.Errorf("Egress.Registries: %s=%q is not a registry URL", k, v))
		}
	}
	return errors.Join(errs...)
}

// bridgeBinary returns the host path of the bridge binary.
func (o EgressOptions) bridgeBinary() (string, error) {
	if o.BridgeBinary != "" {
		return o.BridgeBinary, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("egress bridge binary: %w", err)
	}
	return p, nil
}

// admitEgress refuses with validation.CodeEgressUnknown a plan whose
// install step asks for the registry when the bridge binary, the only
// way to the proxy, cannot be found on the worker.
func (e *Executor) admitEgress(plan validation.Plan) *validation.Refusal {
	for _, st := range plan.Steps {
		if st.Inconclusive != "" || stepNetwork(st) != validation.NetworkRegistry {
			continue
		}
		bin, err := e.opts.Egress.bridgeBinary()
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(bin); err == nil && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
				err = errors.New("not an executable file")
			}
		}
		if err != nil {
			return validation.Refuse(validation.CodeEgressUnknown,
				"the %s step's network cannot be set up: the egress bridge is not available on this worker", st.Name)
		}
	}
	return nil
}
