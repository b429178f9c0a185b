package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCLIUsageSaysWhat: `gilf costs -h` describes the command; `gilf
// jobs --repo` without an owner is refused, not an empty list.
func TestCLIUsageSaysWhat(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"costs", "-h"}, exitOK, "Estimated validation spend"},
		{[]string{"jobs", "--repo", "widget"}, exitUsage, `--repo "widget": want owner/name`},
		{[]string{"jobs", "--repo", "/widget"}, exitUsage, "want owner/name"},
		{[]string{"jobs", "--repo", "octo/widget/x"}, exitUsage, "want owner/name"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if code := run(t.Context(), dataDirEnv(&out, dir, nil), tt.args); code != tt.code || !strings.Contains(out.String(), tt.want) {
			t.Errorf("gilf %s: exit %d, %q; want %d with %q", strings.Join(tt.args, " "), code, out.String(), tt.code, tt.want)
		}
	}
}
