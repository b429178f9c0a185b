package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// doctorWorld is a configuration gilf doctor finds nothing wrong with:
// the GitHub stand-in with the App's key and the permissions and events
// the README asks for, a self-host command that is executable, a
// cf-sandbox bridge that answers, the file evidence store.
type doctorWorld struct {
	srv  *githubtest.Server
	key  appKey
	env  map[string]string
	data string
}

func newDoctorWorld(t *testing.T, perms map[string]string, events []string) *doctorWorld {
	t.Helper()
	k := newAppKey(t)
	srv := githubtest.New(t, githubtest.Options{
		AppID: serveAppID, PublicKey: &k.key.PublicKey,
		AppPermissions: perms, AppEvents: events,
	})
	bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(bridge.Close)
	dir := t.TempDir()
	run := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(run, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	return &doctorWorld{srv: srv, key: k, data: data, env: map[string]string{
		"PATH":                         os.Getenv("PATH"),
		"HOME":                         t.TempDir(),
		"GILF_DATA_DIR":                data,
		"GILF_GITHUB_API_URL":          srv.URL,
		"GILF_GITHUB_APP_ID":           strconv.Itoa(serveAppID),
		"GILF_GITHUB_PRIVATE_KEY_PATH": k.path,
		"GILF_WEBHOOK_SECRET":          serveSecret,
		"GILF_SELF_HOST_COMMAND":       run + " --pool ci",
		"GILF_VALIDATION_EXECUTOR":     "self-host",
		"GILF_CF_SANDBOX_ENABLED":      "1",
		"GILF_CF_SANDBOX_URL":          bridge.URL,
		"GILF_CF_SANDBOX_TOKEN":        "cf-token-of-the-test",
		"GILF_EVIDENCE_ARTIFACTS":      "1",
	}}
}

func goodPermissions() map[string]string {
	return map[string]string{"checks": "write", "pull_requests": "write", "contents": "read", "metadata": "read"}
}

func goodEvents() []string {
	return []string{"pull_request", "check_run", "check_suite", "issue_comment"}
}

// runDoctorIn runs gilf doctor in process with env and returns its exit
// code and report lines by check name ("LEVEL detail").
func runDoctorIn(t *testing.T, env map[string]string) (int, map[string]string, string) {
	t.Helper()
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	var out, errOut bytes.Buffer
	code := run(t.Context(), Env{Stdout: &out, Stderr: &errOut, Getenv: serveEnvMap(env), Environ: environ}, []string{"doctor"})
	lines := map[string]string{}
	line := regexp.MustCompile(`^(ok|warn|FAIL)\s+(\S+(?: \S+)?)\s{2,}(.*)$`)
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			lines[m[2]] = m[1] + " " + m[3]
		}
	}
	return code, lines, out.String() + errOut.String()
}

func TestDoctorOK(t *testing.T) {
	w := newDoctorWorld(t, goodPermissions(), goodEvents())
	code, lines, out := runDoctorIn(t, w.env)
	if code != exitOK {
		t.Errorf("exit %d, want 0:\n%s", code, out)
	}
	want := map[string]string{
		"config":                      "ok every setting is valid",
		"environment":                 "ok no unknown GILF_* variable",
		"github app":                  "ok App gilf (id 4242) at " + w.srv.URL,
		"github permissions":          "ok checks: write, pull_requests: write, contents: read, metadata: read",
		"github events":               "ok pull_request, check_run, check_suite, issue_comment",
		"webhook secret":              "ok " + strconv.Itoa(len(serveSecret)) + " bytes",
		"default executor":            "ok self-host (chosen by GILF_VALIDATION_EXECUTOR)",
		"executor self-host":          "ok ",
		"executor managed-cf-sandbox": "ok ",
		"store":                       "ok " + filepath.Join(w.data, DBFileName) + " is migrated and takes writes",
		"evidence":                    "ok directory " + filepath.Join(w.data, "evidence") + " takes writes",
	}
	for name, prefix := range want {
		if !strings.HasPrefix(lines[name], prefix) {
			t.Errorf("%s: %q, want it to start with %q", name, lines[name], prefix)
		}
	}
	// Disk space is the machine's: any level but FAIL is this test's ok.
	if d := lines["disk"]; d == "" || strings.HasPrefix(d, "FAIL") {
		t.Errorf("disk: %q", d)
	}
	if !strings.Contains(out, "12 checks, 0 failed") {
		t.Errorf("summary missing:\n%s", out)
	}
	if strings.Contains(out, "cf-token-of-the-test") || strings.Contains(out, serveSecret) {
		t.Errorf("a secret was printed:\n%s", out)
	}
	// The App JWT went to GET /app, once.
	if n := w.srv.Count(githubtest.GetApp); n != 1 {
		t.Errorf("GET /app asked %d times, want once", n)
	}
	// The probes left nothing behind in the evidence directory.
	if left, _ := os.ReadDir(filepath.Join(w.data, "evidence")); len(left) != 0 {
		t.Errorf("evidence probe left %v", left)
	}
}

