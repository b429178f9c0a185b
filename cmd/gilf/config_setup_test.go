package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestKnownEnvMatchesSource keeps knownEnv the one list of GILF_* names:
// every "GILF_…" string literal of gilf's own code (and selfhost's
// NetworkEnv, read through its constant) is in it, and every entry of it
// is such a literal.
func TestKnownEnvMatchesSource(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "executors", "selfhost", "selfhost.go"))
	lit := regexp.MustCompile(`"(GILF_[A-Z0-9_]*[A-Z0-9])"`)
	inSource := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			inSource[m[1]] = f
		}
	}
	known := knownEnv()
	for name, f := range inSource {
		if !slices.Contains(known, name) {
			t.Errorf("%s (in %s) is not in knownEnv: gilf serve would refuse to start with it set", name, f)
		}
	}
	seen := map[string]bool{}
	for _, name := range known {
		if seen[name] {
			t.Errorf("%s is twice in knownEnv", name)
		}
		seen[name] = true
		if _, ok := inSource[name]; !ok {
			t.Errorf("knownEnv lists %s, which no source file names", name)
		}
	}
	if len(inSource) < 50 {
		t.Fatalf("found only %d GILF_ literals: is the grep broken?", len(inSource))
	}
}

// TestKnownEnvCoversReads runs every load function with a getenv that
// records what it is asked: each GILF_* name read is known.
func TestKnownEnvCoversReads(t *testing.T) {
	read := map[string]bool{}
	for _, env := range []map[string]string{nil, {
		// Settings that make more of the loaders read on.
		"GILF_ALLOW_LOCAL_VALIDATION": "1", "E2B_API_KEY": "k", "GILF_CF_SANDBOX_ENABLED": "1",
		"GILF_EVIDENCE_ARTIFACTS": "1", "GILF_EVIDENCE_S3_BUCKET": "b", "GILF_REDELIVERY_SWEEP_MS": "60000",
	}} {
		getenv := func(k string) string {
			read[k] = true
			return env[k]
		}
		cfg, err := Load(getenv)
		if err != nil {
			t.Logf("Load: %v", err)
		}
		sc, _ := loadServe(getenv, nil)
		_ = checkServeSetup(cfg, sc, getenv, nil)
	}
	known := knownEnv()
	n := 0
	for name := range read {
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		n++
		if !slices.Contains(known, name) {
			t.Errorf("the config reads %s, which knownEnv lacks", name)
		}
	}
	if n < 40 {
		t.Errorf("only %d GILF_ names read: is the recording broken?", n)
	}
}

func TestUnknownEnv(t *testing.T) {
	got := unknownEnv([]string{
		"PATH=/usr/bin", "GILF_WORKERS=2", "GILF_WORKER=2", "GILF_WEBHOOK_SECERT=x",
		"GILF_VALIDATION_EXECUTER=local", "GILFISH=1", "GILF_=1",
	})
	var msgs []string
	for _, e := range got {
		msgs = append(msgs, e.Error())
	}
	want := []string{
		"GILF_WORKER is set but gilf reads no such variable; did you mean GILF_WORKERS?",
		"GILF_WEBHOOK_SECERT is set but gilf reads no such variable; did you mean GILF_WEBHOOK_SECRET?",
		"GILF_VALIDATION_EXECUTER is set but gilf reads no such variable; did you mean GILF_VALIDATION_EXECUTOR?",
		"GILF_ is set but gilf reads no such variable; did you mean GILF_ADDR?",
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("unknownEnv (-want +got):\n%s", diff)
	}
}

