package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/validation"
)

// TestValidateRealRepository is the foundation's "done when": gilf validate
// on a real small JS repository (typicode/steno, from the shared data)
// installs its dependencies from the npm registry (the install step is the
// only one with a way out: gilf's proxy, to the registry alone) and runs its tests, lint and build in the sandbox
// at the read-only tier; the same repository with its test broken fails,
// with the failing output in the finding.
func TestValidateRealRepository(t *testing.T) {
	tarball := shared.Data(t, "repos", "steno.tar.gz")

	r := gilf(t, nil, "validate", "--json", tarball)
	var rec recordJSON
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("record: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	if r.code != exitOK || rec.Outcome != "passed" {
		t.Fatalf("steno: exit %d, outcome %q, want 0 and passed\nstdout:\n%s\nstderr:\n%s", r.code, rec.Outcome, r.stdout, r.stderr)
	}
	if rec.IsolationTier != "read-only" {
		t.Errorf("isolation tier %q, want read-only", rec.IsolationTier)
	}
	want := map[string]string{"install": "registry", "test": "none", "lint": "none", "build": "none"}
	for _, s := range rec.Steps {
		if net, ok := want[s.Name]; !ok || s.Network != net || s.Status != "passed" {
			t.Errorf("step %s: status %s network %s; want passed with network %s", s.Name, s.Status, s.Network, net)
		}
		delete(want, s.Name)
		if s.Egress == nil {
			t.Errorf("step %s has no egress record", s.Name)
			continue
		}
		if s.Name != "install" {
			if len(s.Egress.Allowed)+len(s.Egress.Denied) != 0 {
				t.Errorf("step %s reached something: %+v", s.Name, s.Egress)
			}
			continue
		}
		// The registry the worker's npm names, reached through the
		// proxy, and nothing else asked for.
		if len(s.Egress.Allowed) != 1 || s.Egress.Allowed[0].Host != "registry.npmjs.org" || s.Egress.Allowed[0].BytesIn == 0 || len(s.Egress.Denied) != 0 {
			t.Errorf("install egress %+v", s.Egress)
		}
	}
	if len(want) != 0 {
		t.Errorf("steps missing from the record: %v", want)
	}

	// The same repository with its assertion broken.
	dir := t.TempDir()
	if out, err := exec.Command("tar", "xzf", tarball, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("extract: %v\n%s", err, out)
	}
	testFile := filepath.Join(dir, "steno", "src", "test.ts")
	src, err := os.ReadFile(testFile)
	if err != nil {
		t.Fatal(err)
	}
	const assertion = "equal(parseInt(fs.readFileSync(file, 'utf-8')), max)"
	if !strings.Contains(string(src), assertion) {
		t.Fatalf("steno's test changed: %q not found", assertion)
	}
	broken := strings.Replace(string(src), assertion, "equal(parseInt(fs.readFileSync(file, 'utf-8')), max + 7)", 1)
	if err := os.WriteFile(testFile, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	r = gilf(t, nil, "validate", filepath.Join(dir, "steno"))
	r.want(t, exitFailed, "❌ failed", "`npm run test` failed with exit code 1", "1007")
}

// recordJSON is the part of `gilf validate --json` these tests read.
type recordJSON struct {
	Outcome       string `json:"outcome"`
	IsolationTier string `json:"isolationTier"`
	Steps         []struct {
		Name    string             `json:"name"`
		Status  string             `json:"status"`
		Network string             `json:"network"`
		Egress  *validation.Egress `json:"egress"`
	} `json:"steps"`
}
