// Package shared locates the team's shared material (../shared beside the
// repository) for tests: real webhook payloads, GitHub API examples,
// package.json files and small JS repositories.
package shared

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the shared directory: $GILF_SHARED_DIR when set, else
// ../shared beside the module root. It fails the test when it is missing:
// CI always lays it out, so a missing directory is a broken setup, not a
// reason to skip.
func Dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("GILF_SHARED_DIR"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			s := filepath.Join(filepath.Dir(d), "shared")
			if _, err := os.Stat(filepath.Join(s, "SPEC.md")); err != nil {
				t.Fatalf("shared material not found at %s: %v", s, err)
			}
			return s
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// Data returns a path under the shared data directory.
func Data(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Dir(t), "data"}, elem...)...)
}
