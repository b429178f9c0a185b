// Package github is everything gilf says to GitHub: App authentication
// (JWT → installation token scoped to one repository), reading a pull
// request, its changed files and base-branch files, downloading and safely
// extracting the head tarball, driving the job's check run (started,
// updated, completed with batched annotations) and keeping one summary
// review per pull request edited in place, all idempotently. It is built on go-github, whose typed errors decide
// retries and rate-limit waits.
//
// Every call goes through Config.BaseURL, so gilf works against GitHub
// Enterprise Server as well as api.github.com. Installation tokens never
// leave this package except as an Authorization header.
package github

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/archive"
)

// Named defaults. A zero field in Config takes its default.
const (
	// DefaultBaseURL is api.github.com.
	DefaultBaseURL = "https://api.github.com/"
	// DefaultDownloadHost is where api.github.com redirects tarball
	// downloads.
	DefaultDownloadHost = "codeload.github.com"
	// DefaultCheckName names the check run.
	DefaultCheckName = "gilf"
	// DefaultTokenRefreshMargin: a cached installation token is replaced
	// this long before its expires_at.
	DefaultTokenRefreshMargin = 5 * time.Minute
	// DefaultRetryAttempts bounds the attempts of one call on 5xx,
	// network errors and rate limits (the first attempt included).
	DefaultRetryAttempts = 4
	// DefaultRetryBaseDelay is the first backoff after a 5xx or network
	// error; it doubles per attempt up to DefaultRetryMaxDelay.
	DefaultRetryBaseDelay = time.Second
	// DefaultRetryMaxDelay caps one backoff.
	DefaultRetryMaxDelay = 30 * time.Second
	// DefaultSecondaryRateLimitWait is the least wait after a secondary
	// rate limit that carries no Retry-After; it doubles each time.
	DefaultSecondaryRateLimitWait = 60 * time.Second
	// DefaultMaxWait: a single wait longer than this is not slept; the
	// call returns a *TransientError so the job is rescheduled instead of
	// holding a worker.
	DefaultMaxWait = 5 * time.Minute
	// DefaultMaxChangedFiles caps the changed-file listing (GitHub itself
	// lists at most 3000 files).
	DefaultMaxChangedFiles = 3000
	// DefaultMaxBaseFileBytes caps a base-branch file read (config,
	// .gitattributes). Above 1 MB the Contents API answers without the
	// content and the raw media type is used, up to this cap.
	DefaultMaxBaseFileBytes int64 = 2 << 20
	// DefaultRequestTimeout bounds one HTTP exchange with the API (not
	// the tarball body, which is bounded by the archive limits and ctx).
	DefaultRequestTimeout = 60 * time.Second
)

// Limits of what GitHub accepts, applied before posting.
const (
	// MaxReviewBodyBytes: GitHub rejects a review body over 65 536
	// characters; bytes are counted, which is never fewer than UTF-16
	// code units.
	MaxReviewBodyBytes = 65536
	// MaxCheckSummaryBytes: check-run output.summary is at most 65 535
	// characters.
	MaxCheckSummaryBytes = 65535
	// MaxCheckTitleBytes keeps the check-run title to one short line.
	MaxCheckTitleBytes = 1024
	// maxDownloadRedirects bounds the redirects of a tarball download.
	maxDownloadRedirects = 3
)

// Clock tells the time and waits. Tests inject a fake so no test sleeps.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done, returning ctx.Err() then.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retry tunes the retry loop. Zero fields take their defaults.
type Retry struct {
	Attempts           int
	BaseDelay          time.Duration
	MaxDelay           time.Duration
	SecondaryRateLimit time.Duration
	MaxWait            time.Duration
}

// Config configures a Client. AppID and PrivateKey are required.
type Config struct {
	AppID      int64
	PrivateKey *rsa.PrivateKey
	// BaseURL is the REST API root (GILF_GITHUB_API_URL): empty for
	// api.github.com, or a GitHub Enterprise Server URL with or without
	// /api/v3/.
	BaseURL string
	// DownloadHosts are the hosts (host or host:port) a tarball redirect
	// may lead to, besides the API host itself. Nil means
	// codeload.github.com.
	DownloadHosts []string
	// Transport carries every request; nil means http.DefaultTransport.
	Transport http.RoundTripper
	Logger    *slog.Logger
	Clock     Clock
	Retry     Retry
	// CheckName names the check run (default "gilf").
	CheckName string
	// BotLogin is the App's bot account ("<app-slug>[bot]"). Only its
	// reviews count when looking for an earlier post; empty means any
	// account of type Bot.
	BotLogin           string
	TokenRefreshMargin time.Duration
	MaxChangedFiles    int
	MaxBaseFileBytes   int64
	RequestTimeout     time.Duration
	// Archive bounds the tarball download and its extraction.
	Archive archive.Limits
	// RateLimitRemaining, when set, is called with the
	// X-RateLimit-Remaining of every API answer that carries one (any
	// token's: the App's or an installation's); see ratelimit.go.
	RateLimitRemaining func(remaining int)
}