// TestConfiguredExecutorsMatchBuild checks the configured-executor names
// the start checks use are those buildExecutors builds.
func TestConfiguredExecutorsMatchBuild(t *testing.T) {
	env := map[string]string{
		"GILF_ALLOW_LOCAL_VALIDATION": "1",
		"GILF_SELF_HOST_COMMAND":      "/opt/sandbox/run",
		"GILF_CRABBOX_BIN":            "crabbox", "GILF_CRABBOX_COORDINATOR": "https://crabbox.example.com",
		"E2B_API_KEY":             "k",
		"GILF_CF_SANDBOX_ENABLED": "1", "GILF_CF_SANDBOX_URL": "https://bridge.example.workers.dev", "GILF_CF_SANDBOX_TOKEN": "t",
	}
	// Each executor alone, then all of them.
	cases := []map[string]string{env}
	for _, keys := range [][]string{{"GILF_ALLOW_LOCAL_VALIDATION"}, {"GILF_SELF_HOST_COMMAND"}, {"GILF_CRABBOX_BIN", "GILF_CRABBOX_COORDINATOR"},
		{"E2B_API_KEY"}, {"GILF_CF_SANDBOX_ENABLED", "GILF_CF_SANDBOX_URL", "GILF_CF_SANDBOX_TOKEN"}, nil} {
		m := map[string]string{}
		for _, k := range keys {
			m[k] = env[k]
		}
		cases = append(cases, m)
	}
	for _, m := range cases {
		cfg, err := Load(serveEnvMap(m))
		if err != nil {
			t.Fatal(err)
		}
		sc, errs := loadServe(serveEnvMap(m), nil)
		if len(errs) != 0 {
			t.Fatal(errors.Join(errs...))
		}
		set, err := buildExecutors(cfg, sc, nil, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		var built []string
		for _, e := range set {
			built = append(built, e.Name())
		}
		if diff := cmp.Diff(built, configuredExecutors(cfg.Validation, sc)); diff != "" {
			t.Errorf("%v: configuredExecutors differs from buildExecutors (-built +configured):\n%s", m, diff)
		}
	}
}

func TestCheckDefaultExecutor(t *testing.T) {
	selfHost := map[string]string{"GILF_SELF_HOST_COMMAND": "/opt/run"}
	with := envWith
	tests := []struct {
		name string
		env  map[string]string
		want string // "" means no error
	}{
		{"nothing configured", nil, "no executor is configured"},
		{"local chosen, opted in", map[string]string{"GILF_VALIDATION_EXECUTOR": "local", "GILF_ALLOW_LOCAL_VALIDATION": "1"}, ""},
		{"crabbox by default, only self-host configured", selfHost, "the default executor managed-crabbox (chosen by default) is not configured"},
		{"self-host by the executor setting", with(selfHost, "GILF_VALIDATION_EXECUTOR", "selfhost"), ""},
		{"self-host by the provider setting", with(selfHost, "GILF_VALIDATION_PROVIDER", "self-host"), ""},
		{"e2b chosen, self-host configured", with(selfHost, "GILF_VALIDATION_EXECUTOR", "e2b"), "the default executor managed-e2b (chosen by GILF_VALIDATION_EXECUTOR) is not configured"},
		{"an unknown name", with(selfHost, "GILF_VALIDATION_PROVIDER", "docker"), `GILF_VALIDATION_PROVIDER="docker" names no executor; configured here: self-host`},
		{"local without the opt-in", with(selfHost, "GILF_VALIDATION_EXECUTOR", "local"), "runs only with GILF_ALLOW_LOCAL_VALIDATION=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(serveEnvMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			sc, _ := loadServe(serveEnvMap(tt.env), nil)
			err = checkDefaultExecutor(cfg.Validation, sc)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestCheckProgram(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe := write("run", 0o755)
	plain := write("plain", 0o644)
	tests := []struct {
		name, prog, path, want string
	}{
		{"executable path", exe, "", ""},
		{"bare name on PATH", "run", "/nonexistent:" + dir, ""},
		{"not executable", plain, "", "is not executable"},
		{"missing", filepath.Join(dir, "nope"), "", "does not exist"},
		{"a directory", dir + "/", "", "is not a regular file"},
		{"bare name not on PATH", "plain", dir, "not an executable file in any directory of PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkProgram(tt.prog, tt.path)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestServeRefusesSetup starts gilf serve with an environment that is
// valid but for one thing, once per refusal: it exits 2 and names that
// one problem (and no other) without listening; with all of them at once
// it lists each.
func TestServeRefusesSetup(t *testing.T) {
	k := newAppKey(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func(extra ...string) []string {
		return append([]string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + t.TempDir(),
			"GILF_ADDR=127.0.0.1:0",
			"GILF_DATA_DIR=" + t.TempDir(),
			"GILF_GITHUB_API_URL=http://127.0.0.1:1",
			"GILF_GITHUB_APP_ID=" + strconv.Itoa(serveAppID),
			"GILF_GITHUB_PRIVATE_KEY_PATH=" + k.path,
			"GILF_WEBHOOK_SECRET=" + serveSecret,
			"GILF_ALLOW_LOCAL_VALIDATION=1",
			"GILF_VALIDATION_EXECUTOR=local",
		}, extra...)
	}
	without := func(env []string, names ...string) []string {
		return slices.DeleteFunc(env, func(kv string) bool {
			n, _, _ := strings.Cut(kv, "=")
			return slices.Contains(names, n)
		})
	}
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"no executor", without(base(), "GILF_ALLOW_LOCAL_VALIDATION", "GILF_VALIDATION_EXECUTOR"),
			[]string{"no executor is configured, so every pull request would be refused"}},
		{"default executor not configured", without(base(), "GILF_VALIDATION_EXECUTOR"),
			[]string{"the default executor managed-crabbox (chosen by default) is not configured"}},
		{"self-host command not executable", base("GILF_SELF_HOST_COMMAND=" + plain + " --pool ci"),
			[]string{"GILF_SELF_HOST_COMMAND=", plain + " is not executable"}},
		{"webhook secret too short", base("GILF_WEBHOOK_SECRET=fifteen-bytes!!"),
			[]string{"GILF_WEBHOOK_SECRET is 15 bytes: want at least 16"}},
		{"unknown GILF variable", base("GILF_WORKER=4"),
			[]string{"GILF_WORKER is set but gilf reads no such variable; did you mean GILF_WORKERS?"}},
		{"shadow executor not configured", base("GILF_VALIDATION_SHADOW_EXECUTOR=e2b"),
			[]string{`GILF_VALIDATION_SHADOW_EXECUTOR="e2b": managed-e2b is not configured, so every shadow run would be refused`}},
	}
	var allWant []string
	for _, tt := range tests[1:] {
		allWant = append(allWant, tt.want...)
	}
	tests = append(tests, struct {
		name string
		env  []string
		want []string
	}{"every problem at once", append(without(base(), "GILF_VALIDATION_EXECUTOR", "GILF_WEBHOOK_SECRET"),
		"GILF_SELF_HOST_COMMAND="+plain+" --pool ci", "GILF_WEBHOOK_SECRET=fifteen-bytes!!", "GILF_WORKER=4", "GILF_VALIDATION_SHADOW_EXECUTOR=e2b"), allWant})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runServeOnce(t, tt.env)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d\n%s", code, exitUsage, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.name != "every problem at once" {
				if _, problems, _ := strings.Cut(stderr, "configuration:\n"); strings.Count(strings.TrimSpace(problems), "\n") != 0 {
					t.Errorf("want exactly one problem listed:\n%s", stderr)
				}
			}
			if strings.Contains(stderr, "listening") {
				t.Errorf("a misconfigured server listened:\n%s", stderr)
			}
		})
	}
}

// runServeOnce runs gilf serve with env, bounded by serveStartBound, and
// returns its exit code and stderr.
func runServeOnce(t *testing.T, env []string) (int, string) {
	t.Helper()
	cmd := exec.Command(gilfBin, "serve")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(serveStartBound):
		if err := cmd.Process.Kill(); err != nil {
			t.Log(err)
		}
		<-done
		t.Fatalf("gilf serve did not exit within %v:\n%s", serveStartBound, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}
