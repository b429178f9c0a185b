package github

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/internal/logkey"
)

// App JWT timing (GitHub: iat may be backdated, exp at most 10 minutes
// ahead).
const (
	jwtBackdate = 60 * time.Second
	jwtLifetime = 9 * time.Minute
)

// Permissions requested for every installation token: read the code and
// pull request, write the review and the check run. Nothing else.
const (
	permContents     = "read"
	permMetadata     = "read"
	permPullRequests = "write"
	permChecks       = "write"
)

// ParsePrivateKey reads a GitHub App private key (PKCS#1 "RSA PRIVATE KEY"
// as GitHub issues them, or PKCS#8). Its errors say what is wrong with the
// bytes, never quote them, and leave naming where they came from to the
// caller.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("no PEM block (want the whole .pem file GitHub generated for the App: an RSA PRIVATE KEY block)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("a %q PEM block that is not an RSA private key: %w", block.Type, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an RSA key", k)
	}
	return rk, nil
}

// secret is a credential. It prints as [redacted] in every format and log.
type secret struct{ v string }

func (secret) String() string               { return "[redacted]" }
func (secret) GoString() string             { return "[redacted]" }
func (secret) LogValue() slog.Value         { return slog.StringValue("[redacted]") }
func (secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

type tokenKey struct {
	installation int64
	repo         string // owner/name, lower case
}

func keyFor(r Repo) tokenKey {
	return tokenKey{installation: r.InstallationID, repo: strings.ToLower(r.String())}
}

type cachedToken struct {
	tok     secret
	expires time.Time
}

// appJWT signs a fresh App JWT.
func (c *Client) appJWT() (secret, error) {
	now := c.clock.Now()
	claims := jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now.Add(-jwtBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
		Issuer:    strconv.FormatInt(c.cfg.AppID, 10),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(c.cfg.PrivateKey)
	if err != nil {
		return secret{}, fmt.Errorf("sign app jwt: %w", err)
	}
	return secret{s}, nil
}

// token returns a valid installation token for r, minting one when none
// is cached, the cached one is within the refresh margin of expiry, or it
// equals stale (the one a 401 just rejected).
func (c *Client) token(ctx context.Context, r Repo, stale *secret) (secret, error) {
	k := keyFor(r)
	if t, ok := c.cached(k, stale); ok {
		return t, nil
	}
	mu := c.mintLock(k)
	mu.Lock()
	defer mu.Unlock()
	if t, ok := c.cached(k, stale); ok { // minted while we waited
		return t, nil
	}
	var tok *gh.InstallationToken
	err := c.call(ctx, "mint installation token", func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		tok, resp, err = c.appClient.Apps.CreateInstallationToken(ctx, r.InstallationID, &gh.InstallationTokenOptions{
			Repositories: []string{r.Name},
			Permissions: &gh.InstallationPermissions{
				Contents:     gh.Ptr(permContents),
				Metadata:     gh.Ptr(permMetadata),
				PullRequests: gh.Ptr(permPullRequests),
				Checks:       gh.Ptr(permChecks),
			},
		})
		return resp, err
	})
	if err != nil {
		return secret{}, fmt.Errorf("installation %d: %w", r.InstallationID, err)
	}
	if tok.GetToken() == "" {
		return secret{}, fmt.Errorf("installation %d: empty installation token", r.InstallationID)
	}
	ct := &cachedToken{tok: secret{tok.GetToken()}, expires: tok.GetExpiresAt().Time}
	c.mu.Lock()
	c.tokens[k] = ct
	c.mu.Unlock()
	c.log.Debug("minted installation token", logkey.InstallationID, r.InstallationID, logkey.Repo, r.String(), "expires_at", ct.expires)
	return ct.tok, nil
}

// mintLock is the lock that serializes k's mints (one installation's
// mint never waits for another's).
func (c *Client) mintLock(k tokenKey) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mints[k]
	if m == nil {
		m = new(sync.Mutex)
		c.mints[k] = m
	}
	return m
}

func (c *Client) cached(k tokenKey, stale *secret) (secret, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tokens[k]
	if !ok || (stale != nil && t.tok.v == stale.v) {
		return secret{}, false
	}
	if !c.clock.Now().Add(c.cfg.TokenRefreshMargin).Before(t.expires) {
		return secret{}, false
	}
	return t.tok, true
}

// forRepo returns the go-github client that authenticates as r's
// installation.
func (c *Client) forRepo(r Repo) (*gh.Client, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	k := keyFor(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.clients[k]; ok {
		return g, nil
	}
	g := c.newGitHub(c.limited(r.InstallationID, &installationTransport{c: c, repo: r}))
	c.clients[k] = g
	return g, nil
}

// jwtTransport authenticates App-level calls (minting tokens).
type jwtTransport struct{ c *Client }

func (t *jwtTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	j, err := t.c.appJWT()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+j.v)
	return t.c.transport.RoundTrip(r)
}

// installationTransport adds the installation token to requests for the
// API host only (never to a redirect elsewhere), and on a 401 mints a new
// token and retries the request once.
type installationTransport struct {
	c    *Client
	repo Repo
}

func (t *installationTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.c.isAPIHost(req) {
		return t.c.transport.RoundTrip(req)
	}
	tok, err := t.c.token(req.Context(), t.repo, nil)
	if err != nil {
		return nil, err
	}
	resp, err := t.send(req, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // cannot replay the body
	}
	drain(resp)
	t.c.log.Info("installation token rejected; minting a new one", logkey.InstallationID, t.repo.InstallationID, logkey.Repo, t.repo.String())
	tok, err = t.c.token(req.Context(), t.repo, &tok)
	if err != nil {
		return nil, err
	}
	r := req
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("replay request body: %w", err)
		}
		r = req.Clone(req.Context())
		r.Body = body
	}
	return t.send(r, tok)
}

func (t *installationTransport) send(req *http.Request, tok secret) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok.v)
	return t.c.transport.RoundTrip(r)
}

func (c *Client) isAPIHost(req *http.Request) bool {
	return req.URL.Scheme == c.base.Scheme && strings.EqualFold(req.URL.Host, c.base.Host)
}

// drain reads a little of an unwanted body so the connection can be
// reused, then closes it.
func drain(resp *http.Response) {
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)); err != nil {
		resp.Body.Close()
		return
	}
	resp.Body.Close()
}
