package executortest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// Bounds of the conformance suite. They are generous for remote executors
// and still catch an executor that waits out a step's budget.
const (
	// RunBound is the most any one conformance run may take.
	RunBound = 3 * time.Minute
	// CancelBound is how soon Run must return after its ctx is cancelled.
	CancelBound = 10 * time.Second
	// CancelAfter is how long the sleeping step runs before the cancel.
	CancelAfter = 200 * time.Millisecond
	// StepTimeout is the timeout of the step that must time out.
	StepTimeout = 1500 * time.Millisecond
	// TimeoutBound is how long after StepTimeout the run may still take.
	TimeoutBound = 10 * time.Second
	// stepBudget is the timeout of every step that should finish.
	stepBudget = 2 * time.Minute
)

// Conformance checks that the executors returned by newExecutor keep the
// lifecycle written on executors.Executor. Every step is `sh -c …`, so any
// executor with a POSIX shell can pass. It uses t.Setenv: do not call it
// from a parallel test.
func Conformance(t *testing.T, newExecutor func(t *testing.T) executors.Executor) {
	t.Run("StatusesInPlanOrder", func(t *testing.T) { testStatuses(t, newExecutor(t)) })
	t.Run("InstallFailureStopsLaterSteps", func(t *testing.T) { testInstallFailure(t, newExecutor(t)) })
	t.Run("InconclusiveNotRun", func(t *testing.T) { testInconclusive(t, newExecutor(t)) })
	t.Run("OutputCaptured", func(t *testing.T) { testOutput(t, newExecutor(t)) })
	t.Run("SecretRedacted", func(t *testing.T) { testSecret(t, newExecutor(t)) })
	t.Run("Environment", func(t *testing.T) { testEnvironment(t, newExecutor(t)) })
	t.Run("DirUntouched", func(t *testing.T) { testDirUntouched(t, newExecutor(t)) })
	t.Run("StepTimeout", func(t *testing.T) { testTimeout(t, newExecutor(t)) })
	t.Run("Cancellation", func(t *testing.T) { testCancel(t, newExecutor(t)) })
	t.Run("ConcurrentRuns", func(t *testing.T) { testConcurrent(t, newExecutor(t)) })
}

// Sh is a step that runs script with sh -c.
func Sh(name, script string) validation.Step {
	return validation.Step{Name: name, Argv: []string{"sh", "-c", script}, Network: validation.NetworkNone, Timeout: stepBudget}
}

// Repo makes a small repository directory for a request.
func Repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"package.json": `{"name":"conformance","version":"1.0.0","scripts":{"test":"node --test"}}` + "\n",
		"README.md":    "conformance\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
	}
	return dir
}

type progressLog struct {
	mu    sync.Mutex
	steps []string
	ch    chan string
}

func (p *progressLog) report(step string, _ time.Time) {
	p.mu.Lock()
	p.steps = append(p.steps, step)
	p.mu.Unlock()
	select {
	case p.ch <- step:
	default:
	}
}

func (p *progressLog) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.steps...)
}

func request(t *testing.T, steps ...validation.Step) executors.Request {
	return executors.Request{
		Plan:   validation.Plan{PackageManager: validation.NPM, PackageManagerSource: "default", Steps: steps},
		Dir:    Repo(t),
		Labels: map[string]string{"test": t.Name()},
	}
}

func run(t *testing.T, e executors.Executor, req executors.Request) executors.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), RunBound)
	defer cancel()
	res, err := e.Run(ctx, req)
	if err != nil {
		t.Fatalf("%s Run: %v", e.Name(), err)
	}
	checkShape(t, req, res)
	return res
}

