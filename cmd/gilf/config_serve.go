package main

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/selfhost"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// Defaults and bounds of the serve settings.
const (
	DefaultAddr         = ":8080"
	DefaultGitHubAPIURL = "https://api.github.com"
	DefaultWorkers      = 2
	// MaxWorkers bounds GILF_WORKERS: each worker may hold a sandbox, a
	// checkout and an executor's output buffers at once.
	MaxWorkers = 64
	// DefaultJobLease is GILF_JOB_LEASE_MS's default: a worker that stops
	// heartbeating (killed, frozen, partitioned) loses its job this long
	// after its last heartbeat, and another worker takes it.
	DefaultJobLease = 120_000 * time.Millisecond
	// MinJobLease bounds GILF_JOB_LEASE_MS from below: the heartbeat
	// runs every third of the lease, and a lease shorter than this would
	// be lost to an ordinary pause of the store.
	MinJobLease = time.Second
	// MaxPrivateKeyBytes bounds the PEM read from
	// GILF_GITHUB_PRIVATE_KEY_PATH (a 4096-bit RSA key is about 3.3 KB).
	MaxPrivateKeyBytes = 64 << 10
)

// ServeConfig is what `gilf serve` reads besides Config: the HTTP
// listener, the GitHub App, the workers and the remote executors.
type ServeConfig struct {
	Addr     string // GILF_ADDR
	GitHub   GitHubConfig
	Workers  int           // GILF_WORKERS
	JobLease time.Duration // GILF_JOB_LEASE_MS
	// ReviewDrafts is GILF_REVIEW_DRAFTS=1.
	ReviewDrafts bool
	Shadow       ShadowConfig
	SelfHost     SelfHostConfig
	Crabbox      CrabboxConfig
	E2B          E2BConfig
	CFSandbox    CFSandboxConfig
	// Allow is GILF_ALLOWED_ACCOUNTS (owner logins) and
	// GILF_ALLOWED_INSTALLATIONS (ids), comma or space separated: when
	// either is set, pull requests of others are recorded and ignored.
	Allow webhook.Allowlist
	// BadSignatureLimit is GILF_BAD_SIGNATURE_LIMIT: failed signature
	// checks one client may make per minute before its further failures
	// are answered 429; 0 turns the guard off (webhook.Config's -1).
	BadSignatureLimit int
	// TrustedProxies is GILF_TRUSTED_PROXIES: the reverse proxies (CIDRs
	// or addresses) whose X-Forwarded-For names the client.
	TrustedProxies []netip.Prefix
	// RedeliverySweep is GILF_REDELIVERY_SWEEP_MS: how often to ask
	// GitHub to redeliver failed webhook deliveries; 0 (the default) is
	// off, else at least MinRedeliverySweep.
	RedeliverySweep time.Duration
	// Dashboard is GILF_DASHBOARD_TOKEN (config_dashboard.go).
	Dashboard DashboardConfig
	// MinFreeBytes is GILF_MIN_FREE_BYTES: below it free under the data
	// directory, /readyz answers 503; 0 is no check.
	MinFreeBytes int64
}

// GitHubConfig is the GitHub App: its id and key, its webhook secret and
// the API it talks to.
type GitHubConfig struct {
	AppID          int64  // GILF_GITHUB_APP_ID
	PrivateKey     Secret // GILF_GITHUB_PRIVATE_KEY (PEM)
	PrivateKeyPath string // GILF_GITHUB_PRIVATE_KEY_PATH
	WebhookSecret  Secret // GILF_WEBHOOK_SECRET
	APIURL         string // GILF_GITHUB_API_URL
	// DownloadHosts is GILF_GITHUB_DOWNLOAD_HOSTS (comma or space
	// separated host[:port]); nil means the client's default (codeload).
	DownloadHosts []string
}

// ShadowConfig is the shadow lane (SPEC §4.6).
type ShadowConfig struct {
	Executor string        // GILF_VALIDATION_SHADOW_EXECUTOR; empty: no shadow
	Timeout  time.Duration // GILF_VALIDATION_SHADOW_TIMEOUT_MS
}

// SelfHostConfig is the self-host executor (SPEC §4.3).
type SelfHostConfig struct {
	Command string             // GILF_SELF_HOST_COMMAND
	Network validation.Network // GILF_SELF_HOST_NETWORK
	Timeout time.Duration      // GILF_SELF_HOST_TIMEOUT_MS
	// Resources are GILF_SELF_HOST_VCPU and GILF_SELF_HOST_MEMORY_GIB
	// (config_selfhost_cost.go).
	Resources executors.Resources
}

