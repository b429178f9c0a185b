// Package toolchain prepares the package managers a plan needs (pnpm,
// yarn classic, yarn berry, bun) at an exact version, on the worker and
// outside any sandbox: once per version, it resolves the version in an
// npm registry's packument, downloads the tarball, checks it against the
// registry's integrity and signatures and the packageManager hash, and
// unpacks it into a gilf-owned cache directory with a bin/ of relative
// links, readable by every uid and writable by none but gilf. The local
// executor binds a prepared directory read-only into its sandbox; a
// version already prepared is reused with no network at all.
package toolchain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/gilf-review/gilf/validation"
)

// Defaults for Options. Every limit is inclusive: exactly at the limit is
// accepted, one byte over is an error.
const (
	// DefaultMaxTarballBytes caps a downloaded tarball (bun's is ~40 MB).
	DefaultMaxTarballBytes int64 = 256 << 20
	// DefaultMaxPackumentBytes caps a packument and the registry's keys.
	// pnpm's abbreviated packument on registry.npmjs.org measured 3.4 MB
	// (2026-12); the cap leaves room for its growth and full packuments.
	DefaultMaxPackumentBytes int64 = 64 << 20
	// DefaultMaxUnpackedBytes caps the unpacked size of a tarball, the sum
	// of its regular files (bun's binary alone is ~100 MB).
	DefaultMaxUnpackedBytes int64 = 1 << 30
)

// Client timeouts of the default HTTP client; a whole Prepare is bounded
// by its ctx.
const (
	dialTimeout           = 30 * time.Second
	tlsHandshakeTimeout   = 15 * time.Second
	responseHeaderTimeout = 60 * time.Second
	clientTimeout         = 15 * time.Minute
)

// Options configure a Cache. Zero limits take their Default….
type Options struct {
	// Dir is the cache root (the worker passes GILF_DATA_DIR/toolchains),
	// an absolute path, created 0755 when missing. Several processes may
	// share it.
	Dir string
	// Registry is the npm registry's base URL, http or https
	// ("https://registry.npmjs.org/"; the trailing slash is optional).
	Registry string
	// Client makes every request; nil is a client with dial, TLS,
	// response-header and overall timeouts.
	Client *http.Client
	// MaxTarballBytes caps a tarball; a bigger one is an error.
	MaxTarballBytes int64
	// MaxPackumentBytes caps a packument body, and the registry's keys.
	MaxPackumentBytes int64
	// MaxUnpackedBytes caps the total size of a tarball's files.
	MaxUnpackedBytes int64
	// Log gets one line per download; nil discards.
	Log *slog.Logger
}

// Cache prepares package managers into Options.Dir. It is safe for
// concurrent use, and with other processes sharing Dir: one version is
// downloaded once (singleflight in the process, a flock on
// <Dir>/<manager>/<version>.lock across processes).
type Cache struct {
	dir          string
	registry     string   // base URL, ending in "/"
	registryURL  *url.URL // parsed registry
	client       *http.Client
	maxTarball   int64
	maxPackument int64
	maxUnpacked  int64
	log          *slog.Logger
	bun          string // bun's package on this platform, "" when none

	flight singleflight.Group

	keysMu sync.Mutex
	keys   map[string]registryKey // nil until fetched
}

