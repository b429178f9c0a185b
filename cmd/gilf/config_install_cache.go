package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/executors/local/egress"
)

// Settings of the install proxy's TLS termination, cache and registry
// credentials (issue 29).
const (
	envInstallTLSTerminate      = "GILF_INSTALL_TLS_TERMINATE"
	envInstallTunnelHosts       = "GILF_INSTALL_TUNNEL_HOSTS"
	envInstallCacheBytes        = "GILF_INSTALL_CACHE_BYTES"
	envInstallCacheMetadataTTL  = "GILF_INSTALL_CACHE_METADATA_TTL_MS"
	envInstallRegistryCredsFile = "GILF_INSTALL_REGISTRY_CREDENTIALS"
	envInstallWarmBytes         = "GILF_INSTALL_WARM_BYTES"

	// EgressCADirName and InstallCacheDirName are the worker CA's and
	// the registry cache's directories under GILF_DATA_DIR.
	EgressCADirName     = "egress-ca"
	InstallCacheDirName = "registry-cache"
	// WarmDisksDirName holds the warm disks' images under GILF_DATA_DIR.
	WarmDisksDirName = "warm-disks"
	// MinInstallCacheBytes and MaxInstallCacheBytes bound
	// GILF_INSTALL_CACHE_BYTES (0 turns the cache off).
	MinInstallCacheBytes int64 = 1 << 20
	MaxInstallCacheBytes int64 = 1 << 40
	// MinInstallWarmBytes and MaxInstallWarmBytes bound
	// GILF_INSTALL_WARM_BYTES (0 turns warm disks off).
	MinInstallWarmBytes int64 = 64 << 20
	MaxInstallWarmBytes int64 = 4 << 40
)

// InstallCacheConfig is how the install proxy terminates TLS, caches and
// authenticates.
type InstallCacheConfig struct {
	// TerminateTLS is GILF_INSTALL_TLS_TERMINATE (default 1): the proxy
	// terminates the registries' TLS with the worker's CA under
	// GILF_DATA_DIR, so only GET and HEAD leave and the cache serves.
	TerminateTLS bool
	// TunnelHosts are GILF_INSTALL_TUNNEL_HOSTS: destinations passed
	// through as opaque TLS (a git host for git dependencies).
	TunnelHosts []egress.Rule
	// CacheBytes is GILF_INSTALL_CACHE_BYTES (default
	// egress.DefaultCacheBytes; 0 turns the cache off).
	CacheBytes int64
	// MetadataTTL is GILF_INSTALL_CACHE_METADATA_TTL_MS (default
	// egress.DefaultMetadataTTL).
	MetadataTTL time.Duration
	// Credentials are read from the files GILF_INSTALL_REGISTRY_CREDENTIALS
	// names, by "host:port".
	Credentials map[string]Secret
	// WarmBytes is GILF_INSTALL_WARM_BYTES (default
	// local.DefaultWarmBytes; 0 turns warm disks off): the bound of the
	// images of pnpm's store or bun's cache per lockfile, made from the
	// cache (so off with it too).
	WarmBytes int64
}

// defaultInstallCache is InstallCacheConfig with nothing set.
func defaultInstallCache() InstallCacheConfig {
	return InstallCacheConfig{TerminateTLS: true, CacheBytes: egress.DefaultCacheBytes, MetadataTTL: egress.DefaultMetadataTTL, WarmBytes: local.DefaultWarmBytes}
}

func loadInstallCache(getenv func(string) string, errs []error) (InstallCacheConfig, []error) {
	c := defaultInstallCache()
	switch v := strings.TrimSpace(getenv(envInstallTLSTerminate)); v {
	case "", "1":
	case "0":
		c.TerminateTLS = false
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want 1 (the default) or 0 to pass TLS through opaque", envInstallTLSTerminate, v))
	}
	rules, err := egress.ParseAllowList(getenv(envInstallTunnelHosts))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envInstallTunnelHosts, err))
	}
	c.TunnelHosts = rules
	errs = bytesOrOff(getenv, envInstallCacheBytes, "no cache", MinInstallCacheBytes, MaxInstallCacheBytes, &c.CacheBytes, errs)
	errs = bytesOrOff(getenv, envInstallWarmBytes, "no warm disks", MinInstallWarmBytes, MaxInstallWarmBytes, &c.WarmBytes, errs)
	if d, err := millis(getenv, envInstallCacheMetadataTTL); err != nil {
		errs = append(errs, err)
	} else if d > 0 {
		c.MetadataTTL = d
	}
	if spec := strings.TrimSpace(getenv(envInstallRegistryCredsFile)); spec != "" {
		creds, err := egress.ReadCredentials(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envInstallRegistryCredsFile, err))
		}
		c.Credentials = map[string]Secret{}
		for k, v := range creds {
			c.Credentials[k] = NewSecret(v)
		}
	}
	return c, errs
}