// CrabboxConfig is the managed-crabbox executor.
type CrabboxConfig struct {
	Bin         string // GILF_CRABBOX_BIN
	Coordinator string // GILF_CRABBOX_COORDINATOR
	Token       Secret // GILF_CRABBOX_TOKEN
}

// E2BConfig is the managed-e2b executor (SPEC §4.4).
type E2BConfig struct {
	APIKey   Secret        // E2B_API_KEY: enables the executor
	Template string        // GILF_E2B_TEMPLATE
	Timeout  time.Duration // GILF_E2B_TIMEOUT_MS: the sandbox's lifetime cap
	APIURL   string        // GILF_E2B_API_URL
	EnvdURL  string        // GILF_E2B_ENVD_URL
	CPU      int           // GILF_E2B_CPU
	MemoryMB int           // GILF_E2B_MEMORY_MB
	AllowOut []string      // GILF_E2B_ALLOW_OUT: hosts the install step may reach
}

// Configured reports whether managed-e2b has its API key.
func (c E2BConfig) Configured() bool { return c.APIKey.IsSet() }

// CFSandboxConfig is the managed-cf-sandbox executor (SPEC §4.5).
type CFSandboxConfig struct {
	Enabled bool          // GILF_CF_SANDBOX_ENABLED=1
	URL     string        // GILF_CF_SANDBOX_URL: the bridge Worker
	Token   Secret        // GILF_CF_SANDBOX_TOKEN
	Timeout time.Duration // GILF_CF_SANDBOX_TIMEOUT_MS
}

// Configured reports whether managed-cf-sandbox is enabled with its URL
// and token.
func (c CFSandboxConfig) Configured() bool { return c.Enabled && c.URL != "" && c.Token.IsSet() }

// Configured reports whether crabbox has what it needs to run.
func (c CrabboxConfig) Configured() bool { return c.Bin != "" && c.Coordinator != "" }

// loadServe reads the serve settings. Values that are set must be valid
// (an error each); settings serve cannot run without are checked by
// ServeConfig.App, so `gilf validate` does not need a GitHub App.
func loadServe(getenv func(string) string, errs []error) (ServeConfig, []error) {
	s := ServeConfig{
		Addr:     envOr(getenv, "GILF_ADDR", DefaultAddr),
		Workers:  DefaultWorkers,
		JobLease: DefaultJobLease,
		Shadow: ShadowConfig{
			Executor: strings.TrimSpace(getenv("GILF_VALIDATION_SHADOW_EXECUTOR")),
			Timeout:  executors.DefaultShadowTimeout,
		},
	}
	if err := checkAddr(s.Addr); err != nil {
		errs = append(errs, err)
	}
	s.GitHub, errs = loadGitHub(getenv, errs)
	errs = loadIntake(getenv, &s, errs)
	errs = millisOr(getenv, "GILF_JOB_LEASE_MS", &s.JobLease, errs)
	if s.JobLease < MinJobLease {
		errs = append(errs, fmt.Errorf("GILF_JOB_LEASE_MS=%q: want at least %d", getenv("GILF_JOB_LEASE_MS"), MinJobLease.Milliseconds()))
	}
	errs = millisOr(getenv, "GILF_VALIDATION_SHADOW_TIMEOUT_MS", &s.Shadow.Timeout, errs)
	s.SelfHost, errs = loadSelfHost(getenv, errs)
	s.Crabbox, errs = loadCrabbox(getenv, errs)
	if v := strings.TrimSpace(getenv("GILF_REDELIVERY_SWEEP_MS")); v != "0" {
		errs = millisOr(getenv, "GILF_REDELIVERY_SWEEP_MS", &s.RedeliverySweep, errs)
		if s.RedeliverySweep > 0 && s.RedeliverySweep < MinRedeliverySweep {
			errs = append(errs, fmt.Errorf("GILF_REDELIVERY_SWEEP_MS=%q: want 0 (off) or at least %d", v, MinRedeliverySweep.Milliseconds()))
		}
	}
	s.E2B, errs = loadE2B(getenv, errs)
	s.MinFreeBytes, errs = loadMinFree(getenv, errs)
	s.CFSandbox, errs = loadCFSandbox(getenv, errs)
	return s, errs
}