// New validates every option at once and returns a ready Cache. It
// creates Dir and removes the temporary directories of builds no process
// is running (left by a crash).
func New(opts Options) (*Cache, error) {
	var errs []error
	if opts.Dir == "" || !filepath.IsAbs(opts.Dir) {
		errs = append(errs, fmt.Errorf("toolchain dir %q: must be an absolute path", opts.Dir))
	}
	reg, u, err := parseRegistry(opts.Registry)
	if err != nil {
		errs = append(errs, err)
	}
	limit := func(name string, v, def int64) int64 {
		if v < 0 {
			errs = append(errs, fmt.Errorf("toolchain %s %d: must not be negative (0 is the default, %d)", name, v, def))
		}
		if v <= 0 {
			return def
		}
		return v
	}
	c := &Cache{
		dir:          filepath.Clean(opts.Dir),
		registry:     reg,
		registryURL:  u,
		client:       opts.Client,
		maxTarball:   limit("MaxTarballBytes", opts.MaxTarballBytes, DefaultMaxTarballBytes),
		maxPackument: limit("MaxPackumentBytes", opts.MaxPackumentBytes, DefaultMaxPackumentBytes),
		maxUnpacked:  limit("MaxUnpackedBytes", opts.MaxUnpackedBytes, DefaultMaxUnpackedBytes),
		log:          opts.Log,
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.client == nil {
		c.client = defaultClient()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.bun = bunPackage(runtime.GOOS, runtime.GOARCH, cpuinfo())
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("toolchain dir: %w", err)
	}
	if err := c.removeStale(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseRegistry checks the registry URL and returns it ending in "/".
func parseRegistry(raw string) (string, *url.URL, error) {
	if raw == "" {
		return "", nil, errors.New("toolchain registry: required")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("toolchain registry: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", nil, fmt.Errorf("toolchain registry %q: must be an http or https URL", raw)
	case u.Host == "":
		return "", nil, fmt.Errorf("toolchain registry %q: has no host", raw)
	case u.User != nil:
		// The registry URL appears in public messages.
		return "", nil, fmt.Errorf("toolchain registry: must not carry credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return "", nil, fmt.Errorf("toolchain registry %q: must not have a query or a fragment", raw)
	}
	s := u.String()
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s, u, nil
}

func defaultClient() *http.Client {
	return &http.Client{
		Timeout: clientTimeout,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   tlsHandshakeTimeout,
			ResponseHeaderTimeout: responseHeaderTimeout,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   4,
			ForceAttemptHTTP2:     true,
		},
	}
}

// cpuinfo is /proc/cpuinfo, or "" where it cannot be read (bun then
// takes the baseline build, which runs everywhere on x64).
func cpuinfo() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return string(b)
}

// managers are the package managers gilf prepares, by directory name.
var managers = []validation.PackageManager{validation.PNPM, validation.Yarn, validation.YarnBerry, validation.Bun}

// toolFor returns what gilf downloads for pm.
func (c *Cache) toolFor(pm validation.PackageManager) (tool, error) {
	switch pm {
	case validation.PNPM:
		return tool{manager: pm, pkg: pnpmPackage, command: "pnpm"}, nil
	case validation.Yarn:
		return tool{manager: pm, pkg: yarnPackage, command: "yarn"}, nil
	case validation.YarnBerry:
		return tool{manager: pm, pkg: yarnBerryPackage, command: "yarn"}, nil
	case validation.Bun:
		if c.bun == "" {
			return tool{}, validation.Refuse(validation.CodePackageManagerUnavailable,
				"bun has no build gilf runs on %s/%s", runtime.GOOS, runtime.GOARCH)
		}
		return tool{manager: pm, pkg: c.bun, command: "bun"}, nil
	case validation.NPM:
		return tool{}, errors.New("npm is the worker's own node's npm: toolchain does not prepare it")
	}
	return tool{}, fmt.Errorf("toolchain: unknown package manager %q", pm)
}

// Prepare returns req's package manager prepared in the cache,
// downloading and checking it first unless that version is already
// there. An exact version already prepared needs no network; a major or
// an empty version is resolved in the registry every time.
//
// What gilf cannot provide (no such version, no build for this platform,
// bytes that do not match req.Hash, a malformed version or hash) is a
// *validation.Refusal with CodePackageManagerUnavailable. Anything else
// (network, registry errors, a tarball that does not match the registry's
// integrity or signature) is an error worth a retry. req.Release and
// req.Source are not read.
//
// A caller that joins a download under way in this process waits for it
// to end; the download is bounded by the first caller's ctx.
func (c *Cache) Prepare(ctx context.Context, req validation.ToolRequest) (validation.Tool, error) {
	t, err := c.toolFor(req.Manager)
	if err != nil {
		return validation.Tool{}, err
	}
	var hash corepackHash
	if req.Hash != "" {
		if hash, err = parseCorepackHash(req.Hash); err != nil {
			return validation.Tool{}, err
		}
	}
	w, err := parseWanted(req.Manager, req.Version)
	if err != nil {
		return validation.Tool{}, err
	}
	var m marker
	if w.exact != "" {
		m, err = c.ensure(ctx, t, w.exact, nil)
	} else {
		var r release
		if r, err = c.resolve(ctx, t, w); err == nil {
			m, err = c.ensure(ctx, t, r.Version, &r)
		}
	}
	if err != nil {
		return validation.Tool{}, err
	}
	words := m.Integrity
	if hash.algo != "" {
		covered, digests := "tarball", m.Tarball
		if t.manager == validation.YarnBerry {
			// corepack hashes yarn's single-file release, the package's
			// bin/yarn.js, not the npm tarball.
			covered, digests = m.Main, m.MainDigests
		}
		more, err := checkCorepackHash(spec(t.manager, m.Version), hash, covered, digests)
		if err != nil {
			return validation.Tool{}, err
		}
		words += more
	}
	return validation.Tool{
		Manager:   t.manager,
		Version:   m.Version,
		Dir:       c.entryDir(t, m.Version),
		Integrity: words,
	}, nil
}

func (c *Cache) managerDir(t tool) string { return filepath.Join(c.dir, string(t.manager)) }

func (c *Cache) entryDir(t tool, version string) string {
	return filepath.Join(c.managerDir(t), version)
}

// ensure returns the marker of t at version, preparing it when the cache
// has no complete entry. r is the release when the caller already read
// the packument; nil reads it.
func (c *Cache) ensure(ctx context.Context, t tool, version string, r *release) (marker, error) {
	if m, ok, err := readMarker(c.entryDir(t, version), t, version); err != nil || ok {
		return m, err
	}
	v, err, _ := c.flight.Do(string(t.manager)+"@"+version, func() (any, error) {
		return c.prepareLocked(ctx, t, version, r)
	})
	if err != nil {
		return marker{}, err
	}
	return v.(marker), nil
}

// prepareLocked builds the entry under the version's flock, unless
// another process finished it while this one waited. The release is
// resolved first, so a version the registry lacks leaves no lock file.
func (c *Cache) prepareLocked(ctx context.Context, t tool, version string, r *release) (m marker, err error) {
	if r == nil {
		got, err := c.resolve(ctx, t, wanted{exact: version})
		if err != nil {
			return marker{}, err
		}
		r = &got
	}
	if err := os.MkdirAll(c.managerDir(t), 0o755); err != nil {
		return marker{}, fmt.Errorf("toolchain dir: %w", err)
	}
	l, err := lock(ctx, filepath.Join(c.managerDir(t), version+lockSuffix))
	if err != nil {
		return marker{}, err
	}
	defer func() {
		if uerr := l.unlock(); uerr != nil && err == nil {
			err = fmt.Errorf("unlock: %w", uerr)
		}
	}()
	if m, ok, err := readMarker(c.entryDir(t, version), t, version); err != nil || ok {
		return m, err
	}
	return c.build(ctx, t, *r)
}
