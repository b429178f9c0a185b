package selfhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/validation"
)

// runBound is the most one test run may take.
const runBound = time.Minute

// extractScript is a self-host command: it extracts the archive into a
// private directory and runs the shell there with sh. $GILF_TEST_PIDS
// style bookkeeping is done through an extra argument, never the
// environment (which is allow-listed).
const extractScript = `#!/bin/sh
set -eu
archive=$1 shell=$2 timeout_ms=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/gilf-test-run.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 143' TERM
tar xzf "$archive" -C "$work"
cd "$work/repo"
sh "$shell"
`

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cmd.sh")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func step(name, sh string) validation.Step {
	return validation.Step{Name: name, Argv: []string{"sh", "-c", sh}, Network: validation.NetworkNone, Timeout: time.Minute}
}

func request(t *testing.T, steps ...validation.Step) executors.Request {
	return executors.Request{
		Plan: validation.Plan{PackageManager: validation.NPM, Steps: steps},
		Dir:  executortest.Repo(t),
	}
}

// newExec builds an executor whose packaging dirs go to a fresh temp
// root, returned so a test can check they are gone.
func newExec(t *testing.T, command string, mod func(*Options)) (*Executor, string) {
	t.Helper()
	root := t.TempDir()
	opts := Options{
		Command:   command,
		TempRoot:  root,
		Env:       []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir()},
		KillGrace: 500 * time.Millisecond,
		StepGrace: 500 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	e, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e, root
}

func checkPackagingGone(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("packaging left behind in %s: %v", root, entries)
	}
}

func statuses(res executors.Result) []validation.Status {
	var s []validation.Status
	for _, r := range res.Steps {
		s = append(s, r.Status)
	}
	return s
}

func run(t *testing.T, e *Executor, req executors.Request) (executors.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runBound)
	defer cancel()
	return e.Run(ctx, req)
}

