package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// loadFailed checks a loader's errors against want, substrings all in the
// one joined error: with want empty there must be none. It reports
// whether the loader failed as wanted, the case then being done.
func loadFailed(t *testing.T, errs []error, want []string) bool {
	t.Helper()
	err := errors.Join(errs...)
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return false
	}
	if err == nil {
		t.Fatalf("no error, want one naming %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	return true
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load(envMap(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	// Only the parts this file owns; other areas test their own.
	want := Config{
		Log:     LogConfig{Level: slog.LevelInfo, Format: "text"},
		DataDir: "./.gilf",
		Validation: ValidationConfig{
			LocalMinTier:    validation.TierNoNetwork,
			CodeChangesOnly: true,
			Install:         InstallConfig{Network: validation.NetworkRegistry, Cache: defaultInstallCache()},
		},
	}
	if diff := cmp.Diff(coreOf(want), coreOf(c)); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestLoadValues(t *testing.T) {
	c, err := Load(envMap(map[string]string{
		"GILF_VALIDATION_EXECUTOR":           " e2b ",
		"GILF_VALIDATION_PROVIDER":           "crabbox",
		"GILF_ALLOW_LOCAL_VALIDATION":        "1",
		"GILF_LOCAL_MIN_TIER":                "read-only",
		"GILF_DATA_DIR":                      "/var/lib/gilf",
		"GILF_VALIDATION_CODE_CHANGES_ONLY":  "false",
		"GILF_VALIDATION_STEP_TIMEOUT_MS":    "60000",
		"GILF_VALIDATION_INSTALL_TIMEOUT_MS": "86400000",
		"GILF_LOG_LEVEL":                     "DEBUG",
		"GILF_LOG_FORMAT":                    "json",
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Config{
		Log:     LogConfig{Level: slog.LevelDebug, Format: "json"},
		DataDir: "/var/lib/gilf",
		Validation: ValidationConfig{
			Executor: "e2b", EnvProvider: "crabbox", AllowLocal: true,
			LocalMinTier: validation.TierReadOnly, CodeChangesOnly: false,
			StepTimeout: time.Minute, InstallTimeout: 24 * time.Hour,
			Install: InstallConfig{Network: validation.NetworkRegistry, Cache: defaultInstallCache()},
		},
	}
	if diff := cmp.Diff(coreOf(want), coreOf(c)); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(executors.Selection{Executor: "e2b", EnvProvider: "crabbox", AllowLocal: true}, c.Validation.Selection()); diff != "" {
		t.Errorf("Selection (-want +got):\n%s", diff)
	}
	if got := c.Validation.PlanOptions(); got.StepTimeout != time.Minute || got.InstallTimeout != 24*time.Hour {
		t.Errorf("PlanOptions = %+v", got)
	}
}

// core is the part of Config that config.go loads.
type core struct {
	Log        LogConfig
	DataDir    string
	Validation ValidationConfig
}

// coreOf keeps what this file tests; GILF_SANDBOX_* has its own tests
// (config_sandbox_test.go).
func coreOf(c Config) core {
	c.Validation.Sandbox = SandboxConfig{}
	return core{c.Log, c.DataDir, c.Validation}
}

func TestLoadCodeChangesOnly(t *testing.T) {
	// True unless the value is exactly "false".
	for _, tt := range []struct {
		v    string
		want bool
	}{{"", true}, {"false", false}, {"False", true}, {"0", true}, {"true", true}, {" false", true}} {
		t.Run(fmt.Sprintf("%q", tt.v), func(t *testing.T) {
			c, err := Load(envMap(map[string]string{"GILF_VALIDATION_CODE_CHANGES_ONLY": tt.v}))
			if err != nil {
				t.Fatal(err)
			}
			if c.Validation.CodeChangesOnly != tt.want {
				t.Errorf("CodeChangesOnly = %v, want %v", c.Validation.CodeChangesOnly, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"opt-in must be 1 or 0", map[string]string{"GILF_ALLOW_LOCAL_VALIDATION": "true"}, []string{"GILF_ALLOW_LOCAL_VALIDATION"}},
		{"tier", map[string]string{"GILF_LOCAL_MIN_TIER": "remote"}, []string{"GILF_LOCAL_MIN_TIER"}},
		{"level", map[string]string{"GILF_LOG_LEVEL": "loud"}, []string{"GILF_LOG_LEVEL"}},
		{"format", map[string]string{"GILF_LOG_FORMAT": "xml"}, []string{"GILF_LOG_FORMAT"}},
		{"timeout not a number", map[string]string{"GILF_VALIDATION_STEP_TIMEOUT_MS": "10m"}, []string{"GILF_VALIDATION_STEP_TIMEOUT_MS"}},
		{"timeout zero", map[string]string{"GILF_VALIDATION_STEP_TIMEOUT_MS": "0"}, []string{"GILF_VALIDATION_STEP_TIMEOUT_MS"}},
		{"timeout one over the maximum", map[string]string{"GILF_VALIDATION_INSTALL_TIMEOUT_MS": "86400001"}, []string{"GILF_VALIDATION_INSTALL_TIMEOUT_MS", "maximum"}},
		{"every error at once", map[string]string{
			"GILF_ALLOW_LOCAL_VALIDATION": "yes", "GILF_LOCAL_MIN_TIER": "x", "GILF_LOG_FORMAT": "xml",
		}, []string{"GILF_ALLOW_LOCAL_VALIDATION", "GILF_LOCAL_MIN_TIER", "GILF_LOG_FORMAT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(envMap(tt.env))
			if err == nil {
				t.Fatal("Load accepted invalid settings")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func TestLoadUnknownExecutorIsNotFatal(t *testing.T) {
	// SPEC §4.1: an unknown name is a recorded refusal at run time.
	c, err := Load(envMap(map[string]string{"GILF_VALIDATION_EXECUTOR": "docker"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if _, ref := executors.Select(c.Validation.Selection(), nil); ref == nil || ref.Code != validation.CodeExecutorUnknown {
		t.Errorf("Select = %v, want executor_unknown", ref)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret("hunter2-very-secret")
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("x", "secret", s)
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("x", "secret", s)
	blob, err := json.Marshal(struct{ S Secret }{s})
	if err != nil {
		t.Fatal(err)
	}
	outputs := []string{
		s.String(), fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s), string(blob), logBuf.String(),
	}
	for _, o := range outputs {
		if strings.Contains(o, "hunter2") {
			t.Errorf("secret printed: %q", o)
		}
		if !strings.Contains(o, "[redacted]") {
			t.Errorf("output %q does not say [redacted]", o)
		}
	}
	if s.Reveal() != "hunter2-very-secret" || !s.IsSet() || NewSecret("").IsSet() {
		t.Error("Reveal/IsSet do not return the value")
	}
}

func TestWorkerSecrets(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/root", "GITHUB_TOKEN=ghs_abc", "E2B_API_KEY=e2b_x", "GILF_WEBHOOK_SECRET=whsec",
		"AWS_ACCESS_KEY_ID=AKIA1", "AWS_REGION=us-east-1", "DB_PASSWORD=pw", "EMPTY_TOKEN=", "GITHUB_APP_PRIVATE_KEY=-----BEGIN",
		"KEYBOARD=us", "TOKENIZER=x", "NOEQUALS", "npm_config_token=n",
		// Credentials in URLs, whatever the name; auth settings.
		"DATABASE_URL=postgres://gilf:s3cret-pass@db.internal:5432/gilf", "REDIS_URL=redis://db.internal:6379/0",
		"HOMEPAGE=https://example.com/a@b", "PRIVATE_REGISTRY=https://ghp_tokenonly1234@npm.example/",
		"npm_config_//registry.npmjs.org/:_authToken=npm_x", "NPM_CONFIG__AUTH=dXNlcjpwYXNz", "GITHUB_AUTH=x",
		"GIT_AUTHOR_NAME=Jane Doe", "AUTH_HEADER=Bearer y",
	}
	got := map[string]string{}
	var names []string
	for _, s := range WorkerSecrets(environ) {
		names = append(names, s.Name)
		got[s.Name] = s.Value
	}
	want := []string{"AUTH_HEADER", "AWS_ACCESS_KEY_ID", "AWS_REGION", "DATABASE_URL", "DATABASE_URL (its URL's credentials)",
		"DB_PASSWORD", "E2B_API_KEY", "GILF_WEBHOOK_SECRET", "GITHUB_APP_PRIVATE_KEY", "GITHUB_AUTH", "GITHUB_TOKEN",
		"NPM_CONFIG__AUTH", "PRIVATE_REGISTRY", "PRIVATE_REGISTRY (its URL's credentials)",
		"npm_config_//registry.npmjs.org/:_authToken", "npm_config_token"}
	if got["DATABASE_URL (its URL's credentials)"] != "s3cret-pass" || got["PRIVATE_REGISTRY (its URL's credentials)"] != "ghp_tokenonly1234" {
		t.Errorf("URL credentials: %q", got)
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("secret names (-want +got):\n%s", diff)
	}
}

func TestValidateSelection(t *testing.T) {
	tests := []struct {
		name       string
		cfg        ValidationConfig
		flag       string
		wantName   string
		wantSource string
	}{
		{"default is local", ValidationConfig{}, "", "local", "the default of gilf validate"},
		{"default even with a provider", ValidationConfig{EnvProvider: "e2b"}, "", "local", "the default of gilf validate"},
		{"env executor", ValidationConfig{Executor: "crabbox"}, "", "managed-crabbox", "GILF_VALIDATION_EXECUTOR"},
		{"flag wins", ValidationConfig{Executor: "crabbox"}, "selfhost", "self-host", "--executor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, src := validateSelection(tt.cfg, tt.flag)
			if !sel.AllowLocal {
				t.Error("gilf validate must allow local")
			}
			if got := sel.Resolve().Name; got != tt.wantName || src != tt.wantSource {
				t.Errorf("got %s by %s, want %s by %s", got, src, tt.wantName, tt.wantSource)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	want := map[validation.Outcome]int{
		validation.OutcomePassed: 0, validation.OutcomeFailed: 1, validation.OutcomeGap: 3, validation.OutcomeSkipped: 3,
		validation.OutcomeRefused: 3, validation.OutcomeInconclusive: 3, validation.OutcomeError: 2, "": 2,
	}
	for o, code := range want {
		if got := exitCode(o); got != code {
			t.Errorf("exitCode(%q) = %d, want %d", o, got, code)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []validation.StepResult{
		{Name: "install", Status: validation.StatusPassed, ExitCode: new(int), DurationMs: 1200},
		{Name: "test", Status: validation.StatusFailed, ExitCode: func() *int { i := 1; return &i }(), DurationMs: 300},
		{Name: "lint", Status: validation.StatusNotRun},
	}
	t.Run("plain", func(t *testing.T) {
		var b syncBuffer
		p := newProgress(&b, false)
		p.started("test", t0)
		p.tick(t0.Add(30 * time.Second))
		p.summary(steps)
		want := "gilf: step test started\ngilf: step test still running (30s)\n" +
			"gilf: install   passed in 1.2s\ngilf: test      failed (exit 1) in 300ms\ngilf: lint      not_run\n"
		if diff := cmp.Diff(want, b.String()); diff != "" {
			t.Errorf("plain progress (-want +got):\n%s", diff)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		var b syncBuffer
		p := newProgress(&b, true)
		p.started("test", t0)
		p.tick(t0.Add(2500 * time.Millisecond))
		stop := p.run()
		stop() // clears the status line
		want := "\r\x1b[Kgilf: test running 0s\r\x1b[Kgilf: test running 2s\r\x1b[K"
		if diff := cmp.Diff(want, b.String()); diff != "" {
			t.Errorf("terminal progress (-want +got):\n%s", diff)
		}
	})
}

func TestNpmrcSecrets(t *testing.T) {
	home := t.TempDir()
	npmrc := "registry=https://registry.npmjs.org/\n" +
		"//registry.npmjs.org/:_authToken=npm_0123456789abcdef\n" +
		"//npm.corp.example/:_password=\"aHVudGVyMi1wYXNzd29yZA==\"\n" +
		"//npm.corp.example/:_auth=${CORP_AUTH}\n" +
		"fund=false\n"
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte(npmrc), 0o600); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range NpmrcSecrets(envMap(map[string]string{"HOME": home})) {
		got[s.Name] = s.Value
	}
	want := map[string]string{
		"npmrc //registry.npmjs.org/:_authToken":        "npm_0123456789abcdef",
		"npmrc //npm.corp.example/:_password":           "aHVudGVyMi1wYXNzd29yZA==",
		"npmrc //npm.corp.example/:_password (decoded)": "hunter2-password",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	for k := range got {
		if strings.Contains(k, "_auth ") || strings.Contains(k, "registry=") || strings.Contains(k, "fund") {
			t.Errorf("not a secret, or a ${} reference: %s", k)
		}
	}
}
