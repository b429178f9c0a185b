package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gilf-review/gilf/validation"
)

func TestServeConfigDefaults(t *testing.T) {
	got, errs := loadServe(serveEnvMap(nil), nil)
	if len(errs) != 0 {
		t.Fatalf("loadServe: %v", errs)
	}
	want := ServeConfig{
		Addr:     ":8080",
		GitHub:   GitHubConfig{APIURL: "https://api.github.com"},
		Workers:  2,
		JobLease: 2 * time.Minute,
		Shadow:   ShadowConfig{Timeout: 10 * time.Minute},
		SelfHost: SelfHostConfig{Network: validation.NetworkNone, Timeout: 45 * time.Minute},
		// The guard is on by default, trusting no proxy.
		BadSignatureLimit: 30,
		MinFreeBytes:      1 << 30,
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Secret{}), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestServeConfigValues(t *testing.T) {
	got, errs := loadServe(serveEnvMap(map[string]string{
		"GILF_ADDR":                         "127.0.0.1:0",
		"GILF_GITHUB_APP_ID":                " 4242 ",
		"GILF_GITHUB_PRIVATE_KEY_PATH":      "/etc/gilf/app.pem",
		"GILF_WEBHOOK_SECRET":               "s3cret",
		"GILF_GITHUB_API_URL":               "https://ghe.example.com/api/v3",
		"GILF_GITHUB_DOWNLOAD_HOSTS":        "codeload.ghe.example.com, ghe.example.com:8443",
		"GILF_WORKERS":                      "64",
		"GILF_JOB_LEASE_MS":                 "1000",
		"GILF_REVIEW_DRAFTS":                "1",
		"GILF_BAD_SIGNATURE_LIMIT":          "5",
		"GILF_TRUSTED_PROXIES":              "10.0.0.0/8",
		"GILF_VALIDATION_SHADOW_EXECUTOR":   "selfhost",
		"GILF_VALIDATION_SHADOW_TIMEOUT_MS": "86400000",
		"GILF_SELF_HOST_COMMAND":            "/usr/local/bin/run-sandbox --pool ci",
		"GILF_SELF_HOST_NETWORK":            "FULL",
		"GILF_SELF_HOST_TIMEOUT_MS":         "60000",
		"GILF_CRABBOX_BIN":                  "/usr/local/bin/crabbox",
		"GILF_CRABBOX_COORDINATOR":          "https://crabbox.example.com",
		"GILF_CRABBOX_TOKEN":                "cbx-token",
		"E2B_API_KEY":                       "e2b-key",
		"GILF_E2B_TEMPLATE":                 "gilf-node20",
		"GILF_E2B_TIMEOUT_MS":               "1800000",
		"GILF_E2B_API_URL":                  "https://api.e2b.example",
		"GILF_E2B_CPU":                      "64",
		"GILF_E2B_MEMORY_MB":                "1",
		"GILF_E2B_ALLOW_OUT":                "registry.npmjs.org, 10.0.0.0/8",
		"GILF_CF_SANDBOX_ENABLED":           "1",
		"GILF_CF_SANDBOX_URL":               "https://bridge.example.workers.dev",
		"GILF_CF_SANDBOX_TOKEN":             "cf-token",
		"GILF_CF_SANDBOX_TIMEOUT_MS":        "600000",
		"GILF_MIN_FREE_BYTES":               "0",
	}), nil)
	if len(errs) != 0 {
		t.Fatalf("loadServe: %v", errs)
	}
	want := ServeConfig{
		Addr: "127.0.0.1:0",
		GitHub: GitHubConfig{AppID: 4242, PrivateKeyPath: "/etc/gilf/app.pem", WebhookSecret: NewSecret("s3cret"),
			APIURL: "https://ghe.example.com/api/v3", DownloadHosts: []string{"codeload.ghe.example.com", "ghe.example.com:8443"}},
		Workers:      MaxWorkers,
		JobLease:     MinJobLease,
		ReviewDrafts: true,
		Shadow:       ShadowConfig{Executor: "selfhost", Timeout: MaxTimeout},
		SelfHost:     SelfHostConfig{Command: "/usr/local/bin/run-sandbox --pool ci", Network: validation.NetworkFull, Timeout: time.Minute},
		Crabbox:      CrabboxConfig{Bin: "/usr/local/bin/crabbox", Coordinator: "https://crabbox.example.com", Token: NewSecret("cbx-token")},
		E2B: E2BConfig{APIKey: NewSecret("e2b-key"), Template: "gilf-node20", Timeout: 30 * time.Minute, APIURL: "https://api.e2b.example",
			CPU: MaxE2BCPU, MemoryMB: 1, AllowOut: []string{"registry.npmjs.org", "10.0.0.0/8"}},
		CFSandbox:         CFSandboxConfig{Enabled: true, URL: "https://bridge.example.workers.dev", Token: NewSecret("cf-token"), Timeout: 10 * time.Minute},
		BadSignatureLimit: 5, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Secret{}), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	// Secrets never print.
	for _, s := range []string{fmt.Sprintf("%v", got), fmt.Sprintf("%+v", got), fmt.Sprintf("%#v", got)} {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "cbx-token") || strings.Contains(s, "e2b-key") || strings.Contains(s, "cf-token") {
			t.Errorf("a secret was printed: %s", s)
		}
	}
}

func TestServeConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // each must be in the error; nil means no error
	}{
		{"workers at the minimum", map[string]string{"GILF_WORKERS": "1"}, nil},
		{"bad-signature guard off", map[string]string{"GILF_BAD_SIGNATURE_LIMIT": "0"}, nil},
		{"bad-signature limit at the maximum", map[string]string{"GILF_BAD_SIGNATURE_LIMIT": "1000000"}, nil},
		{"bad-signature limit over the maximum", map[string]string{"GILF_BAD_SIGNATURE_LIMIT": "1000001"}, []string{"GILF_BAD_SIGNATURE_LIMIT", "from 0 (off)"}},
		{"bad-signature limit negative", map[string]string{"GILF_BAD_SIGNATURE_LIMIT": "-1"}, []string{"GILF_BAD_SIGNATURE_LIMIT"}},
		{"trusted proxies", map[string]string{"GILF_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7 ::1 fd00::/8"}, nil},
		{"trusted proxies, every bad entry", map[string]string{"GILF_TRUSTED_PROXIES": "10.0.0.0/33,proxy.example,10.0.0.1"}, []string{"10.0.0.0/33", "proxy.example"}},
		{"workers zero", map[string]string{"GILF_WORKERS": "0"}, []string{"GILF_WORKERS"}},
		{"workers over the maximum", map[string]string{"GILF_WORKERS": "65"}, []string{"GILF_WORKERS", "from 1 to 64"}},
		{"workers not a number", map[string]string{"GILF_WORKERS": "two"}, []string{"GILF_WORKERS"}},
		{"lease under the minimum", map[string]string{"GILF_JOB_LEASE_MS": "999"}, []string{"GILF_JOB_LEASE_MS", "at least 1000"}},
		{"lease over the maximum", map[string]string{"GILF_JOB_LEASE_MS": "86400001"}, []string{"GILF_JOB_LEASE_MS"}},
		{"shadow timeout negative", map[string]string{"GILF_VALIDATION_SHADOW_TIMEOUT_MS": "-1"}, []string{"GILF_VALIDATION_SHADOW_TIMEOUT_MS"}},
		{"self-host timeout over the maximum", map[string]string{"GILF_SELF_HOST_TIMEOUT_MS": "86400001"}, []string{"GILF_SELF_HOST_TIMEOUT_MS"}},
		{"self-host network unknown", map[string]string{"GILF_SELF_HOST_NETWORK": "some"}, []string{"GILF_SELF_HOST_NETWORK"}},
		{"addr without port", map[string]string{"GILF_ADDR": "localhost"}, []string{"GILF_ADDR"}},
		{"addr port too big", map[string]string{"GILF_ADDR": ":65536"}, []string{"GILF_ADDR"}},
		{"addr highest port", map[string]string{"GILF_ADDR": ":65535"}, nil},
		{"app id not a number", map[string]string{"GILF_GITHUB_APP_ID": "my-app"}, []string{"GILF_GITHUB_APP_ID"}},
		{"app id negative", map[string]string{"GILF_GITHUB_APP_ID": "-3"}, []string{"GILF_GITHUB_APP_ID"}},
		{"api url not http", map[string]string{"GILF_GITHUB_API_URL": "ftp://ghe.example.com"}, []string{"GILF_GITHUB_API_URL"}},
		{"api url with credentials", map[string]string{"GILF_GITHUB_API_URL": "https://u:p@ghe.example.com"}, []string{"GILF_GITHUB_API_URL"}},
		{"download host with a path", map[string]string{"GILF_GITHUB_DOWNLOAD_HOSTS": "codeload.example.com/x"}, []string{"GILF_GITHUB_DOWNLOAD_HOSTS"}},
		{"download host with a scheme", map[string]string{"GILF_GITHUB_DOWNLOAD_HOSTS": "https://codeload.example.com"}, []string{"GILF_GITHUB_DOWNLOAD_HOSTS"}},
		{"drafts not 0 or 1", map[string]string{"GILF_REVIEW_DRAFTS": "true"}, []string{"GILF_REVIEW_DRAFTS"}},
		{"key twice", map[string]string{"GILF_GITHUB_PRIVATE_KEY": "x", "GILF_GITHUB_PRIVATE_KEY_PATH": "/k.pem"}, []string{"both set"}},
		{"crabbox without coordinator", map[string]string{"GILF_CRABBOX_BIN": "crabbox"}, []string{"GILF_CRABBOX_COORDINATOR"}},
		{"crabbox token alone", map[string]string{"GILF_CRABBOX_TOKEN": "t"}, []string{"half configured"}},
		{"e2b cpu zero", map[string]string{"E2B_API_KEY": "k", "GILF_E2B_CPU": "0"}, []string{"GILF_E2B_CPU"}},
		{"e2b cpu over the maximum", map[string]string{"E2B_API_KEY": "k", "GILF_E2B_CPU": "65"}, []string{"GILF_E2B_CPU", "from 1 to 64"}},
		{"e2b memory over the maximum", map[string]string{"E2B_API_KEY": "k", "GILF_E2B_MEMORY_MB": "262145"}, []string{"GILF_E2B_MEMORY_MB"}},
		{"e2b memory at the maximum", map[string]string{"E2B_API_KEY": "k", "GILF_E2B_MEMORY_MB": "262144"}, nil},
		{"e2b settings without a key", map[string]string{"GILF_E2B_TEMPLATE": "base"}, []string{"E2B_API_KEY"}},
		{"cf sandbox enabled without url", map[string]string{"GILF_CF_SANDBOX_ENABLED": "1", "GILF_CF_SANDBOX_TOKEN": "t"}, []string{"GILF_CF_SANDBOX_URL"}},
		{"cf sandbox enabled not 0 or 1", map[string]string{"GILF_CF_SANDBOX_ENABLED": "yes"}, []string{"GILF_CF_SANDBOX_ENABLED"}},
		{"cf sandbox url without enabling", map[string]string{"GILF_CF_SANDBOX_URL": "https://b.example", "GILF_CF_SANDBOX_TOKEN": "t"}, nil},
		{"min free bytes off", map[string]string{"GILF_MIN_FREE_BYTES": "0"}, nil},
		{"min free bytes negative", map[string]string{"GILF_MIN_FREE_BYTES": "-1"}, []string{"GILF_MIN_FREE_BYTES", "number of bytes"}},
		{"min free bytes with a unit", map[string]string{"GILF_MIN_FREE_BYTES": "1GiB"}, []string{"GILF_MIN_FREE_BYTES", "1073741824"}},
		{"every problem at once", map[string]string{"GILF_WORKERS": "0", "GILF_JOB_LEASE_MS": "5", "GILF_ADDR": "nope", "GILF_SELF_HOST_NETWORK": "x"},
			[]string{"GILF_WORKERS", "GILF_JOB_LEASE_MS", "GILF_ADDR", "GILF_SELF_HOST_NETWORK"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := loadServe(serveEnvMap(tt.env), nil)
			loadFailed(t, errs, tt.want)
		})
	}
}

