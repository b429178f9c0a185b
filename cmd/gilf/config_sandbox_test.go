package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSandboxEnv(t *testing.T) {
	got, err := ParseSandboxEnv("FORCE_COLOR=0, NODE_OPTIONS=--max-old-space-size=4096\nTZ=UTC\n\nEMPTY=")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"FORCE_COLOR": "0", "NODE_OPTIONS": "--max-old-space-size=4096", "TZ": "UTC", "EMPTY": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSandboxEnv (-want +got):\n%s", diff)
	}
	for _, bad := range []struct{ in, says string }{
		{"NPM_TOKEN=abc", "looks like a secret"},
		{"GITHUB_TOKEN=ghs_x", "looks like a secret"},
		{"AWS_SECRET_ACCESS_KEY=x", "looks like a secret"},
		{"DB_PASSWORD=x", "looks like a secret"},
		{"HOME=/root", "set by gilf"},
		{"https_proxy=http://evil", "set by gilf"},
		{"NODE_EXTRA_CA_CERTS=/x", "set by gilf"},
		{"GILF_WEBHOOK_SECRET_X=1", "looks like a secret"},
		{"GILF_WORKERS=1", "set by gilf"},
		{"1BAD=x", "not a variable name"},
		{"novalue", "not NAME=value"},
		{"A=1,A=2", "given twice"},
	} {
		if _, err := ParseSandboxEnv(bad.in); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("ParseSandboxEnv(%q) = %v, want an error saying %q", bad.in, err, bad.says)
		}
	}
}

func TestParseSandboxEnvLimits(t *testing.T) {
	entries := func(n int) string {
		var b []string
		for i := range n {
			b = append(b, fmt.Sprintf("V%d=x", i))
		}
		return strings.Join(b, ",")
	}
	if m, err := ParseSandboxEnv(entries(MaxSandboxEnvEntries)); err != nil || len(m) != MaxSandboxEnvEntries {
		t.Errorf("%d entries: %d, %v", MaxSandboxEnvEntries, len(m), err)
	}
	if _, err := ParseSandboxEnv(entries(MaxSandboxEnvEntries + 1)); err == nil {
		t.Errorf("%d entries were accepted", MaxSandboxEnvEntries+1)
	}
	long := "A=" + strings.Repeat("x", MaxSandboxEnvBytes-2)
	if _, err := ParseSandboxEnv(long); err != nil {
		t.Errorf("exactly %d bytes: %v", MaxSandboxEnvBytes, err)
	}
	if _, err := ParseSandboxEnv(long + "x"); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("one byte over %d: %v", MaxSandboxEnvBytes, err)
	}
}

func TestLoadSandbox(t *testing.T) {
	c, err := Load(envMap(map[string]string{"GILF_DATA_DIR": "/var/lib/gilf"}))
	if err != nil {
		t.Fatal(err)
	}
	sb := c.Validation.Sandbox
	var system string
	for _, p := range SystemCABundles() {
		if _, err := os.Stat(p); err == nil {
			system = p
			break
		}
	}
	if sb.CAFile != system || sb.ToolchainDir != filepath.Join("/var/lib/gilf", ToolchainDirName) || sb.ToolchainRegistry != "" || sb.Env != nil {
		t.Errorf("defaults: %+v (system bundle %q)", sb, system)
	}
	c, err = Load(envMap(map[string]string{
		"GILF_SANDBOX_CA_FILE": "none", "GILF_TOOLCHAIN_DIR": "none",
		"GILF_SANDBOX_ENV": "FORCE_COLOR=0", "GILF_TOOLCHAIN_REGISTRY": "https://registry.example.com/",
	}))
	if err != nil {
		t.Fatal(err)
	}
	sb = c.Validation.Sandbox
	if sb.CAFile != "" || sb.ToolchainDir != "" || sb.ToolchainRegistry != "https://registry.example.com/" || sb.Env["FORCE_COLOR"] != "0" {
		t.Errorf("set: %+v", sb)
	}
	if env := sb.sandboxEnv(); env["FORCE_COLOR"] != "0" || env["PATH"] == "" {
		t.Errorf("the step environment keeps the defaults and adds the operator's: %v", env)
	}

	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(envMap(map[string]string{
		"GILF_SANDBOX_CA_FILE": notPEM, "GILF_SANDBOX_ENV": "NPM_TOKEN=x", "GILF_TOOLCHAIN_REGISTRY": "ftp://x",
	}))
	for _, want := range []string{"GILF_SANDBOX_CA_FILE", "no PEM certificate", "NPM_TOKEN looks like a secret", "GILF_TOOLCHAIN_REGISTRY"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load error %v lacks %q", err, want)
		}
	}
	if _, err := Load(envMap(map[string]string{"GILF_SANDBOX_CA_FILE": "relative.pem"})); err == nil {
		t.Error("a relative CA path was accepted")
	}
}