// checkShape checks what holds for every result: one StepResult per step
// in plan order echoing the plan, exit codes only for exited steps.
func checkShape(t *testing.T, req executors.Request, res executors.Result) {
	t.Helper()
	if len(res.Steps) != len(req.Plan.Steps) {
		t.Fatalf("got %d step results for %d planned steps: %+v", len(res.Steps), len(req.Plan.Steps), res.Steps)
	}
	for i, st := range req.Plan.Steps {
		r := res.Steps[i]
		if r.Name != st.Name {
			t.Errorf("step %d: name %q, want %q (plan order)", i, r.Name, st.Name)
		}
		if !slices.Equal(r.Argv, st.Argv) {
			t.Errorf("step %s: command %q, want %q", st.Name, r.Argv, st.Argv)
		}
		if r.Network != st.Network {
			t.Errorf("step %s: network %q, want %q", st.Name, r.Network, st.Network)
		}
		if r.TimeoutMs != st.Timeout.Milliseconds() {
			t.Errorf("step %s: timeoutMs %d, want %d", st.Name, r.TimeoutMs, st.Timeout.Milliseconds())
		}
		switch r.Status {
		case validation.StatusPassed:
			if r.ExitCode == nil || *r.ExitCode != 0 {
				t.Errorf("step %s passed with exit code %v, want 0", st.Name, show(r.ExitCode))
			}
		case validation.StatusFailed:
			if r.ExitCode != nil && *r.ExitCode == 0 {
				t.Errorf("step %s failed with exit code 0", st.Name)
			}
		case validation.StatusNotRun, validation.StatusInconclusive:
			if r.ExitCode != nil {
				t.Errorf("step %s is %s but has exit code %d", st.Name, r.Status, *r.ExitCode)
			}
			if r.Reason == "" {
				t.Errorf("step %s is %s without a reason", st.Name, r.Status)
			}
		case validation.StatusTimedOut, validation.StatusKilled:
		default:
			t.Errorf("step %s: unknown status %q", st.Name, r.Status)
		}
		if r.DurationMs != r.Duration.Milliseconds() || r.Duration < 0 {
			t.Errorf("step %s: duration %v and durationMs %d disagree", st.Name, r.Duration, r.DurationMs)
		}
	}
	if res.Executor == "" {
		t.Error("result names no executor")
	}
	if res.Tier == "" {
		t.Error("result names no isolation tier")
	}
}

func show(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}

func statuses(res executors.Result) []validation.Status {
	var s []validation.Status
	for _, r := range res.Steps {
		s = append(s, r.Status)
	}
	return s
}

func text(o validation.Output) string { return o.Head + o.Tail }

func testStatuses(t *testing.T, e executors.Executor) {
	req := request(t,
		Sh(validation.StepInstall, "exit 0"),
		Sh(validation.StepTest, "echo hi; exit 0"),
		Sh(validation.StepLint, "exit 3"),
		Sh(validation.StepBuild, "echo built"),
	)
	p := &progressLog{ch: make(chan string, 8)}
	req.Progress = p.report
	res := run(t, e, req)
	want := []validation.Status{validation.StatusPassed, validation.StatusPassed, validation.StatusFailed, validation.StatusPassed}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if c := res.Steps[2].ExitCode; c == nil || *c != 3 {
		t.Errorf("lint exit code %v, want 3", show(c))
	}
	if diff := cmp.Diff([]string{"install", "test", "lint", "build"}, p.got()); diff != "" {
		t.Errorf("progress reports (-want +got):\n%s", diff)
	}
}

func testInstallFailure(t *testing.T, e executors.Executor) {
	req := request(t,
		Sh(validation.StepInstall, "echo cannot install; exit 1"),
		Sh(validation.StepTest, "exit 0"),
		Sh(validation.StepBuild, "exit 0"),
	)
	res := run(t, e, req)
	want := []validation.Status{validation.StatusFailed, validation.StatusNotRun, validation.StatusNotRun}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if c := res.Steps[0].ExitCode; c == nil || *c != 1 {
		t.Errorf("install exit code %v, want 1", show(c))
	}
	if !strings.Contains(text(res.Steps[0].Output), "cannot install") {
		t.Errorf("install output %q lacks its message", text(res.Steps[0].Output))
	}
}

func testInconclusive(t *testing.T, e executors.Executor) {
	incon := Sh(validation.StepTest, "echo RAN-INCONCLUSIVE; exit 1")
	incon.Inconclusive = "npm's default test script proves nothing"
	req := request(t, Sh(validation.StepInstall, "exit 0"), incon, Sh(validation.StepBuild, "exit 0"))
	p := &progressLog{ch: make(chan string, 8)}
	req.Progress = p.report
	res := run(t, e, req)
	want := []validation.Status{validation.StatusPassed, validation.StatusInconclusive, validation.StatusPassed}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if out := text(res.Steps[1].Output); strings.Contains(out, "RAN-INCONCLUSIVE") {
		t.Errorf("inconclusive step ran: output %q", out)
	}
	if slices.Contains(p.got(), validation.StepTest) {
		t.Errorf("progress reported the inconclusive step as started: %q", p.got())
	}
}

