package main

import (
	"os"
	"path/filepath"
	"regexp"
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