// TestDoctorLocal runs the local executor's isolation probe: a real
// sandbox.
func TestDoctorLocal(t *testing.T) {
	w := newDoctorWorld(t, goodPermissions(), goodEvents())
	w.env["GILF_ALLOW_LOCAL_VALIDATION"] = "1"
	w.env["GILF_VALIDATION_EXECUTOR"] = "local"
	code, lines, out := runDoctorIn(t, w.env)
	if code != exitOK {
		t.Errorf("exit %d, want 0:\n%s", code, out)
	}
	if l := lines["executor local"]; !regexp.MustCompile(`^ok isolation tier (read-only|no-network) \(at least no-network required\)$`).MatchString(l) {
		t.Errorf("executor local: %q\n%s", l, out)
	}
}

func TestDoctorFails(t *testing.T) {
	w := newDoctorWorld(t, goodPermissions(), goodEvents())
	// A closed port: the bridge is not reachable.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	w.env["GILF_GITHUB_PRIVATE_KEY_PATH"] = newAppKey(t).path // not the App's key
	w.env["GILF_WEBHOOK_SECRET"] = "too-short"
	w.env["GILF_CF_SANDBOX_URL"] = closed
	w.env["GILF_WORKER"] = "2"
	code, lines, out := runDoctorIn(t, w.env)
	if code != exitFailed {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	want := map[string]string{
		"github app":                  "FAIL GitHub refused the App JWT (401)",
		"webhook secret":              "FAIL GILF_WEBHOOK_SECRET is 9 bytes: want at least 16",
		"executor managed-cf-sandbox": "FAIL " + closed + " is not reachable",
		"environment":                 "FAIL GILF_WORKER is set but gilf reads no such variable; did you mean GILF_WORKERS?",
		"store":                       "ok ",
	}
	for name, prefix := range want {
		if !strings.HasPrefix(lines[name], prefix) {
			t.Errorf("%s: %q, want it to start with %q", name, lines[name], prefix)
		}
	}
	if _, ok := lines["github permissions"]; ok {
		t.Errorf("permissions checked without an authenticated App:\n%s", out)
	}
	if !strings.Contains(out, "4 failed") {
		t.Errorf("want 4 failed checks:\n%s", out)
	}
}

func TestDoctorAppSetUp(t *testing.T) {
	tests := []struct {
		name     string
		perms    map[string]string
		events   []string
		perm, ev string
		code     int
	}{
		{"missing checks and pull requests", map[string]string{"contents": "read", "metadata": "read", "pull_requests": "read"}, goodEvents(),
			"FAIL the App lacks checks: write (has none), pull_requests: write (has read)", "ok ", exitFailed},
		{"more than needed", map[string]string{"checks": "write", "pull_requests": "write", "contents": "write", "metadata": "read", "issues": "write"}, goodEvents(),
			"warn the App has more than gilf needs: contents: write, issues: write", "ok ", exitOK},
		{"no pull_request events", goodPermissions(), []string{"check_run"},
			"ok ", "FAIL the App is not subscribed to pull_request", exitFailed},
		{"no check events", goodPermissions(), []string{"pull_request"},
			"ok ", "warn the App is not subscribed to check_run, check_suite", exitOK},
		{"no comment events", goodPermissions(), []string{"pull_request", "check_run", "check_suite"},
			"ok ", "warn the App is not subscribed to issue_comment", exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newDoctorWorld(t, tt.perms, tt.events)
			code, lines, out := runDoctorIn(t, w.env)
			if code != tt.code {
				t.Errorf("exit %d, want %d:\n%s", code, tt.code, out)
			}
			if !strings.HasPrefix(lines["github permissions"], tt.perm) {
				t.Errorf("permissions: %q, want %q", lines["github permissions"], tt.perm)
			}
			if !strings.HasPrefix(lines["github events"], tt.ev) {
				t.Errorf("events: %q, want %q", lines["github events"], tt.ev)
			}
		})
	}
}