// loadGitHub reads the GitHub App's settings: its id, its key (from the
// environment or a file, not both), the API's URL and the hosts tarballs
// may be downloaded from.
func loadGitHub(getenv func(string) string, errs []error) (GitHubConfig, []error) {
	g := GitHubConfig{
		PrivateKey:     NewSecret(pemFromEnv(getenv("GILF_GITHUB_PRIVATE_KEY"))),
		PrivateKeyPath: strings.TrimSpace(getenv("GILF_GITHUB_PRIVATE_KEY_PATH")),
		WebhookSecret:  NewSecret(getenv("GILF_WEBHOOK_SECRET")),
		APIURL:         envOr(getenv, "GILF_GITHUB_API_URL", DefaultGitHubAPIURL),
	}
	if v := strings.TrimSpace(getenv("GILF_GITHUB_APP_ID")); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			errs = append(errs, fmt.Errorf("GILF_GITHUB_APP_ID=%q: want the App's positive numeric id", v))
		}
		g.AppID = id
	}
	if g.PrivateKey.IsSet() && g.PrivateKeyPath != "" {
		errs = append(errs, errors.New("GILF_GITHUB_PRIVATE_KEY and GILF_GITHUB_PRIVATE_KEY_PATH are both set: set one"))
	}
	if err := checkAPIURL(g.APIURL); err != nil {
		errs = append(errs, err)
	}
	var err error
	if g.DownloadHosts, err = downloadHosts(getenv("GILF_GITHUB_DOWNLOAD_HOSTS")); err != nil {
		errs = append(errs, err)
	}
	return g, errs
}

