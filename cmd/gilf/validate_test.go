package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/pgtest"
	"github.com/gilf-review/gilf/internal/shared"
)

// gilfBin is the gilf binary built once for the subprocess tests.
var gilfBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gilf-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	gilfBin = filepath.Join(dir, "gilf")
	build := exec.Command("go", "build", "-o", gilfBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build gilf:", err)
		return 2
	}
	defer stopWorld()
	// One PostgreSQL server for the replica tests (e2e_replicas_test.go).
	srv, err := pgtest.Start(context.Background(), io.Discard)
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		return 2
	}
	pg = srv
	code := m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "stop postgres:", err)
		code = 1
	}
	return code
}

// runBound bounds one gilf validate subprocess.
const runBound = 5 * time.Minute

type result struct {
	code   int
	stdout string
	stderr string
}

// gilf runs the binary with a clean environment: PATH and HOME plus env.
func gilf(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, gilfBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run gilf: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("gilf %q did not finish within %v; stderr:\n%s", args, runBound, errb.String())
	}
	return result{code, out.String(), errb.String()}
}

func (r result) want(t *testing.T, code int, stdout ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", s, r.stdout, r.stderr)
		}
	}
}

// repoRoot is the module root (two levels above cmd/gilf).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..")
}

// copyHello copies examples/hello into a temp dir and applies edits.
func copyHello(t *testing.T, edits map[string]string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "hello")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(repoRoot(t), "examples", "hello"))); err != nil {
		t.Fatalf("copy examples/hello: %v", err)
	}
	for name, body := range edits {
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestValidateHelloPasses(t *testing.T) {
	r := gilf(t, nil, "validate", filepath.Join(repoRoot(t), "examples", "hello"))
	r.want(t, exitOK,
		"## gilf validation: ✅ passed",
		"4 of 4 steps ran and passed.",
		"| `install` | `npm ci",
		"| `test` | `npm run test` | ✅ passed | 0 |",
		"executor local chosen by the default of gilf validate",
	)
	if !strings.Contains(r.stderr, "gilf: step test started") {
		t.Errorf("stderr shows no progress:\n%s", r.stderr)
	}
}

func TestValidateBrokenTestFails(t *testing.T) {
	dir := copyHello(t, map[string]string{
		"test/sum.test.js": "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\n" +
			"const { add } = require('../src/hello.js');\n\ntest('adds wrongly on purpose', () => {\n  assert.equal(add(2, 2), 5);\n});\n",
	})
	r := gilf(t, nil, "validate", dir)
	r.want(t, exitFailed,
		"## gilf validation: ❌ failed",
		"### Not compared with the base (1)",
		"adds wrongly on purpose",
		"| `test` | `npm run test` | ❌ failed | 1 |",
	)
}

func TestValidateNoManifestIsGap(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.js"), []byte("console.log('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := gilf(t, nil, "validate", dir)
	r.want(t, exitUnproven, "not validated — nothing to run", "`no_manifest`", "This is not a pass.")
	if strings.Contains(verdictOf(r.stdout), "passed") {
		t.Errorf("a gap's verdict says passed: %s", verdictOf(r.stdout))
	}
}

func verdictOf(body string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "## ") {
			return l
		}
	}
	return ""
}

