package github

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

func TestApp(t *testing.T) {
	e := newEnv(t, githubtest.Options{
		AppPermissions: map[string]string{"checks": "write", "pull_requests": "write", "contents": "read", "metadata": "read"},
		AppEvents:      []string{"pull_request", "check_run", "check_suite"},
	}, nil)
	got, err := e.c.App(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := App{
		ID: testAppID, Slug: "gilf", Name: "Octocat App",
		Permissions: map[string]string{"checks": "write", "pull_requests": "write", "contents": "read", "metadata": "read"},
		Events:      []string{"pull_request", "check_run", "check_suite"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("App (-want +got):\n%s", diff)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 1 || reqs[0].Endpoint != githubtest.GetApp || reqs[0].Method != http.MethodGet || reqs[0].Path != "/app" || reqs[0].Auth != "jwt" {
		t.Errorf("requests: %+v, want one JWT-authenticated GET /app", reqs)
	}
}

// TestAppDocumentedExample reads GitHub's own example unchanged but for
// the id and slug.
func TestAppDocumentedExample(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	got, err := e.c.App(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metadata": "read", "contents": "read", "issues": "write", "single_file": "write"}
	if diff := cmp.Diff(want, got.Permissions); diff != "" {
		t.Errorf("permissions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"push", "pull_request"}, got.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestAppWrongKey signs the JWT with a key GitHub does not know: 401,
// not retried.
func TestAppWrongKey(t *testing.T) {
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, githubtest.Options{}, func(c *Config) { c.PrivateKey = other })
	_, err = e.c.App(t.Context())
	var er *gh.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("App with a wrong key: %v, want a 401 *gh.ErrorResponse", err)
	}
	if n := e.srv.Count(githubtest.GetApp); n != 1 {
		t.Errorf("GET /app asked %d times, want once", n)
	}
}
