package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// shRunner runs each step's shell with a real sh in dir, killed at its
// budget as a provider would.
type shRunner struct {
	dir   string
	calls int
}

func (r *shRunner) RunStep(ctx context.Context, script []byte, budget time.Duration, out io.Writer, started func()) (ProcEnd, error) {
	r.calls++
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	cmd := exec.CommandContext(pctx, "sh", "-s")
	cmd.Dir = r.dir
	cmd.Stdin = strings.NewReader(string(script))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return ProcEnd{}, fmt.Errorf("start sh: %w", err)
	}
	started()
	err := cmd.Wait()
	if ctx.Err() != nil {
		return ProcEnd{}, fmt.Errorf("run step: %w", ctx.Err())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return ProcEnd{Exited: true, Status: "exit status 0"}, nil
	case pctx.Err() != nil:
		return ProcEnd{Code: -1, Status: "killed at its deadline", TimedOut: true}, nil
	case errors.As(err, &ee) && ee.Exited():
		return ProcEnd{Exited: true, Code: ee.ExitCode(), Status: ee.Error()}, nil
	}
	return ProcEnd{}, fmt.Errorf("wait sh: %w", err)
}

func (r *shRunner) StopStep(context.Context) error { return nil }

func TestRunSteps(t *testing.T) {
	step := func(name, cmd string) validation.Step {
		return validation.Step{Name: name, Argv: []string{"sh", "-c", cmd}, Timeout: 20 * time.Second}
	}
	type want struct {
		status validation.Status
		reason string
	}
	tests := []struct {
		name     string
		steps    []validation.Step
		deadline time.Duration // from now; zero for none
		cancel   bool
		want     []want
		wantErr  error
		calls    int
	}{
		{
			name:  "pass and fail",
			steps: []validation.Step{step(validation.StepInstall, "true"), step("test", "echo broken; exit 3")},
			want:  []want{{status: validation.StatusPassed}, {status: validation.StatusFailed}},
			calls: 2,
		},
		{
			name:  "install failed: later steps not run",
			steps: []validation.Step{step(validation.StepInstall, "exit 1"), step("test", "true")},
			want:  []want{{status: validation.StatusFailed}, {status: validation.StatusNotRun, reason: reasonInstallFailed}},
			calls: 1,
		},
		{
			name: "inconclusive step is not run",
			steps: []validation.Step{
				step(validation.StepInstall, "true"),
				{Name: "test", Argv: []string{"npm", "test"}, Inconclusive: "npm's default test"},
			},
			want:  []want{{status: validation.StatusPassed}, {status: validation.StatusInconclusive, reason: "npm's default test"}},
			calls: 1,
		},
		{
			name:     "lifetime ran out before a step",
			steps:    []validation.Step{step(validation.StepInstall, "true")},
			deadline: -time.Second,
			want:     []want{{status: validation.StatusNotRun, reason: "not run: the test lifetime ran out"}},
		},
		{
			name:    "cancelled before the first step",
			steps:   []validation.Step{step(validation.StepInstall, "true"), step("test", "true")},
			cancel:  true,
			want:    []want{{status: validation.StatusNotRun, reason: ReasonCancelled}, {status: validation.StatusNotRun, reason: ReasonCancelled}},
			wantErr: context.Canceled,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tc.cancel {
				cancel()
			}
			plan := validation.Plan{PackageManager: validation.PackageManager("npm"), Steps: tc.steps}
			nonce, scripts, err := Shells(plan, 64<<10, "test", "the test executor")
			if err != nil {
				t.Fatalf("Shells: %v", err)
			}
			sp := StepPlan{Plan: plan, Scripts: scripts, Nonce: nonce, Cwd: "/checkout", Grace: 5 * time.Second, StopBound: time.Second, Lifetime: "the test lifetime"}
			if tc.deadline != 0 {
				sp.Deadline = time.Now().Add(tc.deadline)
			}
			r := &shRunner{dir: t.TempDir()}
			out, err := RunSteps(ctx, sp, r)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("RunSteps error %v, want %v", err, tc.wantErr)
			}
			var got []want
			for _, s := range out.Steps {
				got = append(got, want{status: s.Status, reason: s.Reason})
				if s.Cwd != "/checkout" || !s.Reported {
					t.Errorf("step %q: Cwd %q Reported %v, want /checkout true", s.Name, s.Cwd, s.Reported)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if r.calls != tc.calls {
				t.Errorf("%d processes run, want %d", r.calls, tc.calls)
			}
			if len(out.Issues) != 0 {
				t.Errorf("integrity issues %q, want none", out.Issues)
			}
		})
	}
}