func testOutput(t *testing.T, e executors.Executor) {
	req := request(t,
		Sh(validation.StepTest, "echo hi; exit 0"),
		Sh(validation.StepLint, "echo to-stdout; echo to-stderr >&2; exit 2"),
		Sh(validation.StepBuild, "exit 0"),
	)
	res := run(t, e, req)
	hi := res.Steps[0].Output
	if !strings.Contains(text(hi), "hi") || hi.Bytes < int64(len("hi\n")) {
		t.Errorf("test output %+v: want hi and at least 3 bytes counted", hi)
	}
	if hi.Truncated || hi.Redactions != 0 {
		t.Errorf("test output %+v: small output truncated or redacted", hi)
	}
	lint := res.Steps[1]
	for _, s := range []string{"to-stdout", "to-stderr"} {
		if !strings.Contains(text(lint.Output), s) {
			t.Errorf("lint output %q lacks %s", text(lint.Output), s)
		}
	}
	if lint.Status != validation.StatusFailed || lint.ExitCode == nil || *lint.ExitCode != 2 {
		t.Errorf("lint: %s exit %v, want failed exit 2", lint.Status, show(lint.ExitCode))
	}
	if b := res.Steps[2].Output; b.Bytes != 0 || text(b) != "" {
		t.Errorf("silent build has output %+v", b)
	}
}

func secretValue(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return "gilfconf" + hex.EncodeToString(b)
}

func testSecret(t *testing.T, e executors.Executor) {
	value := secretValue(t)
	// The command never holds the value itself (a command changed by
	// redaction is never executed); the shell joins the halves.
	half := len(value) / 2
	req := request(t, Sh(validation.StepTest, `printf 'token=%s%s\n' '`+value[:half]+`' '`+value[half:]+`'`))
	req.Secrets = []validation.Secret{{Name: "GILF_CONFORMANCE_TOKEN", Value: value}}
	res := run(t, e, req)
	r := res.Steps[0]
	if r.Status != validation.StatusPassed {
		t.Fatalf("secret step %s (%s), want passed", r.Status, r.Reason)
	}
	if r.Output.Redactions < 1 {
		t.Errorf("redactions = %d, want at least 1", r.Output.Redactions)
	}
	if !strings.Contains(text(r.Output), "token=") {
		t.Errorf("output %q lost the text around the secret", text(r.Output))
	}
	// Bytes may count the stream before or after redaction; either way
	// it covers at least what was kept.
	if r.Output.Bytes < int64(len("token=\n")) {
		t.Errorf("bytes = %d, want the whole stream counted", r.Output.Bytes)
	}
	blob, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("marshal result: %v", err)
	}
	if strings.Contains(string(blob), value) {
		t.Errorf("the secret value appears in the result")
	}
}

func testEnvironment(t *testing.T, e executors.Executor) {
	canary := secretValue(t)
	t.Setenv("GILF_CONFORMANCE_CANARY", canary)
	req := request(t,
		Sh(validation.StepTest, `test "$CI" = true`),
		Sh(validation.StepLint, `test -z "${GILF_CONFORMANCE_CANARY-}"`),
		Sh(validation.StepBuild, `env`),
	)
	res := run(t, e, req)
	if res.Steps[0].Status != validation.StatusPassed {
		t.Errorf("CI=true is not set for steps: %s", res.Steps[0].Status)
	}
	if res.Steps[1].Status != validation.StatusPassed {
		t.Errorf("the worker's environment reached the step: %s", res.Steps[1].Status)
	}
	if strings.Contains(text(res.Steps[2].Output), canary) {
		t.Errorf("env printed the worker's canary variable")
	}
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return names
}

