package local

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/validation"
)

// helperEnv makes the test binary act as a worker that is not root (see
// TestMain).
const helperEnv = "GILF_LOCAL_TEST_HELPER"

func TestMain(m *testing.M) {
	// Install steps run this test binary as their egress bridge.
	egress.MaybeRunBridge()
	maybeRunSyscallProbe()
	maybeRunHelperAttack()
	maybeRunBypass()
	switch os.Getenv(helperEnv) {
	case "unprivileged-run":
		os.Exit(unprivilegedRun())
	case "sleeping-run":
		os.Exit(sleepingRun())
	}
	code := m.Run()
	if err := stopRegistry(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the registry:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// unprivilegedRun is the body of TestNotRootIsRefused, run as uid 65534.
func unprivilegedRun() int {
	dir, err := os.MkdirTemp("", "gilf-helper-")
	if err != nil {
		fmt.Println("mkdir:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	e, err := New(nil, Options{WorkRoot: dir, SandboxUID: 300001, SandboxGID: 300001})
	if err != nil {
		fmt.Println("new:", err)
		return 2
	}
	_, err = e.Run(context.Background(), executors.Request{Dir: dir, Plan: validation.Plan{Steps: []validation.Step{{Name: "test", Argv: []string{"true"}}}}})
	var r *validation.Refusal
	if !errors.As(err, &r) {
		fmt.Println("not a refusal:", err)
		return 2
	}
	entries, _ := os.ReadDir(dir)
	fmt.Printf("code=%s entries=%d\n", r.Code, len(entries))
	return 0
}

func TestNotRootIsRefused(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The build directory is private to root: run a copy.
	dir := workRoot(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{helperEnv + "=unprivileged-run", "TMPDIR=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	// The verdict is on stdout alone: under -cover the copy also warns on
	// stderr that it has nowhere to write coverage (GOCOVERDIR).
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s%s", err, out, stderr.Bytes())
	}
	if got := strings.TrimSpace(string(out)); got != "code=sandbox_user_unavailable entries=0" {
		t.Errorf("helper said %q (stderr: %q)", got, stderr.String())
	}
}

func TestRunLifecycle(t *testing.T) {
	dir := repo(t, map[string]string{
		"package.json": `{"name":"app","version":"1.0.0","dependencies":{"local-dep":"file:./local-dep"},
"scripts":{"test":"node test.js","lint":"echo lint problem >&2; exit 2","build":"node -e \"require('fs').writeFileSync('dist.txt','built')\""}}`,
		"test.js":                "const dep = require('local-dep'); if (dep() !== 42) process.exit(1); console.log('test ok', process.env.CI)\n",
		"local-dep/package.json": `{"name":"local-dep","version":"1.0.0","main":"index.js"}`,
		"local-dep/index.js":     "module.exports = () => 42\n",
	})
	e := newExec(t, Options{})
	var mu sync.Mutex
	var started []string
	req := executors.Request{
		Dir: dir,
		Plan: validation.Plan{PackageManager: validation.NPM, Steps: []validation.Step{
			{Name: validation.StepInstall, Argv: []string{"npm", "install", "--offline", "--no-audit", "--no-fund"}, Network: validation.NetworkRegistry, Timeout: 2 * time.Minute},
			{Name: validation.StepTest, Argv: []string{"npm", "run", "test"}, Script: "node test.js", Network: validation.NetworkNone, Timeout: time.Minute},
			{Name: validation.StepTypecheck, Argv: []string{"npm", "run", "typecheck"}, Script: "true", Network: validation.NetworkNone, Inconclusive: "script can only succeed"},
			{Name: validation.StepLint, Argv: []string{"npm", "run", "lint"}, Network: validation.NetworkNone, Timeout: time.Minute},
			{Name: validation.StepBuild, Argv: []string{"npm", "run", "build"}, Network: validation.NetworkNone},
		}},
		Progress: func(step string, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, step)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := e.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff([]string{"install", "test", "lint", "build"}, started); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	type brief struct {
		Name    string
		Status  validation.Status
		Exit    any
		Network validation.Network
		Cwd     string
		Timeout int64
	}
	var got []brief
	for _, s := range res.Steps {
		got = append(got, brief{s.Name, s.Status, derefInt(s.ExitCode), s.Network, s.Cwd, s.TimeoutMs})
	}
	want := []brief{
		{"install", validation.StatusPassed, 0, validation.NetworkRegistry, "/workspace", 120000},
		{"test", validation.StatusPassed, 0, validation.NetworkNone, "/workspace", 60000},
		{"typecheck", validation.StatusInconclusive, nil, validation.NetworkNone, "/workspace", DefaultStepTimeout.Milliseconds()},
		{"lint", validation.StatusFailed, 2, validation.NetworkNone, "/workspace", 60000},
		{"build", validation.StatusPassed, 0, validation.NetworkNone, "/workspace", DefaultStepTimeout.Milliseconds()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
		for _, s := range res.Steps {
			t.Logf("%s: %s\n%s", s.Name, s.Reason, s.Output.Head)
		}
	}
	if !strings.Contains(res.Steps[1].Output.Head, "test ok true") {
		t.Errorf("test output %q: want CI=true inside", res.Steps[1].Output.Head)
	}
	if !strings.Contains(res.Steps[3].Output.Head, "lint problem") {
		t.Errorf("stderr missing from the output: %q", res.Steps[3].Output.Head)
	}
	if res.Steps[2].Reason != "script can only succeed" {
		t.Errorf("inconclusive reason %q", res.Steps[2].Reason)
	}
	if res.Executor != "local" || res.Tier != validation.TierReadOnly {
		t.Errorf("executor %q tier %q", res.Executor, res.Tier)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(res.Platform.Node) || res.Platform.OS != "linux" || res.Platform.Kernel == "" || res.Platform.Arch == "" {
		t.Errorf("platform %+v", res.Platform)
	}
	if res.Resources.VCPU != DefaultCPUs || res.Resources.MemoryGiB != 4 {
		t.Errorf("resources %+v", res.Resources)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, w := range []string{"limits in force per step: memory 4294967296 bytes, 512 pids, 2 CPUs"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	if strings.Contains(notes, "host network") {
		t.Errorf("notes speak of the host network:\n%s", notes)
	}
	// The offline install reached nothing, through a proxy that was there.
	if eg := res.Steps[0].Egress; eg == nil || eg.Enforcement != validation.EnforcedByWorker || len(eg.Allowed)+len(eg.Denied) != 0 || eg.Summary() != "registry via proxy: 0 hosts" {
		t.Errorf("install egress %+v", eg)
	}
	if res.Started.IsZero() || res.Finished.Before(res.Started) {
		t.Errorf("started %v finished %v", res.Started, res.Finished)
	}
	for _, s := range res.Steps {
		if s.Status == validation.StatusPassed && (s.Duration <= 0 || s.DurationMs != s.Duration.Milliseconds()) {
			t.Errorf("%s: duration %v / %d ms", s.Name, s.Duration, s.DurationMs)
		}
	}
}

func TestInstallFailureStopsLaterSteps(t *testing.T) {
	e := newExec(t, Options{})
	res := runPlan(t, e, repo(t, nil),
		shStep(validation.StepInstall, "echo cannot install; exit 7", 10*time.Second),
		shStep(validation.StepTest, "echo should not run", 10*time.Second),
		validation.Step{Name: validation.StepLint, Argv: []string{"true"}, Inconclusive: "only succeeds"},
		shStep(validation.StepBuild, "echo should not run", 10*time.Second),
	)
	got := []validation.Status{res.Steps[0].Status, res.Steps[1].Status, res.Steps[2].Status, res.Steps[3].Status}
	want := []validation.Status{validation.StatusFailed, validation.StatusNotRun, validation.StatusInconclusive, validation.StatusNotRun}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if res.Steps[1].Reason != "the install step did not pass" || res.Steps[1].ExitCode != nil {
		t.Errorf("not-run step: %+v", res.Steps[1])
	}
}

func TestStepTimeoutDefaultBoundary(t *testing.T) {
	e := newExec(t, Options{StepTimeout: 1500 * time.Millisecond, KillGrace: 100 * time.Millisecond})
	res := runPlan(t, e, repo(t, nil),
		shStep("under", "sleep 0.5", 0),
		shStep("over", "sleep 5", 0),
	)
	wantStatus(t, res.Steps[0], validation.StatusPassed)
	wantStatus(t, res.Steps[1], validation.StatusTimedOut)
	if res.Steps[1].TimeoutMs != 1500 || res.Steps[1].Duration > 4*time.Second {
		t.Errorf("timeout %d ms, ran %s", res.Steps[1].TimeoutMs, res.Steps[1].Duration)
	}
}

func TestCancel(t *testing.T) {
	e := newExec(t, Options{KillGrace: 500 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := executors.Request{Dir: repo(t, nil), Plan: validation.Plan{Steps: []validation.Step{
		shStep("test", "trap '' TERM; sleep 1000", time.Hour),
		shStep("lint", "true", time.Hour),
	}}, Progress: func(step string, _ time.Time) {
		if step == "test" {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
	}}
	start := time.Now()
	res, err := e.Run(ctx, req)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run returned %s after the cancel", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if len(res.Steps) != 2 {
		t.Fatalf("steps: %+v", res.Steps)
	}
	wantStatus(t, res.Steps[0], validation.StatusKilled)
	wantStatus(t, res.Steps[1], validation.StatusNotRun)
	if !strings.Contains(res.Steps[0].Reason, "cancelled") {
		t.Errorf("reason %q", res.Steps[0].Reason)
	}
}

func TestTierRefusals(t *testing.T) {
	tests := []struct {
		name     string
		opts     func(t *testing.T) Options
		wantTier validation.Tier
	}{
		{"no bwrap, default minimum", func(t *testing.T) Options {
			return Options{BwrapPath: filepath.Join(t.TempDir(), "bwrap")}
		}, validation.TierNone},
		{"no cgroups, read-only demanded", func(t *testing.T) Options {
			return Options{CgroupRoot: t.TempDir(), MinTier: validation.TierReadOnly}
		}, validation.TierNoNetwork},
		{"bwrap fails, no-network demanded", func(t *testing.T) Options {
			return Options{BwrapPath: "/bin/false"}
		}, validation.TierNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts(t)
			e := newExec(t, opts)
			tier, err := e.Tier(context.Background())
			if err != nil || tier != tt.wantTier {
				t.Fatalf("Tier = %s, %v; want %s", tier, err, tt.wantTier)
			}
			res, err := e.Run(context.Background(), executors.Request{Dir: repo(t, nil), Plan: validation.Plan{Steps: []validation.Step{shStep("test", "true", time.Second)}}})
			var r *validation.Refusal
			if !errors.As(err, &r) || r.Code != validation.CodeIsolationTierUnmet {
				t.Fatalf("Run: %v, want refusal %s", err, validation.CodeIsolationTierUnmet)
			}
			if !strings.Contains(r.Msg, string(tt.wantTier)) {
				t.Errorf("message %q does not name the tier", r.Msg)
			}
			if diff := cmp.Diff(executors.Result{}, res); diff != "" {
				t.Errorf("a refusal carries an empty result:\n%s", diff)
			}
		})
	}
}

// Tier none, when allowed: process hardening only, but still the sandbox
// uid, a cleared environment and the kill of the process group.
func TestTierNoneHardening(t *testing.T) {
	t.Setenv("GILF_TEST_CANARY", "canary-value-in-worker-env")
	e := newExec(t, Options{BwrapPath: filepath.Join(t.TempDir(), "missing-bwrap"), MinTier: validation.TierNone, KillGrace: 200 * time.Millisecond})
	res := runPlan(t, e, repo(t, map[string]string{"package.json": "{}"}),
		shStep("test", `id -u; env | sort; pwd; test -f package.json`, 10*time.Second),
		shStep("lint", `sleep 1000`, time.Second),
	)
	if res.Tier != validation.TierNone {
		t.Errorf("tier %s", res.Tier)
	}
	s := res.Steps[0]
	wantStatus(t, s, validation.StatusPassed)
	out := s.Output.Head
	if !strings.HasPrefix(out, fmt.Sprint(e.opts.SandboxUID)+"\n") || strings.Contains(out, "canary-value") || !strings.Contains(out, "CI=true") {
		t.Errorf("output:\n%s", out)
	}
	if s.Network != validation.NetworkHost || s.Egress == nil || s.Egress.Enforcement != validation.EnforcedNone {
		t.Errorf("tier none has no network namespace; recorded %s %+v", s.Network, s.Egress)
	}
	wantStatus(t, res.Steps[1], validation.StatusTimedOut)
}

func TestBadCheckoutIsAnError(t *testing.T) {
	e := newExec(t, Options{})
	f := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{f, filepath.Join(t.TempDir(), "missing")} {
		_, err := e.Run(context.Background(), executors.Request{Dir: dir, Plan: validation.Plan{Steps: []validation.Step{shStep("test", "true", time.Second)}}})
		var r *validation.Refusal
		if err == nil || errors.As(err, &r) {
			t.Errorf("Run(%s) = %v, want an infrastructure error", dir, err)
		}
	}
}

func TestConcurrentRuns(t *testing.T) {
	e := newExec(t, Options{})
	var wg sync.WaitGroup
	results := make([]executors.Result, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Go(func() {
			dir := repo(t, map[string]string{"id.txt": fmt.Sprint(i)})
			results[i], errs[i] = e.Run(context.Background(), executors.Request{Dir: dir, Plan: validation.Plan{Steps: []validation.Step{
				shStep("test", "cat id.txt; echo x >> id.txt; sleep 0.3; cat id.txt", 30*time.Second),
			}}})
		})
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		s := results[i].Steps[0]
		if want := fmt.Sprintf("%d%dx\n", i, i); s.Status != validation.StatusPassed || s.Output.Head != want {
			t.Errorf("run %d: %s %q, want %q", i, s.Status, s.Output.Head, want)
		}
	}
}

// The real util-deprecate repository: install with no dependencies and no
// network, its own (failing by design) npm test, and a check of its code.
func TestUtilDeprecateRepo(t *testing.T) {
	dir := untar(t, shared.Data(t, "repos", "util-deprecate.tar.gz"))
	e := newExec(t, Options{})
	res := runPlan(t, e, dir,
		validation.Step{Name: validation.StepInstall, Argv: []string{"npm", "install", "--offline", "--no-audit", "--no-fund"}, Network: validation.NetworkNone, Timeout: 2 * time.Minute},
		validation.Step{Name: validation.StepTest, Argv: []string{"npm", "test"}, Timeout: time.Minute},
		validation.Step{Name: validation.StepBuild, Argv: []string{"node", "-e", `const d = require("./node.js"); let warned = false; process.on("warning", () => { warned = true }); d(() => 1, "old")(); setTimeout(() => { if (!warned) process.exit(1); console.log("deprecation warned") }, 100)`}, Timeout: time.Minute},
	)
	wantStatus(t, res.Steps[0], validation.StatusPassed)
	wantStatus(t, res.Steps[1], validation.StatusFailed)
	if e := derefInt(res.Steps[1].ExitCode); e != 1 || !strings.Contains(res.Steps[1].Output.Head, "Error: no test specified") {
		t.Errorf("npm test: exit %v output %q", e, res.Steps[1].Output.Head)
	}
	wantStatus(t, res.Steps[2], validation.StatusPassed)
}

// untar extracts a trusted test tarball and returns its single top dir.
func untar(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	tr := tar.NewReader(zr)
	top := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			t.Fatalf("bad entry %q", h.Name)
		}
		top, _, _ = strings.Cut(name, string(filepath.Separator))
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(io.LimitReader(tr, 10<<20))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(dst, top)
}

// A probe that cannot run refuses as unknown, and is tried again.
func TestTierUnknownIsNotCached(t *testing.T) {
	root := filepath.Join(workRoot(t), "later")
	e := newExec(t, Options{WorkRoot: root})
	// New made the work root; gone before the first run, the probe
	// cannot run.
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	req := executors.Request{Dir: repo(t, nil), Plan: validation.Plan{Steps: []validation.Step{shStep("test", "true", 10*time.Second)}}}
	_, err := e.Run(context.Background(), req)
	var r *validation.Refusal
	if !errors.As(err, &r) || r.Code != validation.CodeIsolationTierUnknown {
		t.Fatalf("Run without a work root: %v, want refusal %s", err, validation.CodeIsolationTierUnknown)
	}
	if err := os.Mkdir(root, 0o711); err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), req)
	if err != nil || res.Steps[0].Status != validation.StatusPassed {
		t.Fatalf("Run once the work root exists: %v %+v", err, res.Steps)
	}
}

// What the workspace copy leaves out is said, quoted.
func TestSkippedFilesNoted(t *testing.T) {
	dir := repo(t, map[string]string{"package.json": "{}"})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe\nname"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, Options{})
	res := runPlan(t, e, dir, shStep("test", `test -f package.json && test ! -e "pipe
name"`, 10*time.Second))
	wantStatus(t, res.Steps[0], validation.StatusPassed)
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, `not copied into the workspace (special files or hard links): "pipe\nname"`) {
		t.Errorf("notes:\n%s", notes)
	}
}