func TestValidateArchiveInconclusive(t *testing.T) {
	tgz := shared.Data(t, "repos", "util-deprecate.tar.gz")
	r := gilf(t, nil, "validate", tgz)
	r.want(t, exitUnproven, "inconclusive — nothing was proven", "❔ inconclusive")
	leftovers, err := filepath.Glob(filepath.Join(os.TempDir(), "gilf-validate-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leftovers {
		// Another test's run may be extracting right now; ours is gone
		// when none is older than this test.
		if st, err := os.Stat(l); err == nil && time.Since(st.ModTime()) > runBound {
			t.Errorf("stale extraction dir left behind: %s", l)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	r := gilf(t, nil, "validate", "--json", filepath.Join(repoRoot(t), "examples", "hello"))
	r.want(t, exitOK)
	var rec map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"outcome", "reason", "refusal", "executor", "isolationTier", "packageManager", "platform", "steps", "findings"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record lacks %q", k)
		}
	}
	if rec["outcome"] != "passed" || rec["executor"] != "local" || rec["packageManager"] != "npm" {
		t.Errorf("record outcome/executor/packageManager = %v/%v/%v", rec["outcome"], rec["executor"], rec["packageManager"])
	}
	steps, _ := rec["steps"].([]any)
	if len(steps) != 4 {
		t.Fatalf("record has %d steps, want 4", len(steps))
	}
	for _, s := range steps {
		step := s.(map[string]any)
		for _, k := range []string{"name", "command", "cwd", "timeoutMs", "network", "status", "exitCode", "signal", "durationMs", "outputBytes", "truncated", "redactions"} {
			if _, ok := step[k]; !ok {
				t.Errorf("step %v lacks %q", step["name"], k)
			}
		}
		if step["status"] != "passed" {
			t.Errorf("step %v is %v", step["name"], step["status"])
		}
	}
	first := steps[0].(map[string]any)
	if cmd, _ := first["command"].([]any); len(cmd) < 2 || cmd[0] != "npm" || cmd[1] != "ci" {
		t.Errorf("install command %v, want npm ci …", first["command"])
	}
	// Where the run's time went: gilf's own phases and each step.
	phases, _ := rec["phases"].([]any)
	var names []string
	for _, p := range phases {
		names = append(names, fmt.Sprint(p.(map[string]any)["name"]))
	}
	if !slices.Contains(names, "workspace") || !slices.Contains(names, "step:install") || !slices.Contains(names, "cleanup") {
		t.Errorf("record phases %v", names)
	}
}

func TestValidateUnconfiguredExecutorRefused(t *testing.T) {
	hello := filepath.Join(repoRoot(t), "examples", "hello")
	// An executor that is not configured is the operator's to fix (exit
	// 2, with the setting named); an unknown name is a refusal.
	tests := []struct {
		name    string
		env     []string
		args    []string
		code    string
		exit    int
		verdict string
	}{
		{"flag alias", nil, []string{"--executor", "e2b"}, "executor_unconfigured", exitUsage, "not set up to validate: executor managed-e2b"},
		{"env", []string{"GILF_VALIDATION_EXECUTOR=crabbox"}, nil, "executor_unconfigured", exitUsage, "not set up to validate: executor managed-crabbox (chosen by GILF\\_VALIDATION\\_EXECUTOR"},
		{"flag beats env", []string{"GILF_VALIDATION_EXECUTOR=local"}, []string{"--executor", "cf-sandbox"}, "executor_unconfigured", exitUsage, "not set up to validate: executor managed-cf-sandbox"},
		{"unknown", nil, []string{"--executor", "docker"}, "executor_unknown", exitUnproven, "🛑 not validated — refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"validate"}, tt.args...), hello)
			r := gilf(t, tt.env, args...)
			r.want(t, tt.exit, tt.verdict, "`"+tt.code+"`", "⏭️ not run")
			if strings.Contains(r.stderr, "step install started") {
				t.Errorf("a refused run started a step:\n%s", r.stderr)
			}
		})
	}
}

