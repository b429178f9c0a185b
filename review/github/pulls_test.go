package github

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/validation"
)

func TestPullRequest(t *testing.T) {
	e := newEnv(t, githubtest.Options{Labels: []string{"bug", "gilf"}, Author: "mona", Draft: true}, nil)
	pr, err := e.c.PullRequest(context.Background(), e.repo, 1347)
	if err != nil {
		t.Fatalf("PullRequest: %v", err)
	}
	want := PullRequest{
		Number: 1347, Title: "Amazing new feature", Body: "Please pull these awesome changes in!", State: "open", HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", HeadRef: "new-topic",
		HeadRepo: "octocat/Hello-World", BaseRef: "master", BaseSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", CloneURL: "https://github.com/octocat/Hello-World.git",
		Draft: true, Author: "mona", Labels: []string{"bug", "gilf"}, Mergeable: pr.Mergeable,
	}
	if diff := cmp.Diff(want, pr); diff != "" {
		t.Errorf("PullRequest (-want +got):\n%s", diff)
	}
	reqs := e.srv.Requests()
	if diff := cmp.Diff([]string{
		"POST /app/installations/1/access_tokens",
		"GET /repos/octocat/Hello-World/pulls/1347",
	}, calls(reqs, githubtest.CreateToken, githubtest.GetPull)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	mint := reqs[0]
	if mint.Auth != "jwt" { // RS256 with the test key, iss = the app id
		t.Errorf("token mint auth = %q, want a valid App JWT", mint.Auth)
	}
	wantBody := map[string]any{
		"repositories": []any{"Hello-World"},
		"permissions":  map[string]any{"contents": "read", "metadata": "read", "pull_requests": "write", "checks": "write"},
	}
	if diff := cmp.Diff(wantBody, mint.Body); diff != "" {
		t.Errorf("token request body (-want +got):\n%s", diff)
	}
	if reqs[1].Auth != "token" {
		t.Errorf("pull request call auth = %q, want the installation token", reqs[1].Auth)
	}
	iat, exp := e.srv.LastJWT()
	now := e.clock.Now()
	if !iat.Equal(now.Add(-60*time.Second)) || exp.Sub(now) > 10*time.Minute || exp.Sub(now) < 5*time.Minute {
		t.Errorf("JWT iat %v exp %v for now %v: want iat 60 s back, exp within 10 min", iat, exp, now)
	}
}

func TestPullRequestHeadRepoMissing(t *testing.T) {
	e := newEnv(t, githubtest.Options{HeadRepoMissing: true}, nil)
	_, err := e.c.PullRequest(context.Background(), e.repo, 1347)
	if !errors.Is(err, ErrHeadRepoMissing) {
		t.Fatalf("error = %v, want ErrHeadRepoMissing", err)
	}
	var hm *HeadRepoMissingError
	if !errors.As(err, &hm) {
		t.Fatalf("error %T is not *HeadRepoMissingError", err)
	}
	if hm.PR.HeadSHA != "6dcb09b5b57875f334f61aebed695e2e4193db5e" || hm.PR.BaseRef != "master" || !hm.PR.HeadRepoGone {
		t.Errorf("PR carried by the error = %+v", hm.PR)
	}
	if got := hm.Refusal().Code; got != validation.CodeHeadRepositoryMissing {
		t.Errorf("refusal code = %q", got)
	}
	sha, err := e.c.HeadSHA(context.Background(), e.repo, 1347)
	if err != nil || sha != hm.PR.HeadSHA {
		t.Errorf("HeadSHA = %q, %v", sha, err)
	}
}

func TestPullRequestNoInstallation(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	_, err := e.c.PullRequest(context.Background(), Repo{Owner: "octocat", Name: "Hello-World"}, 1347)
	if !errors.Is(err, ErrNoInstallation) {
		t.Fatalf("error = %v, want ErrNoInstallation", err)
	}
	if n := len(e.srv.Requests()); n != 0 {
		t.Errorf("%d requests sent without an installation", n)
	}
}

func TestChangedFiles(t *testing.T) {
	names := make([]string, 250)
	for i := range names {
		names[i] = "src/f" + strconv.Itoa(i) + ".js"
	}
	tests := []struct {
		name      string
		max       int
		files     []string
		wantN     int
		truncated bool
		wantPages int
	}{
		{name: "real example", files: nil, wantN: 1, wantPages: 1},
		{name: "three pages", files: names, wantN: 250, wantPages: 3},
		{name: "exactly at the cap", files: names, max: 250, wantN: 250, wantPages: 3},
		{name: "one over the cap", files: names, max: 249, wantN: 249, truncated: true, wantPages: 3},
		{name: "cap on a page boundary", files: names, max: 200, wantN: 200, truncated: true, wantPages: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{Files: tc.files}, func(c *Config) { c.MaxChangedFiles = tc.max })
			got, err := e.c.ChangedFiles(context.Background(), e.repo, 1347)
			if err != nil {
				t.Fatalf("ChangedFiles: %v", err)
			}
			if len(got.Files) != tc.wantN || got.Truncated != tc.truncated {
				t.Errorf("got %d files truncated=%v, want %d truncated=%v", len(got.Files), got.Truncated, tc.wantN, tc.truncated)
			}
			if tc.files == nil && got.Files[0] != (ChangedFile{Name: "file1.txt", Status: "added", Patch: "@@ -132,7 +132,7 @@ module Test @@ -1000,7 +1000,7 @@ module Test"}) {
				t.Errorf("first file = %+v", got.Files[0])
			}
			if tc.files != nil && got.Files[len(got.Files)-1].Name != names[tc.wantN-1] {
				t.Errorf("last file = %q", got.Files[len(got.Files)-1].Name)
			}
			if n := e.srv.Count(githubtest.ListFiles); n != tc.wantPages {
				t.Errorf("%d list requests, want %d", n, tc.wantPages)
			}
		})
	}
}

