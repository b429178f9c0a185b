package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// configurationIndex is the operator's index of every setting.
const configurationIndex = "../../docs/configuration.md"

// TestConfigurationIndex keeps docs/configuration.md's index equal to the
// GILF_* names gilf reads (knownEnv, itself kept equal to the load
// functions by TestKnownEnvMatchesSource): a setting added to the code
// without a row, or a row for a setting gone, fails here. Each name has
// one row, with a default and a meaning.
func TestConfigurationIndex(t *testing.T) {
	b, err := os.ReadFile(configurationIndex)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(GILF_[A-Z0-9_]+)` \\|([^|]*)\\|([^|]*)\\|")
	var documented []string
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if strings.TrimSpace(m[2]) == "" || strings.TrimSpace(m[3]) == "" {
			t.Errorf("%s: the row of %s lacks a default or a meaning", configurationIndex, m[1])
		}
		if slices.Contains(documented, m[1]) {
			t.Errorf("%s: %s has two rows", configurationIndex, m[1])
		}
		documented = append(documented, m[1])
	}
	known := knownEnv()
	slices.Sort(documented)
	slices.Sort(known)
	if diff := cmp.Diff(known, documented); diff != "" {
		t.Errorf("%s's index differs from the settings gilf reads (-read by gilf +documented):\n%s", configurationIndex, diff)
	}
}
