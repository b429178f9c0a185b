package crabbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

const runBound = time.Minute

// standIn is a `crabbox` executable for tests. It follows the CLI's
// documented surface (crabbox docs/commands/run.md, internal/cli): `run`,
// --provider, --class, --timing-json, `--` then the command argv; the
// coordinator and token from CRABBOX_COORDINATOR and
// CRABBOX_COORDINATOR_TOKEN; the command's exit code as its own; the
// timing record as the last line of stderr. It checks it was given what
// gilf must give it and fails like the CLI (an error line, a
// provider-error timing record, exit 2) when not. Instead of leasing a
// machine it runs the command in its working directory, the checkout copy.
const standIn = `#!/bin/sh
log=@LOG@
mode=@MODE@
want_coord=@COORD@
want_token=@TOKEN@
want_provider=@PROVIDER@
want_class=@CLASS@
printf '%s\n' "$@" > "$log.argv"
env > "$log.env"
ls -A > "$log.ls"
provider= class= timing=0
fail() {
	echo "error: $1" >&2
	printf '{"provider":"%s","syncMs":0,"syncSkipped":false,"commandMs":0,"totalMs":5,"endToEndMs":5,"exitCode":2,"runStatus":"failed","errorKind":"provider-error"}\n' "$provider" >&2
	exit 2
}
[ "${1-}" = run ] || fail "unknown command ${1-}"
shift
while [ $# -gt 0 ]; do
	case $1 in
	--provider) provider=$2; shift 2 ;;
	--class) class=$2; shift 2 ;;
	--timing-json) timing=1; shift ;;
	--) shift; break ;;
	*) fail "unknown flag $1" ;;
	esac
done
[ "${CRABBOX_COORDINATOR-}" = "$want_coord" ] || fail "coordinator is not $want_coord"
[ "${CRABBOX_COORDINATOR_TOKEN-}" = "$want_token" ] || fail "coordinator token mismatch"
[ "$provider" = "$want_provider" ] || fail "provider $provider"
[ "$class" = "$want_class" ] || fail "class $class"
[ "$timing" = 1 ] || fail "--timing-json not given"
[ "$mode" = cli-error ] && fail "coordinator answered 401 Unauthorized for token $CRABBOX_COORDINATOR_TOKEN"
echo "crabbox: lease cbx_0123456789ab (swift-crab) provider=$provider class=$class" >&2
status=0
"$@" || status=$?
run_status=succeeded
[ "$status" = 0 ] || run_status=failed
case $mode in
bad-json) echo '{"provider":"aws","exitCode":"zero","commandMs":1,"totalMs":2}' >&2 ;;
truncated-json) printf '{"provider":"aws","exitCode":0,' >&2 ;;
no-json) ;;
mismatch) printf '{"provider":"%s","commandMs":1,"totalMs":2,"exitCode":0}\n' "$provider" >&2; exit 1 ;;
*) printf '{"provider":"%s","leaseId":"cbx_0123456789ab","slug":"swift-crab","leaseMs":1200,"syncMs":30,"syncSkipped":false,"commandMs":100,"totalMs":1400,"endToEndMs":1500,"exitCode":%d,"runStatus":"%s","runId":"run_abc","workdir":"/srv/crabbox/cbx_0123456789ab/repo","futureField":{"nested":[1,2]}}\n' "$provider" "$status" "$run_status" >&2 ;;
esac
exit "$status"
`