// bytesOrOff reads the setting name into *dst when it is set: 0 (off,
// what off means) or a number of bytes from min to max.
func bytesOrOff(getenv func(string) string, name, off string, min, max int64, dst *int64, errs []error) []error {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return errs
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || (n != 0 && (n < min || n > max)) {
		return append(errs, fmt.Errorf("%s=%q: want 0 (%s) or a number of bytes from %d to %d", name, v, off, min, max))
	}
	*dst = n
	return errs
}

// buildEgress is the local executor's install network: the allow-list,
// the worker's registry settings, and, as configured, the worker's CA
// (made at first start under GILF_DATA_DIR), the shared registry cache
// and the registries' credentials. Upstream TLS is verified against the
// worker's roots and GILF_SANDBOX_CA_FILE.
func buildEgress(cfg Config, rules []egress.Rule, reg WorkerRegistries, log *slog.Logger) (local.EgressOptions, error) {
	ic := cfg.Validation.Install.Cache
	o := local.EgressOptions{AllowHosts: rules, Registries: reg.Npm, Tunnels: ic.TunnelHosts}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return local.EgressOptions{}, fmt.Errorf("install network: GILF_DATA_DIR: %w", err)
	}
	var errs []error
	if ic.TerminateTLS {
		ca, err := egress.LoadOrCreateCA(filepath.Join(dataDir, EgressCADirName))
		if err != nil {
			errs = append(errs, err)
		}
		o.CA = ca
	}
	if ic.CacheBytes > 0 {
		c, err := egress.OpenCache(egress.CacheConfig{
			Dir: filepath.Join(dataDir, InstallCacheDirName), MaxBytes: ic.CacheBytes, MetadataTTL: ic.MetadataTTL, Log: log,
		})
		if err != nil {
			errs = append(errs, err)
		}
		o.Cache = c
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if f := cfg.Validation.Sandbox.CAFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envSandboxCAFile, err))
		} else if !roots.AppendCertsFromPEM(b) {
			errs = append(errs, fmt.Errorf("%s: no certificate", envSandboxCAFile))
		}
	}
	o.RootCAs = roots
	if len(ic.Credentials) > 0 {
		o.Credentials = map[string]string{}
		for k, v := range ic.Credentials {
			o.Credentials[k] = v.Reveal()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return local.EgressOptions{}, fmt.Errorf("install network: %w", err)
	}
	log.Info("install proxy", "tls_terminate", ic.TerminateTLS, "cache_bytes", ic.CacheBytes,
		"metadata_ttl", ic.MetadataTTL.String(), "tunnels", len(ic.TunnelHosts), "credentials", len(ic.Credentials))
	return o, nil
}

// warmDisks is where the local executor keeps its warm disks: under
// GILF_DATA_DIR, bounded by GILF_INSTALL_WARM_BYTES; off without the
// registry cache they are made from.
func warmDisks(cfg Config) (local.WarmOptions, error) {
	ic := cfg.Validation.Install.Cache
	if ic.CacheBytes <= 0 || ic.WarmBytes <= 0 {
		return local.WarmOptions{}, nil
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return local.WarmOptions{}, fmt.Errorf("warm disks: GILF_DATA_DIR: %w", err)
	}
	return local.WarmOptions{Dir: filepath.Join(dataDir, WarmDisksDirName), MaxBytes: ic.WarmBytes}, nil
}

// installCache is the registry cache of the local executor in set, nil
// when there is none.
func installCache(set executors.Set) *egress.Cache {
	for _, e := range set {
		if le, ok := e.(*local.Executor); ok {
			return le.Options().Egress.Cache
		}
	}
	return nil
}
