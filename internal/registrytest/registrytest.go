// Package registrytest runs a real npm registry (Verdaccio 6.8.0) on
// loopback for tests, serving a real dependency tree (express 4.21.2 and
// every package it installs, listed in packages.txt) that npm, pnpm and
// yarn classic install from.
//
// CI installs Verdaccio and the package tarballs into CacheDir, along with
// pnpm and yarn, in the install steps of the test script:
//
//	scripts/test --install-only
//
// Verdaccio is third-party software that may call home, so it runs in a
// new, empty network namespace with no uplinks: it can reach nothing, not
// even loopback. It listens on a unix socket in its own directory, which is
// reachable across namespaces through the filesystem, and a forwarder in the
// test process serves that socket at URL, a TCP address on 127.0.0.1.
// Creating the namespace needs root, as the tests run in CI.
//
// Start one Registry per test package, from TestMain or behind a sync.Once:
//
//	func TestMain(m *testing.M) {
//		dir, _ := os.MkdirTemp("", "registry")
//		reg, err := registrytest.Start(context.Background(), dir, os.Stderr)
//		...
//		code := m.Run()
//		reg.Close()
//		os.RemoveAll(dir)
//		os.Exit(code)
//	}
package registrytest

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/internal/logtail"
	"github.com/gilf-review/gilf/internal/ownthread"
)

// Install is how CI gets Verdaccio and the tarballs; it runs from the
// repository root.
const Install = "scripts/test --install-only"

// Version is the Verdaccio that Start runs.
const Version = "6.8.0"

// Server limits.
const (
	// ReadyTimeout bounds the wait for Verdaccio to answer, unless ctx
	// ends first.
	ReadyTimeout = 30 * time.Second
	// PublishTimeout bounds publishing every package once Verdaccio
	// answers (bun's build alone is a 40 MB tarball; on a loaded 2-core
	// machine with several registries starting at once, that takes a
	// while), unless ctx ends first.
	PublishTimeout = 5 * time.Minute
	// StopTimeout is how long Close waits after SIGTERM before SIGKILL.
	StopTimeout = 5 * time.Second
)

//go:embed packages.txt
var packagesTxt string

// toolsTxt lists the package managers published besides the tree.
//
//go:embed tools.txt
var toolsTxt string

// devtoolsTxt lists the development tools published with the package
// managers.
//
//go:embed devtools.txt
var devtoolsTxt string

// CacheDir returns the cache directory scripts/test fills:
// os.UserCacheDir()/gilf-test, holding verdaccio/ and tarballs/.
func CacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("user cache dir: %w", err)
	}
	return filepath.Join(dir, "gilf-test"), nil
}

// Root is the name@version of the tree's root package (the first line of
// packages.txt), what a test repository depends on.
func Root() string {
	specs, err := parseSpecs(packagesTxt)
	if err != nil {
		panic(err) // packages.txt is embedded; its test keeps it valid
	}
	return specs[0].String()
}

// Registry is a running Verdaccio.
type Registry struct {
	// URL is the registry's base URL, "http://127.0.0.1:PORT/". The tarball
	// URLs of every packument it serves start with it.
	URL string

	pid      int // Verdaccio's, and its process group's id
	exited   chan struct{}
	waitErr  error // Verdaccio's exit, once exited is closed
	fwd      *forwarder
	client   *http.Client // to the unix socket, bypassing the forwarder
	tail     *logtail.Buffer
	packages []string
	tools    []string
	devtools []string

	// Token is the bearer token a private registry (StartPrivate)
	// requires on every request; "" for an open one.
	Token   string
	private bool

	closeOnce sync.Once
	closeErr  error
}

// Start starts Verdaccio in its own empty network namespace under dir (a
// fresh directory for its storage, config and socket), starts the loopback
// forwarder, waits until Verdaccio answers, and publishes every package of
// packages.txt from the tarballs in CacheDir. Verdaccio's output goes to
// log. ctx bounds the start, not the server's life: Close ends that.
//
// A missing Verdaccio or tarball is an error naming Install: CI installs
// them, so their absence is a broken setup, never a reason to skip.
func Start(ctx context.Context, dir string, log io.Writer) (*Registry, error) {
	return startRegistry(ctx, dir, log, false, false)
}

// StartWithTools is Start that also publishes the package managers of
// tools.txt (Registry.Tools), for tests that prepare them as a worker
// does.
func StartWithTools(ctx context.Context, dir string, log io.Writer) (*Registry, error) {
	return startRegistry(ctx, dir, log, true, false)
}