func TestArgv(t *testing.T) {
	got := Argv(strings.Fields("  /opt/gilf/run  --region  eu-1 "), "/tmp/gilf-selfhost-1/repo.tar.gz", "/tmp/gilf-selfhost-1/validate.sh", DefaultTimeout)
	want := []string{"/opt/gilf/run", "--region", "eu-1", "/tmp/gilf-selfhost-1/repo.tar.gz", "/tmp/gilf-selfhost-1/validate.sh", "2700000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
}

func TestChildEnv(t *testing.T) {
	secrets := []validation.Secret{{Name: "GITHUB_APP_PRIVATE_KEY", Value: "-----BEGIN KEY-----abc"}, {Name: "SHORT", Value: "ab"}}
	tests := []struct {
		name    string
		worker  []string
		network validation.Network
		want    []string
	}{
		{
			name:    "allow-list only",
			worker:  []string{"PATH=/usr/bin", "HOME=/home/gilf", "LANG=C.UTF-8", "AWS_SECRET_ACCESS_KEY=x", "GITHUB_APP_PRIVATE_KEY=-----BEGIN KEY-----abc", "TZ=UTC", "LC_ALL=C", "TMPDIR=/var/tmp", "TERM=xterm"},
			network: validation.NetworkNone,
			want:    []string{"GILF_SELF_HOST_NETWORK=none", "HOME=/home/gilf", "LANG=C.UTF-8", "LC_ALL=C", "PATH=/usr/bin", "TMPDIR=/var/tmp", "TZ=UTC"},
		},
		{
			name:    "no PATH gets the default",
			worker:  []string{"HOME=/root"},
			network: validation.NetworkFull,
			want:    []string{"GILF_SELF_HOST_NETWORK=full", "HOME=/root", "PATH=" + DefaultPath},
		},
		{
			name:    "allow-listed variable holding a secret is dropped",
			worker:  []string{"HOME=/x-----BEGIN KEY-----abc", "LANG=ab"},
			network: validation.NetworkNone,
			want:    []string{"GILF_SELF_HOST_NETWORK=none", "LANG=ab", "PATH=" + DefaultPath},
		},
		{
			name:    "malformed entries ignored",
			worker:  []string{"PATH", "=x", "TZ=Europe/Paris"},
			network: validation.NetworkNone,
			want:    []string{"GILF_SELF_HOST_NETWORK=none", "PATH=" + DefaultPath, "TZ=Europe/Paris"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ChildEnv(tt.worker, tt.network, secrets)); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"unset", Options{}, ErrNotConfigured.Error()},
		{"blank", Options{Command: " \t "}, ErrNotConfigured.Error()},
		{"bad network", Options{Command: "x", Network: "some"}, `GILF_SELF_HOST_NETWORK "some"`},
		{"negative timeout", Options{Command: "x", Timeout: -time.Second}, "timeout -1s is negative"},
		{"negative grace and output", Options{Command: "x", KillGrace: -1, MaxOutputBytes: -1}, "max output bytes -1 is negative"},
		{"ok", Options{Command: "x"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if e.opts.Timeout != DefaultTimeout || e.opts.Network != validation.NetworkNone || e.opts.Tier != validation.TierRemote {
					t.Errorf("defaults: timeout %v network %q tier %q", e.opts.Timeout, e.opts.Network, e.opts.Tier)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	if _, err := New(Options{}); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("New(empty) = %v, want ErrNotConfigured", err)
	}
}

func TestPassAndFail(t *testing.T) {
	e, root := newExec(t, script(t, extractScript), nil)
	req := request(t,
		step(validation.StepInstall, "test -f package.json && echo installed"),
		step(validation.StepTest, "grep -q conformance package.json && echo tests ok"),
		step(validation.StepLint, "echo 'lint: 2 problems' >&2; exit 4"),
		step(validation.StepBuild, "echo built"),
	)
	res, err := run(t, e, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []validation.Status{validation.StatusPassed, validation.StatusPassed, validation.StatusFailed, validation.StatusPassed}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if res.Integrity != "" {
		t.Errorf("integrity %q on a clean run", res.Integrity)
	}
	lint := res.Steps[2]
	if lint.ExitCode == nil || *lint.ExitCode != 4 || !strings.Contains(lint.Output.Head, "lint: 2 problems") {
		t.Errorf("lint: exit %v output %q", lint.ExitCode, lint.Output.Head)
	}
	for _, r := range res.Steps {
		if !r.Reported {
			t.Errorf("step %s not marked reported by the executor", r.Name)
		}
	}
	if res.Tier != validation.TierRemote || res.Executor != executors.NameSelfHost {
		t.Errorf("tier %q executor %q", res.Tier, res.Executor)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "reported by the executor") {
		t.Errorf("notes %q do not say the statuses were reported by the executor", res.Notes)
	}
	checkPackagingGone(t, root)
}

// TestRealRepository runs npm on a real repository from the shared data:
// util-deprecate's test script is npm's default, which exits 1.
func TestRealRepository(t *testing.T) {
	dir := t.TempDir()
	tarball := shared.Data(t, "repos", "util-deprecate.tar.gz")
	if out, err := exec.Command("tar", "xzf", tarball, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", tarball, err, out)
	}
	home := t.TempDir()
	e, root := newExec(t, script(t, extractScript), func(o *Options) { o.Env = append(o.Env, "HOME="+home) })
	req := executors.Request{
		Plan: validation.Plan{PackageManager: validation.NPM, Steps: []validation.Step{
			{Name: validation.StepTest, Argv: []string{"npm", "test"}, Network: validation.NetworkNone, Timeout: time.Minute},
		}},
		Dir: filepath.Join(dir, "util-deprecate"),
	}
	res, err := run(t, e, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := res.Steps[0]
	if r.Status != validation.StatusFailed || r.ExitCode == nil || *r.ExitCode != 1 {
		t.Fatalf("npm test: %s exit %v, want failed exit 1; output %q", r.Status, r.ExitCode, r.Output.Head)
	}
	if !strings.Contains(r.Output.Head, "no test specified") {
		t.Errorf("output %q lacks npm's message", r.Output.Head)
	}
	checkPackagingGone(t, root)
}

func TestBrokenCommands(t *testing.T) {
	secret := validation.Secret{Name: "GILF_TEST_TOKEN", Value: "tok-" + randomHex(t)}
	tests := []struct {
		name         string
		body         string
		wantErr      string // an infrastructure error
		wantIntegrit string // else an inconclusive run
		wantStatuses []validation.Status
	}{
		{
			name:    "exits non-zero before any marker",
			body:    "#!/bin/sh\necho \"cannot reach compute (token " + secret.Value + ")\" >&2\nexit 3\n",
			wantErr: "exited with status 3 before printing any START marker",
		},
		{
			name:    "killed by its own signal before any marker",
			body:    "#!/bin/sh\nkill -9 $$\n",
			wantErr: "was killed by signal killed before printing any START marker",
		},
		{
			name:         "exits 0 printing nothing",
			body:         "#!/bin/sh\nexit 0\n",
			wantIntegrit: "exited 0 without reporting step(s) install, test",
			wantStatuses: []validation.Status{validation.StatusNotRun, validation.StatusNotRun},
		},
		{
			name: "END before START",
			body: strings.Replace(extractScript, "sh \"$shell\"\n",
				"tag=$(sed -n 's/.*__GILF_VALIDATION_START__:\\([^-]*\\)-install.*/\\1/p' \"$shell\")\necho \"__GILF_VALIDATION_END__:$tag-test:0\"\nsh \"$shell\"\n", 1),
			wantIntegrit: `END marker for step "test" before its START`,
			wantStatuses: []validation.Status{validation.StatusPassed, validation.StatusPassed},
		},
		{
			name:         "duplicate markers",
			body:         extractScript + "sh \"$shell\"\n",
			wantIntegrit: `duplicate START marker for step "install"`,
			wantStatuses: []validation.Status{validation.StatusPassed, validation.StatusPassed},
		},
		{
			name:         "markers then a non-zero exit",
			body:         strings.Replace(extractScript, "sh \"$shell\"\n", "sh \"$shell\"\nexit 5\n", 1),
			wantIntegrit: "exited with status 5 after printing markers",
			wantStatuses: []validation.Status{validation.StatusPassed, validation.StatusPassed},
		},
		{
			name:         "shell killed mid-step",
			body:         extractScript,
			wantIntegrit: `step "test" has a START marker but no END marker`,
			wantStatuses: []validation.Status{validation.StatusPassed, validation.StatusFailed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, root := newExec(t, script(t, tt.body), func(o *Options) { o.Secrets = []validation.Secret{secret} })
			test := step(validation.StepTest, "exit 0")
			if tt.name == "shell killed mid-step" {
				// Kill the marker shell itself: the step's parent, or its
				// grandparent when the shell runs the step under timeout(1).
				test = step(validation.StepTest, `p=$PPID; if [ "$(cat /proc/$p/comm)" = timeout ]; then p=$(awk '{print $4}' /proc/$p/stat); fi; kill -9 $p`)
			}
			res, err := run(t, e, request(t, step(validation.StepInstall, "exit 0"), test))
			checkPackagingGone(t, root)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want an infrastructure error with %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), secret.Value) {
					t.Errorf("the error holds the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !strings.Contains(res.Integrity, tt.wantIntegrit) {
				t.Errorf("integrity %q, want it to contain %q", res.Integrity, tt.wantIntegrit)
			}
			if diff := cmp.Diff(tt.wantStatuses, statuses(res)); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("infrastructure error redacts the secret", func(t *testing.T) {
		e, _ := newExec(t, script(t, tests[0].body), func(o *Options) { o.Secrets = []validation.Secret{secret} })
		_, err := run(t, e, request(t, step(validation.StepTest, "exit 0")))
		if err == nil || !strings.Contains(err.Error(), "[redacted:GILF_TEST_TOKEN]") {
			t.Errorf("err = %v, want the token redacted by name", err)
		}
	})
	t.Run("command not found", func(t *testing.T) {
		e, root := newExec(t, filepath.Join(t.TempDir(), "missing"), nil)
		_, err := run(t, e, request(t, step(validation.StepTest, "exit 0")))
		var r *validation.Refusal
		if !errors.As(err, &r) || r.Code != validation.CodeExecutorUnavailable {
			t.Errorf("err = %v, want the executor_unavailable refusal", err)
		}
		checkPackagingGone(t, root)
	})
}

// pidScript records its own pid and a TERM-ignoring grandchild's in
// argv[1], then waits.
const pidScript = `#!/bin/sh
pids=$1
trap '' TERM
sleep 1000 &
echo "$$ $!" > "$pids"
wait
`

func TestTimeoutKillsTree(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	e, root := newExec(t, script(t, pidScript)+" "+pids, func(o *Options) {
		o.Timeout = 500 * time.Millisecond
		o.KillGrace = 300 * time.Millisecond
	})
	start := time.Now()
	_, err := run(t, e, request(t, step(validation.StepTest, "exit 0")))
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "printed no START marker within GILF_SELF_HOST_TIMEOUT_MS") {
		t.Fatalf("err = %v, want the timeout as an infrastructure error", err)
	}
	if took > 10*time.Second {
		t.Errorf("Run took %v with a 500ms timeout", took)
	}
	checkGone(t, pids)
	checkPackagingGone(t, root)
}

func TestStepTimeoutKillsTree(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	e, root := newExec(t, script(t, extractScript), func(o *Options) {
		o.StepGrace = 200 * time.Millisecond
		o.KillGrace = 300 * time.Millisecond
	})
	slow := step(validation.StepTest, `trap "" TERM; sleep 1000 & echo "$$ $!" > '`+pids+`'; wait`)
	slow.Timeout = 300 * time.Millisecond
	req := request(t, step(validation.StepInstall, "exit 0"), slow, step(validation.StepBuild, "exit 0"))
	start := time.Now()
	res, err := run(t, e, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
	want := []validation.Status{validation.StatusPassed, validation.StatusTimedOut, validation.StatusNotRun}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if res.Integrity != "" {
		t.Errorf("integrity %q: the host's own kill is not a forgery", res.Integrity)
	}
	if d := res.Steps[1].Duration; d < slow.Timeout {
		t.Errorf("timed-out step lasted %v, less than its timeout", d)
	}
	if !strings.Contains(res.Steps[2].Reason, `step "test" timed out`) {
		t.Errorf("build reason %q", res.Steps[2].Reason)
	}
	checkGone(t, pids)
	checkPackagingGone(t, root)
}

func TestCancelAndPanicCleanUp(t *testing.T) {
	for _, mode := range []string{"cancel", "panic"} {
		t.Run(mode, func(t *testing.T) {
			pids := filepath.Join(t.TempDir(), "pids")
			e, root := newExec(t, script(t, extractScript), nil)
			req := request(t, step(validation.StepTest, `sleep 1000 & echo "$$ $!" > '`+pids+`'; wait`))
			ctx, cancel := context.WithTimeout(t.Context(), runBound)
			defer cancel()
			req.Progress = func(string, time.Time) {
				if mode == "panic" {
					panic("progress blew up")
				}
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			var err error
			var res executors.Result
			func() {
				defer func() {
					if p := recover(); p != nil && mode != "panic" {
						t.Errorf("unexpected panic %v", p)
					} else if p == nil && mode == "panic" {
						t.Error("the progress panic was swallowed")
					}
				}()
				res, err = e.Run(ctx, req)
			}()
			if mode == "cancel" {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
				if len(res.Steps) != 1 || res.Steps[0].Status != validation.StatusKilled {
					t.Errorf("steps %+v, want the test step killed", res.Steps)
				}
			}
			if mode == "cancel" {
				checkGone(t, pids)
			} else if _, err := os.Stat(pids); err == nil {
				checkGone(t, pids) // the step got as far as starting its child
			}
			checkPackagingGone(t, root)
		})
	}
}

func TestEnvironmentWithholdsSecrets(t *testing.T) {
	canary := "canary-" + randomHex(t)
	t.Setenv("GILF_TEST_CANARY_SECRET", canary)
	dump := filepath.Join(t.TempDir(), "env")
	e, _ := newExec(t, script(t, "#!/bin/sh\nenv > \"$1\"\n")+" "+dump, func(o *Options) {
		o.Env = os.Environ()
		o.Secrets = []validation.Secret{{Name: "GILF_TEST_CANARY_SECRET", Value: canary}}
	})
	res, err := run(t, e, request(t, step(validation.StepTest, "exit 0")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	env, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), canary) || strings.Contains(string(env), "GILF_TEST_CANARY_SECRET") {
		t.Errorf("the command's environment holds the worker's secret:\n%s", env)
	}
	if !strings.Contains(string(env), "GILF_SELF_HOST_NETWORK=none\n") {
		t.Errorf("the network intent is missing:\n%s", env)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		name, _, _ := strings.Cut(line, "=")
		switch name {
		case "PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", NetworkEnv, "PWD", "SHLVL", "_", "OLDPWD":
		default:
			t.Errorf("variable %s passed to the command", name)
		}
	}
	if diff := cmp.Diff([]string{"GILF_TEST_CANARY_SECRET"}, res.SecretsWithheld); diff != "" {
		t.Errorf("withheld (-want +got):\n%s", diff)
	}
}

func TestConformance(t *testing.T) {
	cmd := script(t, extractScript)
	executortest.Conformance(t, func(t *testing.T) executors.Executor {
		e, _ := newExec(t, cmd, func(o *Options) { o.StepGrace = 2 * time.Second })
		return e
	})
}

// TestExampleCommand runs examples/selfhost/run.sh, the command the README
// points at, under bwrap with the network intent none.
func TestExampleCommand(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bwrap is required (the test script installs bubblewrap): %v", err)
	}
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "selfhost", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	// The example drops to uid 65534 when started as root: its TMPDIR
	// must be reachable by that uid, as /tmp is.
	for p := tmp; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	// gilf's seccomp filter, as gilf seccomp-filter writes it.
	prog, err := local.SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	filter := filepath.Join(t.TempDir(), "seccomp.bpf")
	if err := os.WriteFile(filter, prog, 0o644); err != nil {
		t.Fatal(err)
	}
	e, root := newExec(t, example+" --seccomp "+filter, func(o *Options) { o.Env = append(o.Env, "TMPDIR="+tmp) })
	req := request(t,
		step(validation.StepInstall, "test -f package.json"),
		step(validation.StepTest, `test "$CI" = true && test "$(cat /proc/net/dev | wc -l)" -le 3 && echo no-network`),
		step(validation.StepBuild, "touch /etc/gilf-escape 2>/dev/null && exit 9; echo read-only-root"),
		// Unprivileged: not root, no /etc/shadow, no remount, no new
		// user namespace, nothing of the host's /etc but the list.
		step(validation.StepLint, `[ "$(id -u)" != 0 ] || exit 10
cat /etc/shadow 2>/dev/null && exit 11
[ ! -e /etc/shadow ] || exit 12
mount -o remount,rw / 2>/dev/null && exit 13
unshare -U true 2>/dev/null && exit 14
[ ! -e /root ] || exit 15
echo unprivileged`),
		// Under gilf's filter: the kernel reports one, and a netlink
		// socket (which an unprivileged process may open in its own
		// network namespace) is refused.
		step(validation.StepTypecheck, `f=0; while read -r k v; do [ "$k" = Seccomp: ] && [ "$v" = 2 ] && f=1; done < /proc/self/status
[ "$f" = 1 ] || exit 17
ip -o link 2>&1 | grep -q "Operation not permitted" || exit 16
echo netlink-denied`),
	)
	res, err := run(t, e, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []validation.Status{validation.StatusPassed, validation.StatusPassed, validation.StatusPassed, validation.StatusPassed, validation.StatusPassed}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s\n%+v", diff, res.Steps)
	}
	if res.Integrity != "" {
		t.Errorf("integrity %q", res.Integrity)
	}
	checkPackagingGone(t, root)
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the example left %v in its TMPDIR", left)
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

// checkGone fails unless every pid recorded in name is gone (a zombie
// awaiting a reaper that is not ours counts as gone).
func checkGone(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read pids: %v", err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid %q: %v", f, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d survived the run", pid)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Logf("kill %d: %v", pid, err)
			}
		}
	}
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