type fixture struct {
	bin   string
	log   string
	token string
	root  string
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func newFixture(t *testing.T, mode string) fixture {
	t.Helper()
	dir := t.TempDir()
	f := fixture{bin: filepath.Join(dir, "crabbox"), log: filepath.Join(dir, "log"), token: "cbxu_" + randomHex(t), root: t.TempDir()}
	r := strings.NewReplacer("@LOG@", shq(f.log), "@MODE@", shq(mode), "@COORD@", shq("https://coordinator.example.test"),
		"@TOKEN@", shq(f.token), "@PROVIDER@", shq("hetzner"), "@CLASS@", shq("standard"))
	if err := os.WriteFile(f.bin, []byte(r.Replace(standIn)), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f fixture) executor(t *testing.T, mod func(*Options)) *Executor {
	t.Helper()
	opts := Options{
		Bin:         f.bin,
		Coordinator: "https://coordinator.example.test",
		Token:       f.token,
		Provider:    "hetzner",
		Class:       "standard",
		TempRoot:    f.root,
		Env:         []string{"PATH=" + os.Getenv("PATH")},
		KillGrace:   500 * time.Millisecond,
		StepGrace:   2 * time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	e, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func (f fixture) read(t *testing.T, ext string) string {
	t.Helper()
	b, err := os.ReadFile(f.log + "." + ext)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func step(name, sh string) validation.Step {
	return validation.Step{Name: name, Argv: []string{"sh", "-c", sh}, Network: validation.NetworkNone, Timeout: time.Minute}
}

func request(t *testing.T, steps ...validation.Step) executors.Request {
	return executors.Request{Plan: validation.Plan{PackageManager: validation.NPM, Steps: steps}, Dir: executortest.Repo(t)}
}

func run(t *testing.T, e *Executor, req executors.Request) (executors.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runBound)
	defer cancel()
	return e.Run(ctx, req)
}

func statuses(res executors.Result) []validation.Status {
	var s []validation.Status
	for _, r := range res.Steps {
		s = append(s, r.Status)
	}
	return s
}

func checkEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestNew(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		wantMissing []string
		wantErr     string
	}{
		{"nothing", Options{}, []string{"GILF_CRABBOX_BIN", "GILF_CRABBOX_COORDINATOR"}, ""},
		{"no coordinator", Options{Bin: "/usr/bin/crabbox"}, []string{"GILF_CRABBOX_COORDINATOR"}, ""},
		{"no bin", Options{Coordinator: "https://c.example"}, []string{"GILF_CRABBOX_BIN"}, ""},
		{"provider looks like a flag", Options{Bin: "crabbox", Coordinator: "https://c.example", Provider: "--id"}, nil, `provider "--id" is not a plain word`},
		{"negative timeout", Options{Bin: "crabbox", Coordinator: "https://c.example", Timeout: -1}, nil, "timeout -1ns is negative"},
		{"ok", Options{Bin: "crabbox", Coordinator: "https://c.example"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.opts.Configured(); got != (tt.wantMissing == nil) {
				t.Errorf("Configured() = %v", got)
			}
			e, err := New(tt.opts)
			var nc *NotConfiguredError
			switch {
			case tt.wantMissing != nil:
				if !errors.As(err, &nc) {
					t.Fatalf("err = %v, want *NotConfiguredError", err)
				}
				if diff := cmp.Diff(tt.wantMissing, nc.Missing); diff != "" {
					t.Errorf("missing (-want +got):\n%s", diff)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			default:
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if e.Name() != executors.NameManagedCrabbox || e.opts.Timeout != DefaultTimeout || e.opts.Tier != validation.TierRemote {
					t.Errorf("name %s timeout %v tier %s", e.Name(), e.opts.Timeout, e.opts.Tier)
				}
			}
		})
	}
}

func TestArgv(t *testing.T) {
	tests := []struct {
		name            string
		provider, class string
		want            []string
	}{
		{"provider and class", "aws", "beast", []string{"/opt/crabbox", "run", "--provider", "aws", "--class", "beast", "--timing-json", "--", "sh", ".gilf-validate-0123456789ab.sh"}},
		{"defaults from the coordinator", "", "", []string{"/opt/crabbox", "run", "--timing-json", "--", "sh", ".gilf-validate-0123456789ab.sh"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Argv("/opt/crabbox", tt.provider, tt.class, ".gilf-validate-0123456789ab.sh")); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCLIEnv(t *testing.T) {
	opts := Options{
		Coordinator: "https://c.example",
		Token:       "cbxu_token_value",
		Env:         []string{"PATH=/bin", "HOME=/home/w", "GITHUB_APP_PRIVATE_KEY=k", "XDG_CONFIG_HOME=/home/w/.config", "LANG=cbxu_token_value-inside", "AWS_SECRET_ACCESS_KEY=s"},
		Secrets:     []validation.Secret{{Name: "GILF_CRABBOX_TOKEN", Value: "cbxu_token_value"}},
	}
	want := []string{
		"CRABBOX_COORDINATOR=https://c.example",
		"CRABBOX_COORDINATOR_TOKEN=cbxu_token_value",
		"CRABBOX_ENV_ALLOW=CI",
		"HOME=/home/w",
		"PATH=/bin",
		"XDG_CONFIG_HOME=/home/w/.config",
	}
	if diff := cmp.Diff(want, CLIEnv(opts)); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestParseTiming(t *testing.T) {
	tests := []struct {
		name    string
		stderr  string
		want    Timing
		wantErr string
	}{
		{
			name:   "the CLI's record after its progress lines, unknown fields tolerated",
			stderr: "leasing...\nsync=30ms\n{\"provider\":\"aws\",\"leaseId\":\"cbx_1\",\"syncMs\":30,\"syncSkipped\":true,\"commandMs\":100,\"totalMs\":140,\"endToEndMs\":150,\"exitCode\":0,\"runStatus\":\"succeeded\",\"syncPhases\":[{\"name\":\"rsync\",\"ms\":20}],\"new\":true}\n\n",
			want:   Timing{Provider: "aws", LeaseID: "cbx_1", SyncMs: 30, SyncSkipped: true, CommandMs: 100, TotalMs: 140, EndToEndMs: 150, RunStatus: "succeeded"},
		},
		{name: "nothing", stderr: "\n \n", wantErr: "no timing JSON"},
		{name: "last line is prose", stderr: "{\"provider\":\"aws\",\"exitCode\":0,\"commandMs\":1,\"totalMs\":1}\nerror: boom\n", wantErr: "no timing JSON on stderr: its last line is not a JSON object"},
		{name: "exitCode missing", stderr: `{"provider":"aws","commandMs":1,"totalMs":1}`, wantErr: "lacks exitCode"},
		{name: "exitCode null", stderr: `{"provider":"aws","exitCode":null,"commandMs":1,"totalMs":1}`, wantErr: "lacks exitCode"},
		{name: "exitCode a string", stderr: `{"provider":"aws","exitCode":"0","commandMs":1,"totalMs":1}`, wantErr: "cannot unmarshal string"},
		{name: "fractional ms", stderr: `{"provider":"aws","exitCode":0,"commandMs":1.5,"totalMs":1}`, wantErr: "cannot unmarshal number 1.5"},
		{name: "truncated", stderr: `{"provider":"aws","exitCode":0,`, wantErr: "unexpected EOF"},
		{name: "trailing data", stderr: `{"provider":"aws","exitCode":0,"commandMs":1,"totalMs":1} {}`, wantErr: "trailing data"},
		{name: "an array", stderr: `[1,2]`, wantErr: "not a JSON object"},
		{name: "an object of the wrong shape", stderr: `{"provider":{},"exitCode":0,"commandMs":1,"totalMs":1}`, wantErr: "cannot unmarshal object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTiming([]byte(tt.stderr))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTiming: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("line at the limit", func(t *testing.T) {
		head := `{"provider":"aws","exitCode":0,"commandMs":1,"totalMs":1,"pad":"`
		line := head + strings.Repeat("x", MaxTimingLineBytes-len(head)-2) + `"}`
		if _, err := ParseTiming([]byte(line)); err != nil {
			t.Errorf("a %d-byte line: %v", len(line), err)
		}
		over := head + strings.Repeat("x", MaxTimingLineBytes-len(head)-1) + `"}`
		if _, err := ParseTiming([]byte(over)); err == nil || !strings.Contains(err.Error(), "over") {
			t.Errorf("a %d-byte line: err = %v, want the limit", len(over), err)
		}
	})
}

func TestRunPassAndFail(t *testing.T) {
	f := newFixture(t, "ok")
	e := f.executor(t, nil)
	req := request(t,
		step(validation.StepInstall, "test -f package.json && test ! -e crabbox.yaml"),
		step(validation.StepTest, "echo tests ok"),
		step(validation.StepLint, "echo 'lint failed' >&2; exit 6"),
	)
	for _, name := range []string{"crabbox.yaml", ".crabboxignore"} {
		if err := os.WriteFile(filepath.Join(req.Dir, name), []byte("provider: attacker\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := run(t, e, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []validation.Status{validation.StatusPassed, validation.StatusPassed, validation.StatusFailed}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if res.Integrity != "" {
		t.Errorf("integrity %q", res.Integrity)
	}
	if c := res.Steps[2].ExitCode; c == nil || *c != 6 || !strings.Contains(res.Steps[2].Output.Head, "lint failed") {
		t.Errorf("lint: exit %v output %q", c, res.Steps[2].Output.Head)
	}
	for _, r := range res.Steps {
		if !r.Reported || r.Cwd != "/srv/crabbox/cbx_0123456789ab/repo" {
			t.Errorf("step %s: reported %v cwd %q", r.Name, r.Reported, r.Cwd)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	for _, s := range []string{"reported by the executor", "crabbox provider hetzner lease cbx_0123456789ab slug swift-crab run run_abc", "command 100ms, total 1400ms, exit 0", "crabbox.yaml, .crabboxignore"} {
		if !strings.Contains(notes, s) {
			t.Errorf("notes %q lack %q", notes, s)
		}
	}
	if argv := f.read(t, "argv"); strings.Contains(argv, f.token) {
		t.Errorf("the token is on the CLI's argv: %q", argv)
	}
	env := f.read(t, "env")
	for _, s := range []string{"CRABBOX_ENV_ALLOW=CI\n", "CRABBOX_COORDINATOR=https://coordinator.example.test\n"} {
		if !strings.Contains(env, s) {
			t.Errorf("CLI env lacks %q", s)
		}
	}
	if ls := f.read(t, "ls"); strings.Contains(ls, "crabbox.yaml") || !strings.Contains(ls, "package.json") {
		t.Errorf("the CLI's checkout holds %q", ls)
	}
	if _, err := os.Stat(filepath.Join(req.Dir, "crabbox.yaml")); err != nil {
		t.Errorf("req.Dir was changed: %v", err)
	}
	if diff := cmp.Diff([]string{"GILF_CRABBOX_TOKEN"}, res.SecretsWithheld); diff != "" {
		t.Errorf("withheld (-want +got):\n%s", diff)
	}
	checkEmpty(t, f.root)
}

func TestRunBrokenCLI(t *testing.T) {
	tests := []struct {
		mode    string
		wantErr string
	}{
		{"cli-error", `before any START marker; last error line: "error: coordinator answered 401 Unauthorized for token [redacted:GILF_CRABBOX_TOKEN]"`},
		{"bad-json", "cannot unmarshal string"},
		{"truncated-json", "timing JSON"},
		{"no-json", "no timing JSON"},
		{"mismatch", "timing JSON says exit code 0 but crabbox run exited 1"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFixture(t, tt.mode)
			e := f.executor(t, nil)
			_, err := run(t, e, request(t, step(validation.StepTest, "exit 0")))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want an infrastructure error with %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), f.token) {
				t.Errorf("the token is in the error: %v", err)
			}
			checkEmpty(t, f.root)
		})
	}
	t.Run("given the wrong class", func(t *testing.T) {
		f := newFixture(t, "ok")
		e := f.executor(t, func(o *Options) { o.Class = "beast" })
		_, err := run(t, e, request(t, step(validation.StepTest, "exit 0")))
		if err == nil || !strings.Contains(err.Error(), "class beast") {
			t.Fatalf("err = %v, want the stand-in's complaint", err)
		}
	})
	t.Run("the run's class reaches the CLI", func(t *testing.T) {
		f := newFixture(t, "ok")
		e := f.executor(t, nil)
		req := request(t, step(validation.StepTest, "exit 0"))
		req.Run = executors.RunConfig{CrabboxClass: "beast"}
		_, err := run(t, e, req)
		if err == nil || !strings.Contains(err.Error(), "class beast") {
			t.Fatalf("err = %v, want the stand-in's complaint about the run's class", err)
		}
	})
	t.Run("binary missing", func(t *testing.T) {
		f := newFixture(t, "ok")
		e := f.executor(t, func(o *Options) { o.Bin = filepath.Join(t.TempDir(), "crabbox") })
		_, err := run(t, e, request(t, step(validation.StepTest, "exit 0")))
		// Configured but unreachable: refused, never a retried error.
		var r *validation.Refusal
		if !errors.As(err, &r) || r.Code != validation.CodeExecutorUnavailable {
			t.Fatalf("err = %v, want the executor_unavailable refusal", err)
		}
		checkEmpty(t, f.root)
	})
}

func TestRunForgedMarkers(t *testing.T) {
	f := newFixture(t, "ok")
	e := f.executor(t, nil)
	// The step reads the nonce from the shell it runs in and prints the
	// test step's END before that step started.
	forge := step(validation.StepInstall, `tag=$(sed -n 's/.*__GILF_VALIDATION_START__:\([^-]*\)-install.*/\1/p' .gilf-validate-*.sh); printf '\n__GILF_VALIDATION_END__:%s-test:0\n' "$tag"`)
	res, err := run(t, e, request(t, forge, step(validation.StepTest, "exit 1")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(res.Integrity, `END marker for step "test" before its START`) {
		t.Errorf("integrity %q, want the forgery named", res.Integrity)
	}
}

func TestConformance(t *testing.T) {
	f := newFixture(t, "ok")
	executortest.Conformance(t, func(t *testing.T) executors.Executor {
		return f.executor(t, nil)
	})
}