func startRegistry(ctx context.Context, dir string, log io.Writer, withTools, private bool) (*Registry, error) {
	specs, err := parseSpecs(packagesTxt)
	if err != nil {
		return nil, err
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	bin, err := verdaccioBin(filepath.Join(cache, "verdaccio"))
	if err != nil {
		return nil, err
	}
	var tools, dev []spec
	if withTools {
		if tools, err = parseSpecs(toolsTxt); err != nil {
			return nil, fmt.Errorf("tools.txt: %w", err)
		}
		if dev, err = parseSpecs(devtoolsTxt); err != nil {
			return nil, fmt.Errorf("devtools.txt: %w", err)
		}
	}
	tarballs, err := tarballPaths(filepath.Join(cache, "tarballs"), slices.Concat(specs, tools, dev))
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is required to run verdaccio: %w", err)
	}
	sock := filepath.Join(dir, "verdaccio.sock")
	if len(sock) >= maxSocketPath {
		return nil, fmt.Errorf("socket path %s is longer than a unix socket allows (%d bytes): use a shorter dir", sock, maxSocketPath-1)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the forwarder: %w", err)
	}
	url := "http://" + ln.Addr().String() + "/"
	config := filepath.Join(dir, "config.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "plugins"), 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("make verdaccio's plugins dir: %w", err), ln.Close())
	}
	if err := writeConfig(config, dir, sock, private); err != nil {
		return nil, errors.Join(err, ln.Close())
	}

	tail := logtail.New(16 << 10)
	out := io.MultiWriter(log, tail)
	cmd := exec.Command(node, bin, "--config", config)
	cmd.Dir = dir
	// The public URL makes every tarball URL point at the forwarder,
	// whatever Host header a client sends.
	cmd.Env = append(os.Environ(), "VERDACCIO_PUBLIC_URL="+url)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	cmd.WaitDelay = StopTimeout
	// Started from a thread of its own: Pdeathsig is that thread's end,
	// and the caller's may end long before this process does.
	wait, err := ownthread.Start(cmd)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start verdaccio in a new network namespace (needs root): %w", err), ln.Close())
	}

	r := &Registry{
		URL:    url,
		pid:    cmd.Process.Pid,
		exited: make(chan struct{}),
		fwd:    newForwarder(ln, sock),
		client: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		}},
		tail:    tail,
		private: private,
	}
	go func() {
		r.waitErr = <-wait // read after exited closes
		close(r.exited)
	}()
	go r.fwd.serve()

	if err := r.start(ctx, specs, tools, dev, tarballs); err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return r, nil
}

func (r *Registry) start(ctx context.Context, specs, tools, dev []spec, tarballs map[spec]string) error {
	readyCtx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := r.waitReady(readyCtx); err != nil {
		return err
	}
	if r.private {
		if err := r.addUser(ctx); err != nil {
			return err
		}
	}
	ctx, cancelPublish := context.WithTimeout(ctx, PublishTimeout)
	defer cancelPublish()
	if err := publishAll(ctx, r.client, r.URL, slices.Concat(specs, tools, dev), tarballs); err != nil {
		return fmt.Errorf("publish: %w\nverdaccio output:\n%s", err, r.tail.String())
	}
	if err := checkTarballURL(ctx, r.client, r.URL, specs[0]); err != nil {
		return err
	}
	for _, s := range specs {
		r.packages = append(r.packages, s.String())
	}
	for _, s := range tools {
		r.tools = append(r.tools, s.String())
	}
	for _, s := range dev {
		r.devtools = append(r.devtools, s.String())
	}
	return nil
}

// waitReady polls /-/ping until Verdaccio answers 200.
func (r *Registry) waitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+"-/ping", nil)
		if err != nil {
			return fmt.Errorf("ping request: %w", err)
		}
		resp, err := r.client.Do(req)
		if err == nil {
			code := resp.StatusCode
			if cerr := resp.Body.Close(); cerr != nil {
				return fmt.Errorf("ping: %w", cerr)
			}
			if code == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("verdaccio exited before serving (%v):\n%s", r.waitErr, r.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("verdaccio not ready: %w\n%s", ctx.Err(), r.tail.String())
		case <-tick.C:
		}
	}
}