func testDirUntouched(t *testing.T, e executors.Executor) {
	req := request(t,
		Sh(validation.StepTest, "echo x > written-by-step 2>/dev/null; echo y > package.json 2>/dev/null; exit 0"),
	)
	before := listing(t, req.Dir)
	manifest, err := os.ReadFile(filepath.Join(req.Dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, e, req)
	if diff := cmp.Diff(before, listing(t, req.Dir)); diff != "" {
		t.Errorf("req.Dir changed (-before +after):\n%s", diff)
	}
	after, err := os.ReadFile(filepath.Join(req.Dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(manifest) {
		t.Errorf("package.json in req.Dir was rewritten: %q", after)
	}
}

func testTimeout(t *testing.T, e executors.Executor) {
	slow := Sh(validation.StepTest, "sleep 1000")
	slow.Timeout = StepTimeout
	req := request(t, Sh(validation.StepInstall, "exit 0"), slow, Sh(validation.StepBuild, "exit 0"))
	ctx, cancel := context.WithTimeout(t.Context(), RunBound)
	defer cancel()
	start := time.Now()
	res, err := e.Run(ctx, req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkShape(t, req, res)
	if took > StepTimeout+TimeoutBound {
		t.Errorf("Run took %v with a %v step timeout", took, StepTimeout)
	}
	got := statuses(res)
	if got[0] != validation.StatusPassed || got[1] != validation.StatusTimedOut {
		t.Errorf("statuses %q, want install passed and test timed_out", got)
	}
	// A step that runs after a timed-out script step either runs or, for
	// executors that enforce timeouts on one remote shell, is not run
	// (checkShape has checked it says why). It never passes unrun.
	if got[2] != validation.StatusPassed && got[2] != validation.StatusNotRun {
		t.Errorf("the step after the timeout is %s, want passed or not_run", got[2])
	}
	if d := res.Steps[1].Duration; d < StepTimeout-100*time.Millisecond {
		t.Errorf("timed-out step lasted %v, less than its %v timeout", d, StepTimeout)
	}
}

func testCancel(t *testing.T, e executors.Executor) {
	req := request(t,
		Sh(validation.StepInstall, "exit 0"),
		Sh(validation.StepTest, "sleep 1000"),
		Sh(validation.StepBuild, "exit 0"),
	)
	p := &progressLog{ch: make(chan string, 8)}
	req.Progress = p.report
	ctx, cancel := context.WithTimeout(t.Context(), RunBound)
	defer cancel()
	type ran struct {
		res executors.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := e.Run(ctx, req)
		done <- ran{res, err}
	}()
	var cancelled time.Time
wait:
	for {
		select {
		case s := <-p.ch:
			if s == validation.StepTest {
				time.Sleep(CancelAfter)
				cancelled = time.Now()
				cancel()
				break wait
			}
		case r := <-done:
			t.Fatalf("Run returned before the sleeping step was cancelled: %v %+v", r.err, r.res.Steps)
		}
	}
	var r ran
	select {
	case r = <-done:
	case <-time.After(CancelBound):
		t.Fatalf("Run did not return within %v of the cancel", CancelBound)
	}
	if took := time.Since(cancelled); took > CancelBound {
		t.Errorf("Run returned %v after the cancel", took)
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("Run error = %v, want context.Canceled", r.err)
	}
	checkShape(t, req, r.res)
	if s := r.res.Steps[0].Status; s != validation.StatusPassed {
		t.Errorf("install %s, want passed", s)
	}
	if s := r.res.Steps[1].Status; s != validation.StatusKilled && s != validation.StatusTimedOut {
		t.Errorf("the running step is %s, want killed (or timed_out)", s)
	}
	if s := r.res.Steps[2].Status; s != validation.StatusNotRun {
		t.Errorf("the step after the cancel is %s, want not_run", s)
	}
}

func testConcurrent(t *testing.T, e executors.Executor) {
	const runs = 2
	var wg sync.WaitGroup
	results := make([]executors.Result, runs)
	errs := make([]error, runs)
	reqs := make([]executors.Request, runs)
	for i := range runs {
		reqs[i] = request(t, Sh(validation.StepTest, "echo run-"+string(rune('a'+i))+"; exit "+string(rune('0'+i))))
	}
	ctx, cancel := context.WithTimeout(t.Context(), RunBound)
	defer cancel()
	for i := range runs {
		wg.Go(func() { results[i], errs[i] = e.Run(ctx, reqs[i]) })
	}
	wg.Wait()
	for i := range runs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		checkShape(t, reqs[i], results[i])
		r := results[i].Steps[0]
		if c := r.ExitCode; c == nil || *c != i {
			t.Errorf("run %d exit code %v, want %d", i, show(c), i)
		}
		if want := "run-" + string(rune('a'+i)); !strings.Contains(text(r.Output), want) {
			t.Errorf("run %d output %q, want %s", i, text(r.Output), want)
		}
	}
}