func TestBaseFile(t *testing.T) {
	cfg := []byte("validation:\n  provider: local\n")
	big := bytes.Repeat([]byte("# padding line for a config over one megabyte\n"), 25_000) // 1.15 MB
	e := newEnv(t, githubtest.Options{BaseRef: "main", BaseFiles: map[string][]byte{
		".github/gilf.yml": cfg,
		"big.yml":          big,
		"empty":            {},
	}}, func(c *Config) { c.MaxBaseFileBytes = int64(len(big)) })
	ctx := context.Background()

	got, found, err := e.c.BaseFile(ctx, e.repo, "main", ".github/gilf.yml")
	if err != nil || !found || !bytes.Equal(got, cfg) {
		t.Fatalf("BaseFile = %q, %v, %v", got, found, err)
	}
	last := e.srv.Requests()[len(e.srv.Requests())-1]
	if last.Path != "/repos/octocat/Hello-World/contents/.github/gilf.yml" || last.Query.Get("ref") != "main" {
		t.Errorf("request %s ?%s, want the contents path at ref=main", last.Path, last.Query.Encode())
	}

	got, found, err = e.c.BaseFile(ctx, e.repo, "main", "missing.yml")
	if err != nil || found || got != nil {
		t.Errorf("missing file: %q, %v, %v; want not found, no error", got, found, err)
	}

	got, found, err = e.c.BaseFile(ctx, e.repo, "main", "empty")
	if err != nil || !found || len(got) != 0 {
		t.Errorf("empty file: %q, %v, %v", got, found, err)
	}

	got, found, err = e.c.BaseFile(ctx, e.repo, "main", "big.yml")
	if err != nil || !found || !bytes.Equal(got, big) {
		t.Fatalf("big file: %d bytes, %v, %v", len(got), found, err)
	}
	reqs := e.srv.Requests()
	raw := reqs[len(reqs)-1]
	if raw.Accept != "application/vnd.github.raw" || raw.Query.Get("ref") != "main" {
		t.Errorf("over 1 MB: last request Accept %q ref %q, want the raw media type at main", raw.Accept, raw.Query.Get("ref"))
	}
}

func TestBaseFileSizeCap(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1000)
	for _, tc := range []struct {
		name string
		max  int64
		want error
	}{
		{name: "exactly at the cap", max: 1000},
		{name: "one over the cap", max: 999, want: ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{BaseFiles: map[string][]byte{"f": data}}, func(c *Config) { c.MaxBaseFileBytes = tc.max })
			got, _, err := e.c.BaseFile(context.Background(), e.repo, "master", "f")
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			if tc.want == nil && !bytes.Equal(got, data) {
				t.Errorf("content differs")
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://api.github.com", "https://api.github.com/"},
		{"https://api.github.com/", "https://api.github.com/"},
		{"https://ghe.example.com", "https://ghe.example.com/api/v3/"},
		{"https://ghe.example.com/api/v3", "https://ghe.example.com/api/v3/"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3/"},
		{"http://127.0.0.1:8080/custom/prefix", "http://127.0.0.1:8080/custom/prefix/"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			u, err := baseURL(tc.in)
			if err != nil || u.String() != tc.want {
				t.Errorf("baseURL(%q) = %v, %v; want %s", tc.in, u, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "ftp://x", "https://user:pw@ghe.example.com", "https://ghe.example.com/?x=1", "/api/v3"} {
		if _, err := baseURL(bad); err == nil {
			t.Errorf("baseURL(%q) accepted", bad)
		}
	}
}

// TestEnterpriseBaseURL points the client at a GHES-style server given
// without /api/v3/ and at one mounted elsewhere: every call goes there.
func TestEnterpriseBaseURL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		basePath string
		url      func(s *githubtest.Server) string
	}{
		{name: "host only, /api/v3/ added", basePath: "/api/v3", url: func(s *githubtest.Server) string { return "http://" + s.Host() }},
		{name: "full /api/v3 url", basePath: "/api/v3", url: func(s *githubtest.Server) string { return s.URL }},
		{name: "custom prefix", basePath: "/github/api", url: func(s *githubtest.Server) string { return s.URL }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{BasePath: tc.basePath}, nil)
			c, err := New(Config{AppID: testAppID, PrivateKey: testKey(), BaseURL: tc.url(e.srv), Clock: e.clock, DownloadHosts: []string{e.srv.CodeloadHost()}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.PullRequest(context.Background(), e.repo, 1347); err != nil {
				t.Fatalf("PullRequest: %v", err)
			}
			if _, err := c.Checkout(context.Background(), e.repo, "6dcb09b", t.TempDir()); err != nil {
				t.Fatalf("Checkout: %v", err)
			}
			for _, r := range e.srv.Requests() {
				if r.Endpoint == "" {
					t.Errorf("request outside the API: %s %s", r.Method, r.Path)
				}
			}
		})
	}
}