// Packages lists the published name@version entries, in packages.txt order.
func (r *Registry) Packages() []string {
	return append([]string(nil), r.packages...)
}

// Tools lists the published package managers (tools.txt), in file order:
// name@version entries that no test repository depends on.
func (r *Registry) Tools() []string {
	return append([]string(nil), r.tools...)
}

// DevTools lists the published development tools (devtools.txt), in file
// order; StartWithTools publishes them.
func (r *Registry) DevTools() []string {
	return append([]string(nil), r.devtools...)
}

// Connections is how many TCP connections the forwarder accepted at URL.
// Start's own requests bypass it, so it counts clients only: a test asserts
// that a denied install never reached the registry by comparing it before
// and after.
func (r *Registry) Connections() int64 { return r.fwd.accepted.Load() }

// Close stops the forwarder and Verdaccio: SIGTERM to its process group,
// SIGKILL after StopTimeout, then waits for it. It is safe to call twice.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() { r.closeErr = r.stop() })
	return r.closeErr
}

func (r *Registry) stop() error {
	r.fwd.close()
	r.client.CloseIdleConnections()
	var errs []error
	signal := func(sig syscall.Signal) {
		if err := syscall.Kill(-r.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("signal verdaccio's group %d: %w", r.pid, err))
		}
	}
	signal(syscall.SIGTERM)
	timer := time.NewTimer(StopTimeout)
	defer timer.Stop()
	select {
	case <-r.exited:
	case <-timer.C:
		signal(syscall.SIGKILL)
		<-r.exited
	}
	// The leader is gone; kill anything it left in its group.
	signal(syscall.SIGKILL)
	return errors.Join(errs...)
}

// verdaccioBin returns Verdaccio's entry point in dir, checking its version.
func verdaccioBin(dir string) (string, error) {
	pkg := filepath.Join(dir, "node_modules", "verdaccio", "package.json")
	b, err := os.ReadFile(pkg)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("verdaccio %s is not installed in %s; install it with: %s", Version, dir, Install)
	}
	if err != nil {
		return "", fmt.Errorf("read verdaccio's package.json: %w", err)
	}
	var m struct{ Version string }
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("parse %s: %w", pkg, err)
	}
	if m.Version != Version {
		return "", fmt.Errorf("verdaccio in %s is %s, want %s; install it with: %s", dir, m.Version, Version, Install)
	}
	return filepath.Join(dir, "node_modules", "verdaccio", "bin", "verdaccio"), nil
}

// tarballPaths maps each spec to its tarball in dir, or names the missing.
func tarballPaths(dir string, specs []spec) (map[spec]string, error) {
	paths := make(map[spec]string, len(specs))
	var missing []string
	for _, s := range specs {
		p := filepath.Join(dir, s.packFile())
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, s.String())
			continue
		}
		paths[s] = p
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%d package tarballs missing from %s (%s); install them with: %s",
			len(missing), dir, strings.Join(missing, ", "), Install)
	}
	return paths, nil
}

// writeConfig writes Verdaccio's config: no uplinks, anonymous access and
// publish (a private one: only for the one user it lets register), the web
// UI off, listening on sock. YAML is a superset of JSON.
func writeConfig(path, dir, sock string, private bool) error {
	all := map[string]string{"access": "$all", "publish": "$all", "unpublish": "$all"}
	maxUsers := -1
	if private {
		all = map[string]string{"access": "$authenticated", "publish": "$authenticated", "unpublish": "$authenticated"}
		maxUsers = 1
	}
	config := map[string]any{
		"storage": filepath.Join(dir, "storage"),
		"plugins": filepath.Join(dir, "plugins"),
		"auth": map[string]any{
			"htpasswd": map[string]any{"file": filepath.Join(dir, "htpasswd"), "max_users": maxUsers},
		},
		"uplinks":       map[string]any{},
		"packages":      map[string]any{"@*/*": all, "**": all},
		"web":           map[string]any{"enable": false},
		"middlewares":   map[string]any{},
		"publish":       map[string]any{"allow_offline": true},
		"max_body_size": "100mb",
		"listen":        "unix:" + sock,
		"log":           map[string]any{"type": "stdout", "format": "pretty", "level": "warn"},
	}
	b, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return fmt.Errorf("encode verdaccio config: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write verdaccio config: %w", err)
	}
	return nil
}

// maxSocketPath is the size of sockaddr_un's sun_path on Linux.
const maxSocketPath = 108
