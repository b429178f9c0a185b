package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/internal/logkey"
)

// Checkout downloads the tarball of sha (GET /repos/{o}/{r}/tarball/{sha})
// and extracts it safely under dst with archive.Extract, returning the
// repository root (GitHub's `{owner}-{repo}-{sha}/`).
//
// The API answers with a redirect to codeload whose URL carries a
// short-lived credential: it is followed only to the API host or a
// Config.DownloadHosts host, never logged, never put in an error. The
// body is capped by Config.Archive.MaxCompressedBytes whatever its
// Content-Length says.
func (c *Client) Checkout(ctx context.Context, r Repo, sha, dst string) (root string, err error) {
	if sha == "" || strings.ContainsAny(sha, "/?#%") {
		return "", fmt.Errorf("checkout: invalid sha %q: %w", sha, ErrInvalidInput)
	}
	g, err := c.forRepo(r)
	if err != nil {
		return "", err
	}
	var body io.ReadCloser
	err = c.call(ctx, "download tarball", func(ctx context.Context) (*gh.Response, error) {
		var err error
		body, err = c.openTarball(ctx, g, r, sha)
		return nil, err
	})
	if err != nil {
		return "", fmt.Errorf("%s tarball %s: %w", r, sha, err)
	}
	defer body.Close()
	root, err = archive.Extract(ctx, body, dst, c.cfg.Archive)
	if err != nil {
		if errors.Is(err, archive.ErrCorrupt) || isNetwork(err) {
			// A cut connection looks like a truncated archive: fetch
			// again later, never run a partial tree.
			return "", &TransientError{Op: "extract tarball", Err: err}
		}
		return "", fmt.Errorf("%s tarball %s: %w", r, sha, err)
	}
	return root, nil
}

// openTarball makes the request and follows allowed redirects by hand,
// returning the archive body. Errors never carry a redirect URL.
func (c *Client) openTarball(ctx context.Context, g *gh.Client, r Repo, sha string) (io.ReadCloser, error) {
	req, err := g.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/tarball/%s", url.PathEscape(r.Owner), url.PathEscape(r.Name), url.PathEscape(sha)), nil)
	if err != nil {
		return nil, err
	}
	req = req.WithContext(ctx)
	hc := &http.Client{
		Transport: c.limited(r.InstallationID, &installationTransport{c: c, repo: r}),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	for hop := 0; ; hop++ {
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("get tarball from %s: %w", req.URL.Host, scrubURL(err))
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			if limit := c.archiveLimits().MaxCompressedBytes; resp.ContentLength > limit {
				drain(resp)
				return nil, fmt.Errorf("tarball is %d bytes, over %d: %w", resp.ContentLength, limit, ErrTooLarge)
			}
			return resp.Body, nil
		case isRedirect(resp.StatusCode):
			loc, err := resp.Location()
			drain(resp)
			if err != nil {
				return nil, fmt.Errorf("tarball redirect without a usable location: %w", scrubURL(err))
			}
			if hop >= maxDownloadRedirects {
				return nil, fmt.Errorf("tarball: more than %d redirects: %w", maxDownloadRedirects, ErrRedirectRefused)
			}
			if !c.allowedDownload(loc) {
				c.log.Warn("tarball redirect refused", logkey.Repo, r.String(), logkey.Host, loc.Host)
				return nil, fmt.Errorf("redirect to %q: %w", loc.Host, ErrRedirectRefused)
			}
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
			if err != nil {
				return nil, fmt.Errorf("tarball redirect: %w", scrubURL(err))
			}
		default:
			// go-github's typed error (5xx retried, rate limits waited),
			// printed without the redirect URL's query.
			resp.Request = scrubRequest(resp.Request)
			err := gh.CheckResponse(resp)
			resp.Body.Close()
			if err == nil {
				err = fmt.Errorf("unexpected status %d", resp.StatusCode)
			}
			return nil, err
		}
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// allowedDownload accepts https redirects to allowed hosts, or the API's
// own scheme and host (http only when the API itself is http, as in a
// local test or a plain-http GHES).
func (c *Client) allowedDownload(u *url.URL) bool {
	if u.User != nil {
		return false
	}
	host := strings.ToLower(u.Host)
	switch {
	case u.Scheme == c.base.Scheme && host == c.base.Host:
		return true
	case !c.allowed[host]:
		return false
	case u.Scheme == "https":
		return true
	default:
		return u.Scheme == "http" && c.base.Scheme == "http"
	}
}

func (c *Client) archiveLimits() archive.Limits {
	return c.cfg.Archive.WithDefaults()
}

// scrubURL drops the URL a *url.Error carries (a redirect URL holds a
// credential) and keeps the cause.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// scrubRequest returns req without its query string (where a redirect
// URL carries its credential), for errors that print the URL.
func scrubRequest(req *http.Request) *http.Request {
	if req == nil {
		return nil
	}
	u := *req.URL
	u.RawQuery = ""
	u.User = nil
	r := req.Clone(req.Context())
	r.URL = &u
	return r
}