// loadIntake reads what intake and the workers take from whom: the
// worker count, drafts, the allow-list, the bad-signature limit and the
// trusted proxies.
func loadIntake(getenv func(string) string, s *ServeConfig, errs []error) []error {
	if v := strings.TrimSpace(getenv("GILF_WORKERS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxWorkers {
			errs = append(errs, fmt.Errorf("GILF_WORKERS=%q: want a number from 1 to %d", v, MaxWorkers))
		} else {
			s.Workers = n
		}
	}
	var err error
	if s.ReviewDrafts, err = flag01(getenv, "GILF_REVIEW_DRAFTS"); err != nil {
		errs = append(errs, err)
	}
	if s.Allow, err = allowlist(getenv("GILF_ALLOWED_ACCOUNTS"), getenv("GILF_ALLOWED_INSTALLATIONS")); err != nil {
		errs = append(errs, err)
	}
	s.BadSignatureLimit = webhook.DefaultBadSignatureLimit
	if v := strings.TrimSpace(getenv("GILF_BAD_SIGNATURE_LIMIT")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxBadSignatureLimit {
			errs = append(errs, fmt.Errorf("GILF_BAD_SIGNATURE_LIMIT=%q: want a number from 0 (off) to %d", v, MaxBadSignatureLimit))
		} else {
			s.BadSignatureLimit = n
		}
	}
	if s.TrustedProxies, err = trustedProxies(getenv("GILF_TRUSTED_PROXIES")); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// loadSelfHost reads the self-host command, its network, timeout and
// resources.
func loadSelfHost(getenv func(string) string, errs []error) (SelfHostConfig, []error) {
	c := SelfHostConfig{
		Command: strings.TrimSpace(getenv("GILF_SELF_HOST_COMMAND")),
		Network: validation.NetworkNone,
		Timeout: selfhost.DefaultTimeout,
	}
	errs = millisOr(getenv, "GILF_SELF_HOST_TIMEOUT_MS", &c.Timeout, errs)
	c.Resources, errs = selfHostResources(getenv, errs)
	if v := strings.TrimSpace(getenv(selfhost.NetworkEnv)); v != "" {
		switch n := validation.Network(strings.ToLower(v)); n {
		case validation.NetworkNone, validation.NetworkFull:
			c.Network = n
		default:
			errs = append(errs, fmt.Errorf("%s=%q: want %s or %s", selfhost.NetworkEnv, v, validation.NetworkNone, validation.NetworkFull))
		}
	}
	return c, errs
}

// loadCrabbox reads crabbox's settings: none, or the binary and the
// coordinator together.
func loadCrabbox(getenv func(string) string, errs []error) (CrabboxConfig, []error) {
	c := CrabboxConfig{
		Bin:         strings.TrimSpace(getenv("GILF_CRABBOX_BIN")),
		Coordinator: strings.TrimSpace(getenv("GILF_CRABBOX_COORDINATOR")),
		Token:       NewSecret(strings.TrimSpace(getenv("GILF_CRABBOX_TOKEN"))),
	}
	if (c.Bin != "" || c.Coordinator != "" || c.Token.IsSet()) && !c.Configured() {
		errs = append(errs, errors.New("crabbox is half configured: GILF_CRABBOX_BIN and GILF_CRABBOX_COORDINATOR must be set together (GILF_CRABBOX_TOKEN is optional)"))
	}
	return c, errs
}

// MaxE2BCPU and MaxE2BMemoryMB bound GILF_E2B_CPU and GILF_E2B_MEMORY_MB
// against typos.
const (
	MaxE2BCPU      = 64
	MaxE2BMemoryMB = 256 << 10
)

func loadE2B(getenv func(string) string, errs []error) (E2BConfig, []error) {
	c := E2BConfig{
		APIKey:   NewSecret(strings.TrimSpace(getenv("E2B_API_KEY"))),
		Template: strings.TrimSpace(getenv("GILF_E2B_TEMPLATE")),
		APIURL:   strings.TrimSpace(getenv("GILF_E2B_API_URL")),
		EnvdURL:  strings.TrimSpace(getenv("GILF_E2B_ENVD_URL")),
	}
	// Unset stays nil: the executor then allows its package manager's
	// default registries (an empty list would allow none).
	if hosts := strings.FieldsFunc(getenv("GILF_E2B_ALLOW_OUT"), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }); len(hosts) > 0 {
		c.AllowOut = hosts
	}
	errs = millisOr(getenv, "GILF_E2B_TIMEOUT_MS", &c.Timeout, errs)
	for _, n := range []struct {
		name string
		v    *int
		max  int
	}{{"GILF_E2B_CPU", &c.CPU, MaxE2BCPU}, {"GILF_E2B_MEMORY_MB", &c.MemoryMB, MaxE2BMemoryMB}} {
		v := strings.TrimSpace(getenv(n.name))
		if v == "" {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 || i > n.max {
			errs = append(errs, fmt.Errorf("%s=%q: want a number from 1 to %d", n.name, v, n.max))
			continue
		}
		*n.v = i
	}
	others := c.Template != "" || c.APIURL != "" || c.EnvdURL != "" || len(c.AllowOut) > 0 || c.Timeout > 0 || c.CPU > 0 || c.MemoryMB > 0
	if others && !c.Configured() {
		errs = append(errs, errors.New("managed-e2b is half configured: GILF_E2B_* settings are set but E2B_API_KEY is not"))
	}
	return c, errs
}

func loadCFSandbox(getenv func(string) string, errs []error) (CFSandboxConfig, []error) {
	c := CFSandboxConfig{
		URL:   strings.TrimSpace(getenv("GILF_CF_SANDBOX_URL")),
		Token: NewSecret(strings.TrimSpace(getenv("GILF_CF_SANDBOX_TOKEN"))),
	}
	var err error
	if c.Enabled, err = flag01(getenv, "GILF_CF_SANDBOX_ENABLED"); err != nil {
		errs = append(errs, err)
	}
	errs = millisOr(getenv, "GILF_CF_SANDBOX_TIMEOUT_MS", &c.Timeout, errs)
	if c.Enabled && !c.Configured() {
		errs = append(errs, errors.New("managed-cf-sandbox is enabled but GILF_CF_SANDBOX_URL and GILF_CF_SANDBOX_TOKEN are not both set"))
	}
	return c, errs
}

// millisOr sets *d from a millisecond setting when it is set.
func millisOr(getenv func(string) string, name string, d *time.Duration, errs []error) []error {
	v, err := millis(getenv, name)
	if err != nil {
		return append(errs, err)
	}
	if v > 0 {
		*d = v
	}
	return errs
}

// pemFromEnv accepts a PEM whose newlines were written as the two
// characters \n, as secret stores and .env files often hold them.
func pemFromEnv(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "\n") && strings.Contains(v, `\n`) {
		v = strings.ReplaceAll(v, `\n`, "\n")
	}
	return v
}

// checkAddr accepts host:port with a numeric port (0 picks a free one).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("GILF_ADDR=%q: want host:port or :port", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
		return fmt.Errorf("GILF_ADDR=%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

func checkAPIURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("GILF_GITHUB_API_URL=%q: want http(s)://host[/path]", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("GILF_GITHUB_API_URL=%q: no credentials, query or fragment allowed", u.Redacted())
	}
	return nil
}

