package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// Settings of the install step's network (SPEC §3.2, §4.2).
const (
	envInstallNetwork       = "GILF_INSTALL_NETWORK"
	envInstallAllowHosts    = "GILF_INSTALL_ALLOW_HOSTS"
	envInstallIgnoreScripts = "GILF_INSTALL_IGNORE_SCRIPTS"

	// InstallNetworkProxy is GILF_INSTALL_NETWORK's default: the
	// registries of the allow-list, through gilf's proxy.
	InstallNetworkProxy = "proxy"
	// InstallNetworkNone installs with no network at all.
	InstallNetworkNone = "none"

	// RegistryProbeTimeout bounds each package manager's answer to "which
	// registry are you configured for" at start.
	RegistryProbeTimeout = 10 * time.Second
	// MaxRegistryProbeBytes is what is read of that answer.
	MaxRegistryProbeBytes = 1 << 20
)

// InstallConfig is GILF_INSTALL_*: what the install step may reach.
type InstallConfig struct {
	// Network is validation.NetworkRegistry (GILF_INSTALL_NETWORK=proxy,
	// the default) or NetworkNone (none). The host network is not an
	// option.
	Network validation.Network
	// AllowHosts are GILF_INSTALL_ALLOW_HOSTS, added to the registries the
	// worker's own package managers are configured for.
	AllowHosts []egress.Rule
	// IgnoreScripts is GILF_INSTALL_IGNORE_SCRIPTS=1.
	IgnoreScripts bool
	// Cache is how the proxy terminates TLS, caches and authenticates
	// (config_install_cache.go).
	Cache InstallCacheConfig
}

func loadInstall(getenv func(string) string, errs []error) (InstallConfig, []error) {
	c := InstallConfig{Network: validation.NetworkRegistry}
	switch v := strings.ToLower(strings.TrimSpace(getenv(envInstallNetwork))); v {
	case "", InstallNetworkProxy:
	case InstallNetworkNone:
		c.Network = validation.NetworkNone
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %s (the registry through gilf's proxy) or %s (no network); the host network is not an option",
			envInstallNetwork, v, InstallNetworkProxy, InstallNetworkNone))
	}
	rules, err := egress.ParseAllowList(getenv(envInstallAllowHosts))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envInstallAllowHosts, err))
	}
	c.AllowHosts = rules
	if c.IgnoreScripts, err = flag01(getenv, envInstallIgnoreScripts); err != nil {
		errs = append(errs, err)
	}
	c.Cache, errs = loadInstallCache(getenv, errs)
	return c, errs
}

// commandRunner runs a worker command and returns its stdout; the
// registry probe's seam for tests.
type commandRunner func(ctx context.Context, name string, args ...string) ([]byte, error)

// execRunner runs name from the worker's PATH in / (so no project's
// .npmrc is read), with the worker's environment, bounded in time and
// output. A missing command is exec.ErrNotFound.
func execRunner(environ []string) commandRunner {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		path, err := exec.LookPath(name)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, RegistryProbeTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Dir = "/"
		cmd.Env = environ
		var out limitedBuffer
		out.max = MaxRegistryProbeBytes
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return out.Bytes(), nil
	}
}

// limitedBuffer keeps at most max bytes and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// WorkerRegistries is what the worker's package managers are configured
// to install from.
type WorkerRegistries struct {
	// Npm are npm's "registry" and "@scope:registry" settings, written
	// into the sandbox's own ~/.npmrc (never a credential).
	Npm map[string]string
	// Rules permit each registry's host and port.
	Rules []egress.Rule
	// Notes say what could not be read; the defaults stood in.
	Notes []string
}

// probeRegistries asks npm (and yarn and pnpm, when the worker has them)
// which registries they are configured for. Without npm, npm's own
// default registry stands in.
func probeRegistries(ctx context.Context, run commandRunner) WorkerRegistries {
	w := WorkerRegistries{Npm: map[string]string{}}
	add := func(source, u string) {
		u = strings.TrimSpace(u)
		if u == "" || u == "undefined" {
			return
		}
		r, err := egress.RuleFromURL(u)
		if err != nil {
			w.Notes = append(w.Notes, fmt.Sprintf("%s names a registry gilf cannot use (%v)", source, err))
			return
		}
		if !slices.Contains(w.Rules, r) {
			w.Rules = append(w.Rules, r)
		}
	}
	out, err := run(ctx, "npm", "config", "list", "--json")
	var cfg map[string]any
	if err == nil {
		err = json.Unmarshal(out, &cfg)
	}
	if err != nil {
		w.Notes = append(w.Notes, "npm's registry setting could not be read ("+probeError(err)+"); using "+defaultNpmRegistry)
		cfg = map[string]any{"registry": defaultNpmRegistry}
	}
	for k, v := range cfg {
		s, ok := v.(string)
		if !ok || !(k == "registry" || strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry")) {
			continue
		}
		if _, err := egress.RuleFromURL(s); err != nil || strings.ContainsAny(s+k, " \t\r\n=") {
			w.Notes = append(w.Notes, fmt.Sprintf("npm's %s is not a registry URL gilf can use", k))
			continue
		}
		w.Npm[k] = s
	}
	if _, ok := w.Npm["registry"]; !ok {
		w.Npm["registry"] = defaultNpmRegistry
	}
	for _, k := range slices.Sorted(maps.Keys(w.Npm)) {
		add("npm's "+k, w.Npm[k])
	}
	for _, pm := range []struct{ name, key string }{{"yarn", "registry"}, {"pnpm", "registry"}} {
		out, err := run(ctx, pm.name, "config", "get", pm.key)
		switch {
		case errors.Is(err, exec.ErrNotFound):
		case err != nil:
			w.Notes = append(w.Notes, pm.name+"'s registry setting could not be read ("+probeError(err)+")")
		default:
			add(pm.name+"'s registry", string(out))
		}
	}
	return w
}

// defaultNpmRegistry is npm's built-in registry.
const defaultNpmRegistry = "https://registry.npmjs.org/"

func probeError(err error) string {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err.Error()
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// installRules is the install step's allow-list: the worker's registries,
// then GILF_INSTALL_ALLOW_HOSTS.
func installRules(w WorkerRegistries, c InstallConfig) []egress.Rule {
	rules := slices.Clone(w.Rules)
	for _, r := range c.AllowHosts {
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	return rules
}

// logRegistries logs the allow-list once at start, and what could not be
// read.
func logRegistries(log *slog.Logger, rules []egress.Rule, w WorkerRegistries) {
	names := make([]string, 0, len(rules))
	for _, r := range rules {
		names = append(names, r.String())
	}
	log.Info("install step egress allow-list", "hosts", strings.Join(names, ","))
	for _, n := range w.Notes {
		log.Warn("registry probe", "note", n)
	}
}

// remoteHosts are the host names of rules a remote sandbox's provider can
// be asked to allow: not loopback literals (the worker's own loopback
// means nothing there), wildcards as "*.suffix".
func remoteHosts(rules []egress.Rule) []string {
	var hosts []string
	for _, r := range rules {
		h := r.Host
		if a, err := netip.ParseAddr(h); err == nil && a.IsLoopback() {
			continue
		}
		if r.Wildcard {
			h = "*." + h
		}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