func TestValidateRedactsWorkerSecrets(t *testing.T) {
	const value = "gilf-test-token-7f3a9c2e41"
	// The script builds the value from two halves: it never holds it.
	dir := copyHello(t, map[string]string{
		"test/leak.test.js": "'use strict';\nconst test = require('node:test');\n\ntest('prints a token', () => {\n" +
			"  console.log('token: ' + 'gilf-test-token-' + '7f3a9c2e41');\n});\n",
	})
	r := gilf(t, []string{"DEPLOY_TOKEN=" + value, "GILF_LOG_LEVEL=debug"}, "validate", "--json", dir)
	r.want(t, exitOK)
	if strings.Contains(r.stdout, value) || strings.Contains(r.stderr, value) {
		t.Fatalf("the secret value was printed")
	}
	var rec struct {
		Redactions      int      `json:"redactions"`
		SecretsWithheld []string `json:"secretsWithheld"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Redactions < 1 {
		t.Errorf("redactions = %d, want at least 1", rec.Redactions)
	}
	if !strings.Contains(strings.Join(rec.SecretsWithheld, ","), "DEPLOY_TOKEN") {
		t.Errorf("secretsWithheld = %v, want DEPLOY_TOKEN", rec.SecretsWithheld)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	hello := filepath.Join(repoRoot(t), "examples", "hello")
	notArchive := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notArchive, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	badArchive := filepath.Join(t.TempDir(), "bad.tar.gz")
	if err := os.WriteFile(badArchive, []byte("not gzip at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		env    []string
		args   []string
		stderr string
	}{
		{"no command", nil, nil, "usage: gilf"},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"no path", nil, []string{"validate"}, "want exactly one PATH"},
		{"two paths", nil, []string{"validate", hello, hello}, "want exactly one PATH"},
		{"unknown flag", nil, []string{"validate", "--nope", hello}, "flag provided but not defined"},
		{"bad timeout", nil, []string{"validate", "--timeout", "soon", hello}, "invalid value"},
		{"negative timeout", nil, []string{"validate", "--timeout", "-1s", hello}, "want a positive duration"},
		{"missing path", nil, []string{"validate", filepath.Join(t.TempDir(), "nope")}, "no such file"},
		{"not an archive", nil, []string{"validate", notArchive}, "neither a directory nor"},
		{"broken archive", nil, []string{"validate", badArchive}, "extract"},
		{"bad min tier", []string{"GILF_LOCAL_MIN_TIER=strong"}, []string{"validate", hello}, "GILF_LOCAL_MIN_TIER"},
		{"bad opt-in and level together", []string{"GILF_ALLOW_LOCAL_VALIDATION=yes", "GILF_LOG_LEVEL=loud"}, []string{"validate", hello}, "GILF_ALLOW_LOCAL_VALIDATION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gilf(t, tt.env, tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("a usage error printed to stdout:\n%s", r.stdout)
			}
		})
	}
}

func TestValidateTimeoutFlag(t *testing.T) {
	dir := copyHello(t, map[string]string{
		"package.json": `{"name":"slow","version":"1.0.0","scripts":{"test":"sleep 600","lint":"node scripts/lint.js"}}` + "\n",
	})
	if err := os.Remove(filepath.Join(dir, "package-lock.json")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Long enough for npm install on a loaded machine, short for a test.
	r := gilf(t, nil, "validate", "--timeout", "15s", dir)
	r.want(t, exitFailed, "| `test` | `npm run test` | ⏱️ timed out", "`test` timed out")
	if took := time.Since(start); took > 90*time.Second {
		t.Errorf("a 15s step timeout took %v", took)
	}
}

func TestValidateTimeoutFlagBoundary(t *testing.T) {
	hello := filepath.Join(repoRoot(t), "examples", "hello")
	r := gilf(t, nil, "validate", "--timeout", (MaxTimeout + time.Millisecond).String(), hello)
	if r.code != exitUsage || !strings.Contains(r.stderr, "want a positive duration up to 24h0m0s") {
		t.Errorf("--timeout one over the maximum: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	f, err := parseValidateFlags([]string{"--timeout", MaxTimeout.String(), hello, "--json"}, &bytes.Buffer{})
	if err != nil || f.timeout != MaxTimeout || !f.json || f.path != hello {
		t.Errorf("--timeout at the maximum, flags after PATH: %+v, %v", f, err)
	}
}

func TestValidateHelp(t *testing.T) {
	r := gilf(t, nil, "validate", "-h")
	if r.code != exitOK || !strings.Contains(r.stderr, "usage: gilf validate") {
		t.Errorf("validate -h: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestValidateInterrupt sends SIGINT while a step sleeps: gilf stops the
// run, kills the step's processes and exits 130 promptly.
func TestValidateInterrupt(t *testing.T) {
	const marker = "98761"
	dir := copyHello(t, map[string]string{
		"package.json": `{"name":"sleepy","version":"1.0.0","scripts":{"test":"sleep ` + marker + `"}}` + "\n",
	})
	if err := os.Remove(filepath.Join(dir, "package-lock.json")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), runBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, gilfBin, "validate", dir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	stderr := &syncBuffer{}
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), "step test started") {
		if time.Now().After(deadline) {
			t.Fatalf("the test step never started:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Errorf("gilf exited %v after SIGINT, want code %d\nstderr:\n%s", err, exitInterrupted, stderr.String())
	}
	if took > 15*time.Second {
		t.Errorf("gilf took %v to stop after SIGINT", took)
	}
	for end := time.Now().Add(10 * time.Second); ; {
		left := processesWith("sleep " + marker)
		if len(left) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the step's processes survived the interrupt: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesWith lists pids whose command line contains s.
func processesWith(s string) []string {
	var pids []string
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