// downloadHosts splits GILF_GITHUB_DOWNLOAD_HOSTS on commas and spaces;
// each entry is a bare host or host:port.
func downloadHosts(v string) ([]string, error) {
	fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	if len(fields) == 0 {
		return nil, nil
	}
	var errs []error
	for _, h := range fields {
		u, err := url.Parse("https://" + h)
		if err != nil || u.Host != h || u.Path != "" || u.User != nil || strings.ContainsAny(h, "/?#@") {
			errs = append(errs, fmt.Errorf("GILF_GITHUB_DOWNLOAD_HOSTS entry %q: want host or host:port", h))
		}
	}
	return fields, errors.Join(errs...)
}

// AppCredentials are the GitHub App settings serve cannot start without,
// checked and parsed.
type AppCredentials struct {
	AppID         int64
	PrivateKey    *rsa.PrivateKey
	WebhookSecret []byte
	// KeyPEM is the key as read, to withhold and redact like any other
	// worker secret.
	KeyPEM string
}

// App checks that the GitHub App is fully configured and parses its key,
// reporting every problem at once. readFile reads
// GILF_GITHUB_PRIVATE_KEY_PATH (os.ReadFile in production).
func (s ServeConfig) App(readFile func(string) ([]byte, error)) (AppCredentials, error) {
	var errs []error
	g := s.GitHub
	a := AppCredentials{AppID: g.AppID, WebhookSecret: []byte(g.WebhookSecret.Reveal())}
	if g.AppID == 0 {
		errs = append(errs, errors.New("GILF_GITHUB_APP_ID is required by gilf serve"))
	}
	if !g.WebhookSecret.IsSet() {
		errs = append(errs, errors.New("GILF_WEBHOOK_SECRET is required by gilf serve: deliveries cannot be verified without it"))
	}
	switch {
	case g.PrivateKey.IsSet() && g.PrivateKeyPath != "":
		// Reported by loadServe.
	case g.PrivateKey.IsSet():
		a.KeyPEM = g.PrivateKey.Reveal()
	case g.PrivateKeyPath != "":
		b, err := readFile(g.PrivateKeyPath)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("GILF_GITHUB_PRIVATE_KEY_PATH: %w", err))
		case len(b) > MaxPrivateKeyBytes:
			errs = append(errs, fmt.Errorf("GILF_GITHUB_PRIVATE_KEY_PATH=%q: %d bytes is over the %d-byte limit of a PEM key", g.PrivateKeyPath, len(b), MaxPrivateKeyBytes))
		default:
			a.KeyPEM = strings.TrimSpace(string(b))
		}
	default:
		errs = append(errs, errors.New("GILF_GITHUB_PRIVATE_KEY or GILF_GITHUB_PRIVATE_KEY_PATH is required by gilf serve"))
	}
	if a.KeyPEM != "" {
		k, err := github.ParsePrivateKey([]byte(a.KeyPEM))
		if err != nil {
			// The parse error never quotes the key; the source is named.
			from := "GILF_GITHUB_PRIVATE_KEY"
			if g.PrivateKeyPath != "" {
				from = fmt.Sprintf("GILF_GITHUB_PRIVATE_KEY_PATH=%q", g.PrivateKeyPath)
			}
			errs = append(errs, fmt.Errorf("%s: not a GitHub App private key: %w", from, err))
		}
		a.PrivateKey = k
	}
	return a, errors.Join(errs...)
}

// allowlist parses GILF_ALLOWED_ACCOUNTS and GILF_ALLOWED_INSTALLATIONS.
func allowlist(accounts, installations string) (webhook.Allowlist, error) {
	var a webhook.Allowlist
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	}
	for _, acc := range split(accounts) {
		for _, r := range acc {
			if !(r == '-' || r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
				return a, fmt.Errorf("GILF_ALLOWED_ACCOUNTS: %q is not a GitHub login", acc)
			}
		}
		a.Accounts = append(a.Accounts, acc)
	}
	for _, v := range split(installations) {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return a, fmt.Errorf("GILF_ALLOWED_INSTALLATIONS: %q is not an installation id", v)
		}
		a.Installations = append(a.Installations, id)
	}
	return a, nil
}

// MaxBadSignatureLimit bounds GILF_BAD_SIGNATURE_LIMIT: past it the guard
// would limit nothing a typo did not mean.
const MaxBadSignatureLimit = 1_000_000

// trustedProxies parses GILF_TRUSTED_PROXIES: CIDRs or single addresses,
// comma or space separated; every bad entry is reported at once.
func trustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil && a.Zone() == "" {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		errs = append(errs, fmt.Errorf("GILF_TRUSTED_PROXIES: %q is not a CIDR or an IP address", f))
	}
	return out, errors.Join(errs...)
}