func keyPEM(t *testing.T) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

func TestServeConfigApp(t *testing.T) {
	good := keyPEM(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Padding after the PEM block is ignored by the parser; it makes the
	// file exactly as large as allowed, and one byte more.
	atLimit := write("at-limit.pem", append(append([]byte(nil), good...), bytes.Repeat([]byte("\n"), MaxPrivateKeyBytes-len(good))...))
	overLimit := write("over-limit.pem", append(append([]byte(nil), good...), bytes.Repeat([]byte("\n"), MaxPrivateKeyBytes-len(good)+1)...))
	goodPath := write("app.pem", good)
	notPEM := write("not.pem", []byte("ssh-rsa AAAA"))
	base := map[string]string{"GILF_GITHUB_APP_ID": "7", "GILF_WEBHOOK_SECRET": "w"}
	with := func(kv ...string) map[string]string { return envWith(base, kv...) }
	tests := []struct {
		name string
		env  map[string]string
		want []string // nil: no error
	}{
		{"key from a file", with("GILF_GITHUB_PRIVATE_KEY_PATH", goodPath), nil},
		{"key in the environment", with("GILF_GITHUB_PRIVATE_KEY", string(good)), nil},
		{"key with escaped newlines", with("GILF_GITHUB_PRIVATE_KEY", strings.ReplaceAll(string(good), "\n", `\n`)), nil},
		{"key file at the size limit", with("GILF_GITHUB_PRIVATE_KEY_PATH", atLimit), nil},
		{"key file over the size limit", with("GILF_GITHUB_PRIVATE_KEY_PATH", overLimit), []string{"over the 65536-byte limit"}},
		{"key file missing", with("GILF_GITHUB_PRIVATE_KEY_PATH", filepath.Join(dir, "nope.pem")), []string{"GILF_GITHUB_PRIVATE_KEY_PATH", "no such file"}},
		{"key not PEM", with("GILF_GITHUB_PRIVATE_KEY_PATH", notPEM), []string{`GILF_GITHUB_PRIVATE_KEY_PATH="` + notPEM + `": not a GitHub App private key: no PEM block`}},
		{"key in the environment not PEM", with("GILF_GITHUB_PRIVATE_KEY", "garbage"), []string{"GILF_GITHUB_PRIVATE_KEY: not a GitHub App private key: no PEM block"}},
		{"nothing set", map[string]string{}, []string{"GILF_GITHUB_APP_ID is required", "GILF_WEBHOOK_SECRET is required",
			"GILF_GITHUB_PRIVATE_KEY or GILF_GITHUB_PRIVATE_KEY_PATH is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, errs := loadServe(serveEnvMap(tt.env), nil)
			if len(errs) != 0 {
				t.Fatalf("loadServe: %v", errs)
			}
			app, err := sc.App(readKeyFile)
			if tt.want == nil {
				if err != nil || app.PrivateKey == nil || app.AppID != 7 || string(app.WebhookSecret) != "w" {
					t.Fatalf("App: %+v, %v", app.AppID, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "PRIVATE KEY-----") {
				t.Errorf("the error quotes the key: %v", err)
			}
		})
	}
}

// TestServeConfigExit runs gilf serve with a broken configuration: it
// lists every problem at once and exits 2 without listening.
func TestServeConfigExit(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		code int
		want []string
	}{
		{"every problem listed", nil, []string{"GILF_WORKERS=0", "GILF_LOG_FORMAT=yaml"}, exitUsage, []string{
			"GILF_WORKERS", "GILF_LOG_FORMAT", "GILF_GITHUB_APP_ID is required", "GILF_WEBHOOK_SECRET is required",
			"GILF_GITHUB_PRIVATE_KEY or GILF_GITHUB_PRIVATE_KEY_PATH is required"}},
		{"arguments refused", []string{"now"}, nil, exitUsage, []string{"unexpected arguments"}},
		{"help", []string{"-h"}, nil, exitOK, []string{"usage: gilf serve"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), gilfBin, append([]string{"serve"}, tt.args...)...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GILF_DATA_DIR=" + t.TempDir()}, tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(serveStartBound):
				if err := cmd.Process.Kill(); err != nil {
					t.Log(err)
				}
				<-done
				t.Fatalf("gilf serve %v did not exit within %v", tt.args, serveStartBound)
			}
			if code := cmd.ProcessState.ExitCode(); code != tt.code {
				t.Errorf("exit code %d, want %d\n%s", code, tt.code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "listening") {
				t.Errorf("a misconfigured server listened:\n%s", stderr.String())
			}
		})
	}
}

// serveEnvMap is a getenv over a map.
func serveEnvMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestServeExecutorSet checks the explicit executor list: each executor is
// in it only when configured, and a configured one with a bad setting
// stops the start.
func TestServeExecutorSet(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
		err  string
	}{
		{"nothing configured", nil, nil, ""},
		{"local needs the opt-in", map[string]string{"GILF_VALIDATION_EXECUTOR": "local"}, nil, ""},
		{"every executor", map[string]string{
			"GILF_ALLOW_LOCAL_VALIDATION": "1",
			"GILF_SELF_HOST_COMMAND":      "/opt/sandbox/run",
			"GILF_CRABBOX_BIN":            "crabbox", "GILF_CRABBOX_COORDINATOR": "https://crabbox.example.com",
			"E2B_API_KEY":             "k",
			"GILF_CF_SANDBOX_ENABLED": "1", "GILF_CF_SANDBOX_URL": "https://bridge.example.workers.dev", "GILF_CF_SANDBOX_TOKEN": "t",
		}, []string{"local", "self-host", "managed-crabbox", "managed-e2b", "managed-cf-sandbox"}, ""},
		{"cf sandbox enabled but left out", map[string]string{"GILF_CF_SANDBOX_URL": "https://b.example", "GILF_CF_SANDBOX_TOKEN": "t"}, nil, ""},
		{"e2b lifetime inside its margin", map[string]string{"E2B_API_KEY": "k", "GILF_E2B_TIMEOUT_MS": "1000"}, nil, "GILF_E2B_TIMEOUT_MS"},
		{"e2b api url not http", map[string]string{"E2B_API_KEY": "k", "GILF_E2B_API_URL": "ftp://x"}, nil, "GILF_E2B_API_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(serveEnvMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			sc, errs := loadServe(serveEnvMap(tt.env), nil)
			if len(errs) != 0 {
				t.Fatal(errors.Join(errs...))
			}
			set, err := buildExecutors(cfg, sc, nil, nil, slog.New(slog.DiscardHandler))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("buildExecutors: %v, want an error naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range set {
				got = append(got, e.Name())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("executors (-want +got):\n%s", diff)
			}
		})
	}
}
