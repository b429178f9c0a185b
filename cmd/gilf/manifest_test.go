package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGitHubAppManifest checks deploy/github-app-manifest.json, the App
// manifest of GitHub's manifest flow: only fields GitHub documents, the
// permissions gilf doctor requires and the events gilf handles, and the
// webhook at /webhook.
func TestGitHubAppManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "github-app-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name           string `json:"name"`
		URL            string `json:"url"`
		Description    string `json:"description"`
		HookAttributes struct {
			URL    string `json:"url"`
			Active *bool  `json:"active"`
		} `json:"hook_attributes"`
		RedirectURL        string            `json:"redirect_url"`
		Public             *bool             `json:"public"`
		DefaultPermissions map[string]string `json:"default_permissions"`
		DefaultEvents      []string          `json:"default_events"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt field is silently ignored by GitHub
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if m.Name == "" || m.Public == nil || m.HookAttributes.Active == nil || !*m.HookAttributes.Active {
		t.Errorf("manifest: name, public and an active hook are required: %+v", m)
	}
	for _, u := range []string{m.URL, m.HookAttributes.URL, m.RedirectURL} {
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "https" || p.Host == "" {
			t.Errorf("manifest URL %q: want https://host/…", u)
		}
	}
	if !strings.HasSuffix(m.HookAttributes.URL, "/webhook") {
		t.Errorf("hook_attributes.url %q: gilf serves POST /webhook", m.HookAttributes.URL)
	}
	if diff := cmp.Diff(requiredPermissions(), m.DefaultPermissions); diff != "" {
		t.Errorf("default_permissions differ from what gilf doctor requires (-doctor +manifest):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pull_request", "check_run", "check_suite", "issue_comment"}, m.DefaultEvents); diff != "" {
		t.Errorf("default_events (-want +got):\n%s", diff)
	}
}
