package main

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/toolchain"
	"github.com/gilf-review/gilf/validation"
)

// Settings of what a sandbox is given besides the checkout (SPEC §3.2,
// §4.2): its certificate authorities, extra environment and the package
// managers gilf provides.
const (
	envSandboxCAFile     = "GILF_SANDBOX_CA_FILE"
	envSandboxEnv        = "GILF_SANDBOX_ENV"
	envToolchainDir      = "GILF_TOOLCHAIN_DIR"
	envToolchainRegistry = "GILF_TOOLCHAIN_REGISTRY"

	// SettingNone turns GILF_SANDBOX_CA_FILE or GILF_TOOLCHAIN_DIR off.
	SettingNone = "none"
	// ToolchainDirName is the toolchain cache's directory under
	// GILF_DATA_DIR when GILF_TOOLCHAIN_DIR is unset.
	ToolchainDirName = "toolchains"
	// MaxSandboxEnvEntries and MaxSandboxEnvBytes bound GILF_SANDBOX_ENV.
	MaxSandboxEnvEntries = 64
	MaxSandboxEnvBytes   = 16 << 10
)

// SystemCABundles are where Debian, Alpine, Fedora and macOS-style hosts
// keep the system's CA bundle; the first that exists is the sandbox's
// default GILF_SANDBOX_CA_FILE.
func SystemCABundles() []string {
	return []string{
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/cert.pem",
	}
}

// SandboxConfig is GILF_SANDBOX_* and GILF_TOOLCHAIN_*.
type SandboxConfig struct {
	// CAFile is GILF_SANDBOX_CA_FILE: the CA bundle bound into every
	// sandbox; by default the worker's system bundle, "" for none.
	CAFile string
	// Env is GILF_SANDBOX_ENV: extra, non-secret NAME=value pairs every
	// step gets.
	Env map[string]string
	// ToolchainDir is GILF_TOOLCHAIN_DIR (default GILF_DATA_DIR/toolchains):
	// where pnpm, yarn and bun are prepared; "" when turned off (only
	// the worker's own installations are used).
	ToolchainDir string
	// ToolchainRegistry is GILF_TOOLCHAIN_REGISTRY: the registry package
	// managers are prepared from; "" means the worker's npm registry.
	ToolchainRegistry string
}

func loadSandbox(getenv func(string) string, dataDir string, errs []error) (SandboxConfig, []error) {
	var c SandboxConfig
	switch v := strings.TrimSpace(getenv(envSandboxCAFile)); v {
	case SettingNone:
	case "":
		for _, p := range SystemCABundles() {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				c.CAFile = p
				break
			}
		}
	default:
		if !filepath.IsAbs(v) {
			errs = append(errs, fmt.Errorf("%s=%q: want an absolute path to a PEM bundle, or %s", envSandboxCAFile, v, SettingNone))
		} else if _, err := local.ReadCAFile(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envSandboxCAFile, err))
		} else {
			c.CAFile = v
		}
	}
	var err error
	if c.Env, err = ParseSandboxEnv(getenv(envSandboxEnv)); err != nil {
		errs = append(errs, err)
	}
	switch v := strings.TrimSpace(getenv(envToolchainDir)); v {
	case SettingNone:
	case "":
		c.ToolchainDir = filepath.Join(dataDir, ToolchainDirName)
	default:
		c.ToolchainDir = v
	}
	if c.ToolchainDir != "" {
		abs, err := filepath.Abs(c.ToolchainDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envToolchainDir, err))
		}
		c.ToolchainDir = abs
	}
	c.ToolchainRegistry = strings.TrimSpace(getenv(envToolchainRegistry))
	if r := c.ToolchainRegistry; r != "" && !strings.HasPrefix(r, "https://") && !strings.HasPrefix(r, "http://") {
		errs = append(errs, fmt.Errorf("%s=%q: want an http(s) registry URL", envToolchainRegistry, r))
	}
	return c, errs
}

// ParseSandboxEnv reads GILF_SANDBOX_ENV: NAME=value pairs separated by
// newlines or commas (a value holds no comma). Names that look secret
// (secretName), names the executor sets itself, and GILF_ settings are
// refused: the sandbox runs the pull request's code, and a secret given
// to it is a secret given away.
func ParseSandboxEnv(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > MaxSandboxEnvBytes {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit", envSandboxEnv, len(s), MaxSandboxEnvBytes)
	}
	out := map[string]string{}
	var errs []string
	for _, item := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' }) {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			errs = append(errs, fmt.Sprintf("%q is not NAME=value", item))
			continue
		}
		switch why := validation.CheckStepEnv(name, value, 0); {
		case why != "":
			errs = append(errs, why)
		default:
			if _, dup := out[name]; dup {
				errs = append(errs, fmt.Sprintf("%s is given twice", name))
			}
			out[name] = value
		}
	}
	if len(out) > MaxSandboxEnvEntries {
		errs = append(errs, fmt.Sprintf("%d variables, over the limit of %d", len(out), MaxSandboxEnvEntries))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", envSandboxEnv, strings.Join(errs, "; "))
	}
	return out, nil
}

// sandboxEnv is the local executor's step environment: its defaults and
// GILF_SANDBOX_ENV (which cannot name a default: those are reserved).
func (c SandboxConfig) sandboxEnv() map[string]string {
	env := local.DefaultEnv()
	maps.Copy(env, c.Env)
	return env
}

// buildToolchain is the toolchain cache the local executor prepares
// package managers with: GILF_TOOLCHAIN_DIR, from GILF_TOOLCHAIN_REGISTRY
// or else the registry the worker's npm names. Nil (and no error) when
// GILF_TOOLCHAIN_DIR=none: only the worker's own installations are used.
func buildToolchain(c SandboxConfig, reg WorkerRegistries, log *slog.Logger) (local.ToolProvider, error) {
	if c.ToolchainDir == "" {
		return nil, nil
	}
	url := c.ToolchainRegistry
	if url == "" {
		url = reg.Npm["registry"]
	}
	if url == "" {
		url = local.DefaultRegistry
	}
	tc, err := toolchain.New(toolchain.Options{Dir: c.ToolchainDir, Registry: url, Log: log})
	if err != nil {
		return nil, fmt.Errorf("toolchain cache: %w", err)
	}
	log.Info("package managers are prepared from the registry", logkey.Dir, c.ToolchainDir, "registry", url)
	return tc, nil
}

// checkUIDRange refuses, at start, a GILF_LOCAL_UID_RANGE smaller than
// the number of local runs that can be under way at once: every run takes
// a uid of its own, and a worker that found the pool empty would retry
// its job until a run ended, forever when the range holds none. Each of
// GILF_WORKERS holds at most one local run, and one more when the shadow
// lane is local too.
func checkUIDRange(v ValidationConfig, sc ServeConfig) error {
	if !v.AllowLocal {
		return nil
	}
	count := v.LocalUIDCount
	if count == 0 {
		count = local.DefaultUIDCount
	}
	need := sc.Workers
	if name, ok := executors.Canonical(sc.Shadow.Executor); ok && name == local.Name {
		need *= 2
	}
	if uint64(count) < uint64(need) {
		return fmt.Errorf("GILF_LOCAL_UID_RANGE holds %d uids, fewer than the %d local runs GILF_WORKERS=%d can have under way at once (each takes its own uid): widen the range to at least %d uids or lower GILF_WORKERS",
			count, need, sc.Workers, need)
	}
	return nil
}
