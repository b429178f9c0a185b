package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCloudflareForwardsEverySetting keeps the Cloudflare Containers Worker
// honest: every setting gilf reads from its environment must be in the
// Worker's FORWARDED list, or the container could never be configured.
func TestCloudflareForwardsEverySetting(t *testing.T) {
	worker, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "cloudflare", "src", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`"((?:GILF_[A-Z0-9_]+)|E2B_API_KEY)"`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			seen++
			if !strings.Contains(string(worker), `"`+m[1]+`"`) {
				t.Errorf("%s reads %s, which deploy/cloudflare/src/index.js does not forward", f, m[1])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d settings in cmd/gilf: the scan is broken", seen)
	}
}

// TestImageCarriesTheLocalExecutor keeps deploy/Dockerfile's final stage
// able to run the local executor as this package wires it: a supported
// node (20 or later), and the host programs the executor calls.
func TestImageCarriesTheLocalExecutor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(src, -1)
	if len(froms) == 0 {
		t.Fatal("no FROM in deploy/Dockerfile")
	}
	final := froms[len(froms)-1][1]
	m := regexp.MustCompile(`^node:(\d+)-`).FindStringSubmatch(final)
	if m == nil {
		t.Fatalf("the final stage is %s, not an official node image", final)
	}
	if major, _ := strconv.Atoi(m[1]); major < 20 || major%2 != 0 {
		t.Errorf("the final stage has node %s: want an LTS line, 20 or later", m[1])
	}
	stage := src[strings.LastIndex(src, "FROM "):]
	for _, pkg := range []string{"bubblewrap", "e2fsprogs", "git", "iproute2", "ca-certificates"} {
		if !regexp.MustCompile(`apt-get install[^\n]*(\\\n[^\n]*)*\b` + regexp.QuoteMeta(pkg) + `\b`).MatchString(stage) {
			t.Errorf("the final stage does not install %s", pkg)
		}
	}
}
