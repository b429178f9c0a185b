package github

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/review/github/githubtest"
)

func TestCheckout(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	dst := t.TempDir()
	root, err := e.c.Checkout(context.Background(), e.repo, "6dcb09b5b57875f334f61aebed695e2e4193db5e", dst)
	if err != nil {
		t.Fatalf("Checkout: %v", err)
	}
	if want := filepath.Join(dst, "octokit-fixture-org-get-archive-0000000"); root != want {
		t.Errorf("root = %q, want %q", root, want)
	}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err != nil {
		t.Errorf("README.md: %v", err)
	}
	reqs := e.srv.Requests()
	if diff := cmp.Diff([]string{
		"GET /repos/octocat/Hello-World/tarball/6dcb09b5b57875f334f61aebed695e2e4193db5e",
		"GET /octocat/Hello-World/legacy.tar.gz/6dcb09b5b57875f334f61aebed695e2e4193db5e",
	}, calls(reqs, githubtest.Tarball, githubtest.Codeload)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	for _, r := range reqs {
		if r.Endpoint == githubtest.Codeload && r.Auth != "none" {
			t.Errorf("codeload got credentials: %s", r.Auth)
		}
	}
}

// TestCheckoutRedirectRefused: a Location on a host that is not allowed is
// never contacted, and the error does not quote its credential.
func TestCheckoutRedirectRefused(t *testing.T) {
	var evilHits atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { evilHits.Add(1) }))
	t.Cleanup(evil.Close)
	tests := []struct {
		name     string
		location string
	}{
		{name: "foreign host", location: evil.URL + "/x.tar.gz?token=SECRETCRED"},
		{name: "allowed host over another port", location: "http://localhost:1/x?token=SECRETCRED"},
		{name: "userinfo", location: "http://user:SECRETCRED@" + strings.TrimPrefix(evil.URL, "http://") + "/x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			e.srv.RedirectTarball(tc.location)
			dst := filepath.Join(t.TempDir(), "dst")
			_, err := e.c.Checkout(context.Background(), e.repo, "abc", dst)
			if !errors.Is(err, ErrRedirectRefused) {
				t.Fatalf("error = %v, want ErrRedirectRefused", err)
			}
			if strings.Contains(err.Error(), "SECRETCRED") || strings.Contains(e.logs.String(), "SECRETCRED") {
				t.Errorf("credential leaked: err=%q logs=%q", err, e.logs.String())
			}
			if _, statErr := os.Stat(dst); !os.IsNotExist(statErr) {
				t.Errorf("dst created: %v", statErr)
			}
		})
	}
	if n := evilHits.Load(); n != 0 {
		t.Errorf("foreign host received %d requests", n)
	}
}

func TestCheckoutSizeCap(t *testing.T) {
	var raw bytes.Buffer
	zw := gzip.NewWriter(&raw)
	tw := tar.NewWriter(zw)
	body := bytes.Repeat([]byte("incompressible? no, but big enough "), 4000)
	for _, h := range []*tar.Header{{Name: "o-r-sha/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "o-r-sha/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	size := int64(raw.Len())
	for _, tc := range []struct {
		name string
		max  int64
		want error
	}{
		{name: "exactly at the cap", max: size},
		{name: "one over the cap", max: size - 1, want: ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{Tarball: raw.Bytes()}, func(c *Config) { c.Archive = archive.Limits{MaxCompressedBytes: tc.max} })
			_, err := e.c.Checkout(context.Background(), e.repo, "sha", t.TempDir())
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestCheckoutCapWithoutContentLength: a body that does not announce its
// length (or lies) is still cut at the cap by the extractor.
func TestCheckoutCapWithoutContentLength(t *testing.T) {
	tarball, err := os.ReadFile(filepath.Join(testDataRepos(t), "steno.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	chunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(tarball); i += 512 {
			if _, err := w.Write(tarball[i:min(i+512, len(tarball))]); err != nil {
				return
			}
			w.(http.Flusher).Flush() // chunked: no Content-Length
		}
	}))
	t.Cleanup(chunked.Close)
	e := newEnv(t, githubtest.Options{}, func(c *Config) {
		c.DownloadHosts = []string{strings.TrimPrefix(chunked.URL, "http://")}
		c.Archive = archive.Limits{MaxCompressedBytes: int64(len(tarball)) - 1}
	})
	e.srv.RedirectTarball(chunked.URL + "/steno.tar.gz")
	_, err = e.c.Checkout(context.Background(), e.repo, "sha", filepath.Join(t.TempDir(), "d"))
	if !errors.Is(err, archive.ErrLimit) {
		t.Fatalf("error = %v, want archive.ErrLimit", err)
	}
}

func TestCheckoutRetriesCodeload502(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	e.srv.Fail(githubtest.Codeload, githubtest.Fault{Kind: githubtest.Status, Status: http.StatusBadGateway, Times: 2})
	if _, err := e.c.Checkout(context.Background(), e.repo, "sha", t.TempDir()); err != nil {
		t.Fatalf("Checkout: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second}, e.clock.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
	if n := e.srv.Count(githubtest.Tarball); n != 3 {
		t.Errorf("%d tarball requests, want 3 (a fresh redirect each time)", n)
	}
}

func TestCheckoutCorruptIsTransient(t *testing.T) {
	tarball, err := os.ReadFile(filepath.Join(testDataRepos(t), "kleur.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, githubtest.Options{Tarball: tarball[:len(tarball)/2]}, nil)
	dst := filepath.Join(t.TempDir(), "d")
	_, err = e.c.Checkout(context.Background(), e.repo, "sha", dst)
	var te *TransientError
	if !errors.As(err, &te) || !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("error = %v, want a *TransientError wrapping archive.ErrCorrupt", err)
	}
	if _, statErr := os.Stat(dst); !os.IsNotExist(statErr) {
		t.Errorf("partial tree left: %v", statErr)
	}
}