// Client talks to one GitHub (or GHES) instance as one GitHub App. It is
// safe for concurrent use.
type Client struct {
	cfg       Config
	log       *slog.Logger
	clock     Clock
	base      *url.URL
	transport http.RoundTripper
	appClient *gh.Client
	allowed   map[string]bool // download hosts
	limits    *limiter        // GitHub's rate limits, per installation

	mu      sync.Mutex
	tokens  map[tokenKey]*cachedToken
	clients map[tokenKey]*gh.Client
	mints   map[tokenKey]*sync.Mutex // serialize one repository's mints so concurrent calls share one
}

// Repo names a repository of an installation. Every call is made with a
// token scoped to this one repository.
type Repo struct {
	InstallationID int64
	Owner          string
	Name           string
}

func (r Repo) String() string { return r.Owner + "/" + r.Name }

func (r Repo) validate() error {
	if r.InstallationID <= 0 {
		return ErrNoInstallation
	}
	if r.Owner == "" || r.Name == "" || strings.ContainsAny(r.Owner+r.Name, "/?#%") || r.Owner == ".." || r.Name == ".." {
		return fmt.Errorf("invalid repository name %q", r.String())
	}
	return nil
}

// New builds a Client. It checks the configuration but makes no request.
func New(cfg Config) (*Client, error) {
	var errs []error
	if cfg.AppID <= 0 {
		errs = append(errs, errors.New("github app id is required"))
	}
	if cfg.PrivateKey == nil {
		errs = append(errs, errors.New("github app private key is required"))
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := baseURL(cfg.BaseURL)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg = withDefaults(cfg)
	c := &Client{
		cfg:       cfg,
		log:       cfg.Logger,
		clock:     cfg.Clock,
		base:      base,
		transport: cfg.Transport,
		allowed:   map[string]bool{base.Host: true},
		tokens:    make(map[tokenKey]*cachedToken),
		clients:   make(map[tokenKey]*gh.Client),
		mints:     make(map[tokenKey]*sync.Mutex),
		limits:    newLimiter(cfg.Clock, cfg.Retry.SecondaryRateLimit),
	}
	for _, h := range cfg.DownloadHosts {
		c.allowed[strings.ToLower(h)] = true
	}
	if cfg.RateLimitRemaining != nil {
		c.transport = rateLimitObserver{next: c.transport, observe: cfg.RateLimitRemaining}
	}
	c.appClient = c.newGitHub(c.limited(appLimitKey, &jwtTransport{c: c}))
	return c, nil
}

func withDefaults(cfg Config) Config {
	if cfg.DownloadHosts == nil {
		cfg.DownloadHosts = []string{DefaultDownloadHost}
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.CheckName == "" {
		cfg.CheckName = DefaultCheckName
	}
	if cfg.TokenRefreshMargin <= 0 {
		cfg.TokenRefreshMargin = DefaultTokenRefreshMargin
	}
	if cfg.MaxChangedFiles <= 0 {
		cfg.MaxChangedFiles = DefaultMaxChangedFiles
	}
	if cfg.MaxBaseFileBytes <= 0 {
		cfg.MaxBaseFileBytes = DefaultMaxBaseFileBytes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	r := &cfg.Retry
	if r.Attempts <= 0 {
		r.Attempts = DefaultRetryAttempts
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = DefaultRetryBaseDelay
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = DefaultRetryMaxDelay
	}
	if r.SecondaryRateLimit <= 0 {
		r.SecondaryRateLimit = DefaultSecondaryRateLimitWait
	}
	if r.MaxWait <= 0 {
		r.MaxWait = DefaultMaxWait
	}
	return cfg
}

// baseURL normalizes the API root: a trailing slash always; a GHES host
// given without a path gets /api/v3/ (api.github.com-style hosts do not).
func baseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("github base url %q: want http(s)://host[/path]", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("github base url %q: no credentials, query or fragment allowed", u.Redacted())
	}
	u.Host = strings.ToLower(u.Host)
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	if u.Path == "/" && !strings.HasPrefix(u.Hostname(), "api.") {
		u.Path = "/api/v3/"
	}
	return u, nil
}

// limited puts rt's requests under the rate limit of key (an
// installation, or appLimitKey).
func (c *Client) limited(key int64, rt http.RoundTripper) http.RoundTripper {
	return limitTransport{l: c.limits, key: key, c: c, next: rt}
}

// newGitHub builds a go-github client over rt, rooted at the base URL.
// go-github's own rate-limit bookkeeping is off: it uses the wall clock
// and would answer locally; the retry loop handles limits with c.clock.
func (c *Client) newGitHub(rt http.RoundTripper) *gh.Client {
	g := gh.NewClient(&http.Client{Transport: rt, Timeout: c.cfg.RequestTimeout})
	g.BaseURL = c.base
	upload := *c.base
	g.UploadURL = &upload
	g.UserAgent = "gilf"
	g.DisableRateLimitCheck = true
	return g
}