func TestShellsLimit(t *testing.T) {
	plan := validation.Plan{Steps: []validation.Step{{Name: validation.StepInstall, Argv: []string{"npm", "ci"}}}}
	_, scripts, err := Shells(plan, 1<<20, "test", "x")
	if err != nil {
		t.Fatalf("Shells: %v", err)
	}
	size := len(scripts[0])
	tests := []struct {
		name    string
		max     int
		refused bool
	}{
		{name: "at the limit", max: size},
		{name: "one byte under", max: size - 1, refused: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Shells(plan, tc.max, "test", "the test executor")
			var ref *validation.Refusal
			if got := errors.As(err, &ref) && ref.Code == validation.CodeScriptTooLong; got != tc.refused {
				t.Fatalf("Shells with max %d: %v, want refused %v", tc.max, err, tc.refused)
			}
			if tc.refused && !strings.Contains(ref.Msg, "the test executor") {
				t.Errorf("refusal %q does not name the executor", ref.Msg)
			}
		})
	}
}

func TestNotRun(t *testing.T) {
	plan := validation.Plan{Steps: []validation.Step{
		{Name: validation.StepInstall, Argv: []string{"npm", "ci"}, Timeout: time.Second},
		{Name: "test", Inconclusive: "bare echo"},
	}}
	got := NotRun(plan, "/c", ReasonCancelled)
	want := []validation.StepResult{
		{Name: validation.StepInstall, Argv: []string{"npm", "ci"}, Cwd: "/c", TimeoutMs: 1000, Reported: true, Status: validation.StatusNotRun, Reason: ReasonCancelled},
		{Name: "test", Cwd: "/c", Reported: true, Status: validation.StatusInconclusive, Reason: "bare echo"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NotRun (-want +got):\n%s", diff)
	}
	if AnyRunnable(validation.Plan{Steps: plan.Steps[1:]}) || !AnyRunnable(plan) {
		t.Errorf("AnyRunnable is wrong")
	}
}

// The repository's variables reach every step of a remote run, each
// step's shell exporting them.
func TestRunStepsPlanEnv(t *testing.T) {
	plan := validation.Plan{PackageManager: validation.PackageManager("npm"), Env: map[string]string{"FORCE_COLOR": "0"},
		Steps: []validation.Step{
			{Name: validation.StepInstall, Argv: []string{"sh", "-c", `echo "install FORCE_COLOR=$FORCE_COLOR"`}, Timeout: 20 * time.Second},
			{Name: "test", Argv: []string{"sh", "-c", `echo "test FORCE_COLOR=$FORCE_COLOR"`}, Timeout: 20 * time.Second},
		}}
	nonce, scripts, err := Shells(plan, 64<<10, "test", "the test executor")
	if err != nil {
		t.Fatal(err)
	}
	sp := StepPlan{Plan: plan, Scripts: scripts, Nonce: nonce, Cwd: "/checkout", Grace: 5 * time.Second, StopBound: time.Second, Lifetime: "the test lifetime"}
	out, err := RunSteps(t.Context(), sp, &shRunner{dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Steps {
		if want := s.Name + " FORCE_COLOR=0"; !strings.Contains(s.Output.Head, want) {
			t.Errorf("step %s printed %q, want %q", s.Name, s.Output.Head, want)
		}
	}
}
