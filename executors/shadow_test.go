package executors_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

// shadowBound is the most any shadow test may wait for one lane.
const shadowBound = 10 * time.Second

func shadowRequest() executors.Request {
	step := func(name string) validation.Step {
		return validation.Step{Name: name, Argv: []string{"npm", "run", name}, Network: validation.NetworkNone, Timeout: time.Minute}
	}
	return executors.Request{
		Plan: validation.Plan{
			PackageManager: validation.NPM,
			Steps:          []validation.Step{step(validation.StepInstall), step(validation.StepTest), step(validation.StepBuild)},
		},
		Dir:    "/nonexistent-read-only-dir",
		Labels: map[string]string{"repo": "o/r"},
		Progress: func(string, time.Time) {
			panic("the shadow must not report progress")
		},
	}
}

func primaryResult(statuses ...validation.Status) executors.Result {
	names := []string{validation.StepInstall, validation.StepTest, validation.StepBuild}
	start := time.Now().Add(-3 * time.Second)
	res := executors.Result{Executor: "local", Started: start, Finished: start.Add(2 * time.Second), Resources: executors.Resources{VCPU: 2, MemoryGiB: 4}}
	for i, s := range statuses {
		res.Steps = append(res.Steps, validation.StepResult{Name: names[i], Status: s})
	}
	return res
}

// checkNoLeak fails when goroutines started during the test outlive it.
func checkNoLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

func TestShadowWithheld(t *testing.T) {
	e2b := &executortest.Fake{ExecName: executors.NameManagedE2B}
	local := &executortest.Fake{ExecName: executors.NameLocal}
	set := executors.Set{e2b, local}
	tests := []struct {
		name      string
		selection string
		primary   string
		gate      executors.ShadowGate
		want      executors.Telemetry
	}{
		{
			name:    "unset",
			primary: executors.NameLocal,
			want:    executors.Telemetry{Primary: executors.NameLocal, Status: executors.ShadowNotConfigured},
		},
		{
			name:      "unknown name",
			selection: "lambda",
			primary:   executors.NameLocal,
			want:      executors.Telemetry{Requested: "lambda", Primary: executors.NameLocal, Status: executors.ShadowWithheld, Reason: executors.ShadowReasonUnknown},
		},
		{
			name:      "same as primary through an alias",
			selection: " E2B ",
			primary:   executors.NameManagedE2B,
			want:      executors.Telemetry{Requested: "E2B", Shadow: executors.NameManagedE2B, Primary: executors.NameManagedE2B, Status: executors.ShadowWithheld, Reason: executors.ShadowReasonSameAsPrimary},
		},
		{
			name:      "same as primary named by alias",
			selection: "managed-e2b",
			primary:   "e2b",
			want:      executors.Telemetry{Requested: "managed-e2b", Shadow: executors.NameManagedE2B, Primary: "e2b", Status: executors.ShadowWithheld, Reason: executors.ShadowReasonSameAsPrimary},
		},
		{
			name:      "known but unconfigured",
			selection: "crabbox",
			primary:   executors.NameLocal,
			want:      executors.Telemetry{Requested: "crabbox", Shadow: executors.NameManagedCrabbox, Primary: executors.NameLocal, Status: executors.ShadowWithheld, Reason: executors.ShadowReasonUnconfigured},
		},
		{
			name:      "budget gate",
			selection: "e2b",
			primary:   executors.NameLocal,
			gate: func(_ context.Context, name string) (bool, string) {
				return name != executors.NameManagedE2B, "managed-e2b spend $50.10 reached GILF_E2B_BUDGET_USD $50"
			},
			want: executors.Telemetry{Requested: "e2b", Shadow: executors.NameManagedE2B, Primary: executors.NameLocal, Status: executors.ShadowWithheld,
				Reason:  "budget: managed-e2b spend $50.10 reached GILF_E2B_BUDGET_USD $50",
				Refusal: &validation.Refusal{Code: validation.CodeBudgetExceeded, Msg: "the managed-e2b shadow lane was withheld: budget: managed-e2b spend $50.10 reached GILF_E2B_BUDGET_USD $50"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNoLeak(t)
			s := &executors.Shadow{Selection: tt.selection, Set: set, Gate: tt.gate}
			run := s.Start(t.Context(), tt.primary, shadowRequest())
			primary := primaryResult(validation.StatusPassed)
			tt.want.PrimaryWall = 2 * time.Second
			tt.want.PrimaryResources = primary.Resources
			if diff := cmp.Diff(tt.want, run.Wait(t.Context(), primary)); diff != "" {
				t.Errorf("telemetry (-want +got):\n%s", diff)
			}
			if n := len(e2b.Requests()) + len(local.Requests()); n != 0 {
				t.Errorf("a withheld shadow ran %d times", n)
			}
		})
	}
}

func TestShadowAgreement(t *testing.T) {
	tests := []struct {
		name      string
		script    map[string]executortest.Script
		primary   []validation.Status
		wantSteps []executors.StepAgreement
		wantAgree bool
	}{
		{
			name:    "agree",
			script:  map[string]executortest.Script{validation.StepTest: {Status: validation.StatusFailed, Exit: 1}},
			primary: []validation.Status{validation.StatusPassed, validation.StatusFailed, validation.StatusPassed},
			wantSteps: []executors.StepAgreement{
				{Name: "install", Primary: "passed", Shadow: "passed", Agree: true},
				{Name: "test", Primary: "failed", Shadow: "failed", Agree: true},
				{Name: "build", Primary: "passed", Shadow: "passed", Agree: true},
			},
			wantAgree: true,
		},
		{
			name:    "install differs",
			script:  map[string]executortest.Script{validation.StepInstall: {Status: validation.StatusFailed, Exit: 1}},
			primary: []validation.Status{validation.StatusPassed, validation.StatusPassed, validation.StatusPassed},
			wantSteps: []executors.StepAgreement{
				{Name: "install", Primary: "passed", Shadow: "failed"},
				{Name: "test", Primary: "passed", Shadow: "not_run"},
				{Name: "build", Primary: "passed", Shadow: "not_run"},
			},
		},
		{
			name:    "primary reported fewer steps",
			primary: []validation.Status{validation.StatusPassed},
			wantSteps: []executors.StepAgreement{
				{Name: "install", Primary: "passed", Shadow: "passed", Agree: true},
				{Name: "test", Shadow: "passed"},
				{Name: "build", Shadow: "passed"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNoLeak(t)
			fake := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: tt.script}
			s := &executors.Shadow{Selection: "e2b", Set: executors.Set{fake}}
			req := shadowRequest()
			run := s.Start(t.Context(), executors.NameLocal, req)
			tel := run.Wait(t.Context(), primaryResult(tt.primary...))
			if tel.Status != executors.ShadowOK || tel.Error != "" {
				t.Fatalf("status %s error %q, want ok", tel.Status, tel.Error)
			}
			if diff := cmp.Diff(tt.wantSteps, tel.Steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if tel.Agree != tt.wantAgree {
				t.Errorf("agree = %v, want %v", tel.Agree, tt.wantAgree)
			}
			if tel.PrimaryWall != 2*time.Second || tel.ShadowWall <= 0 || tel.ShadowStarted.IsZero() || tel.ShadowFinished.Before(tel.ShadowStarted) {
				t.Errorf("walls: primary %v shadow %v started %v finished %v", tel.PrimaryWall, tel.ShadowWall, tel.ShadowStarted, tel.ShadowFinished)
			}
			got := fake.Requests()
			if len(got) != 1 {
				t.Fatalf("shadow ran %d times, want 1", len(got))
			}
			if got[0].Progress != nil {
				t.Error("the shadow was given the primary's Progress")
			}
			req.Labels["repo"] = "changed by the primary"
			req.Plan.Steps[0].Argv[0] = "changed"
			if got[0].Labels["repo"] != "o/r" || got[0].Plan.Steps[0].Argv[0] != "npm" {
				t.Error("the shadow's request shares labels or argv with the primary's")
			}
		})
	}
}

func TestShadowCutAtBudget(t *testing.T) {
	checkNoLeak(t)
	const budget = 300 * time.Millisecond
	slow := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: map[string]executortest.Script{
		validation.StepTest: {Delay: time.Hour},
	}}
	s := &executors.Shadow{Selection: "e2b", Set: executors.Set{slow}, Timeout: budget}
	start := time.Now()
	run := s.Start(t.Context(), executors.NameLocal, shadowRequest())
	tel := run.Wait(t.Context(), primaryResult(validation.StatusPassed, validation.StatusPassed, validation.StatusPassed))
	took := time.Since(start)
	if took < budget || took > shadowBound {
		t.Errorf("Wait returned after %v, want just after the %v budget", took, budget)
	}
	if tel.Status != executors.ShadowTimeout {
		t.Errorf("status %s (%s), want timeout", tel.Status, tel.Error)
	}
	want := []executors.StepAgreement{
		{Name: "install", Primary: "passed", Shadow: "passed", Agree: true},
		{Name: "test", Primary: "passed", Shadow: "killed"},
		{Name: "build", Primary: "passed", Shadow: "not_run"},
	}
	if diff := cmp.Diff(want, tel.Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if slow.Cleanups() != 1 {
		t.Errorf("shadow cleanups = %d, want 1", slow.Cleanups())
	}
}

// TestShadowBudgetFromStart: the budget runs from Start, so a primary that
// took longer than the budget leaves nothing to wait for.
func TestShadowBudgetFromStart(t *testing.T) {
	checkNoLeak(t)
	const budget = 200 * time.Millisecond
	slow := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: map[string]executortest.Script{
		validation.StepInstall: {Delay: time.Hour},
	}}
	s := &executors.Shadow{Selection: "e2b", Set: executors.Set{slow}, Timeout: budget}
	run := s.Start(t.Context(), executors.NameLocal, shadowRequest())
	time.Sleep(2 * budget) // the primary runs
	waitStart := time.Now()
	tel := run.Wait(t.Context(), primaryResult(validation.StatusPassed))
	if took := time.Since(waitStart); took > 2*time.Second {
		t.Errorf("Wait took %v after the budget was already spent", took)
	}
	if tel.Status != executors.ShadowTimeout {
		t.Errorf("status %s (%s), want timeout", tel.Status, tel.Error)
	}
}

func TestShadowPanicDoesNotReachPrimary(t *testing.T) {
	checkNoLeak(t)
	panicky := &executortest.Fake{ExecName: executors.NameManagedE2B, Panic: "shadow blew up"}
	primary := &executortest.Fake{ExecName: executors.NameLocal}
	var logs bytes.Buffer
	s := &executors.Shadow{Selection: "e2b", Set: executors.Set{panicky, primary}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	req := shadowRequest()
	req.Progress = nil
	run := s.Start(t.Context(), primary.Name(), req)
	res, err := primary.Run(t.Context(), req)
	if err != nil {
		t.Fatalf("primary Run: %v", err)
	}
	tel := run.Wait(t.Context(), res)
	if tel.Status != executors.ShadowPanic || !strings.Contains(tel.Error, "shadow blew up") {
		t.Errorf("status %s error %q, want panic with its value", tel.Status, tel.Error)
	}
	if tel.Steps != nil {
		t.Errorf("a panicked shadow has step telemetry %+v", tel.Steps)
	}
	if panicky.Cleanups() != 1 {
		t.Errorf("panicking shadow cleanups = %d, want 1", panicky.Cleanups())
	}
	if l := logs.String(); !strings.Contains(l, `"msg":"shadow executor panicked"`) || !strings.Contains(l, `"executor":"managed-e2b"`) || !strings.Contains(l, "goroutine") {
		t.Errorf("panic log %q lacks the message, executor or stack", l)
	}
	want := []validation.Status{validation.StatusPassed, validation.StatusPassed, validation.StatusPassed}
	got := []validation.Status{res.Steps[0].Status, res.Steps[1].Status, res.Steps[2].Status}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("primary statuses (-want +got):\n%s", diff)
	}
}

func TestShadowErrors(t *testing.T) {
	tests := []struct {
		name       string
		fake       *executortest.Fake
		wantStatus executors.ShadowStatus
		wantError  string
	}{
		{
			name:       "infrastructure error",
			fake:       &executortest.Fake{Err: errors.New("sandbox API answered 502")},
			wantStatus: executors.ShadowError,
			wantError:  "sandbox API answered 502",
		},
		{
			name:       "refusal",
			fake:       &executortest.Fake{Refusal: validation.Refuse(validation.CodeExecutorUnavailable, "no capacity")},
			wantStatus: executors.ShadowError,
			wantError:  "executor_unavailable",
		},
		{
			name:       "long error is bounded",
			fake:       &executortest.Fake{Err: errors.New(strings.Repeat("é", 2000))},
			wantStatus: executors.ShadowError,
			wantError:  "…",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNoLeak(t)
			tt.fake.ExecName = executors.NameManagedE2B
			s := &executors.Shadow{Selection: "e2b", Set: executors.Set{tt.fake}}
			tel := s.Start(t.Context(), executors.NameLocal, shadowRequest()).Wait(t.Context(), primaryResult(validation.StatusPassed))
			if tel.Status != tt.wantStatus || !strings.Contains(tel.Error, tt.wantError) {
				t.Errorf("status %s error %q, want %s with %q", tel.Status, tel.Error, tt.wantStatus, tt.wantError)
			}
			if len(tel.Error) > 600 || !utf8.ValidString(tel.Error) {
				t.Errorf("error is %d bytes, valid UTF-8 %v", len(tel.Error), utf8.ValidString(tel.Error))
			}
		})
	}
}

func TestShadowCallerStops(t *testing.T) {
	checkNoLeak(t)
	slow := &executortest.Fake{ExecName: executors.NameManagedE2B, Steps: map[string]executortest.Script{
		validation.StepInstall: {Delay: time.Hour},
	}}
	s := &executors.Shadow{Selection: "e2b", Set: executors.Set{slow}}
	run := s.Start(t.Context(), executors.NameLocal, shadowRequest())
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	tel := run.Wait(ctx, primaryResult(validation.StatusPassed))
	if took := time.Since(start); took > shadowBound {
		t.Errorf("Wait took %v after the caller stopped", took)
	}
	if tel.Status != executors.ShadowCancelled {
		t.Errorf("status %s (%s), want cancelled", tel.Status, tel.Error)
	}
}

// stuck ignores cancellation until released: an executor that breaks the
// lifecycle.
type stuck struct{ release chan struct{} }

func (s stuck) Name() string { return executors.NameManagedCFSandbox }

func (s stuck) Run(context.Context, executors.Request) (executors.Result, error) {
	<-s.release
	return executors.Result{}, errors.New("released")
}

func TestShadowAbandonsStuckExecutor(t *testing.T) {
	checkNoLeak(t)
	ex := stuck{release: make(chan struct{})}
	s := &executors.Shadow{Selection: "cf-sandbox", Set: executors.Set{ex}, Timeout: 100 * time.Millisecond, StopGrace: 100 * time.Millisecond}
	run := s.Start(t.Context(), executors.NameLocal, shadowRequest())
	start := time.Now()
	tel := run.Wait(t.Context(), primaryResult(validation.StatusPassed))
	if took := time.Since(start); took > shadowBound {
		t.Errorf("Wait took %v for a stuck shadow", took)
	}
	want := executors.Telemetry{Requested: "cf-sandbox", Shadow: executors.NameManagedCFSandbox, Primary: executors.NameLocal, Status: executors.ShadowTimeout,
		Error: "shadow executor did not return within 100ms of its cancel; abandoned"}
	if diff := cmp.Diff(want, tel, cmpopts.IgnoreFields(executors.Telemetry{}, "PrimaryWall", "ShadowWall", "PrimaryResources", "ShadowStarted")); diff != "" {
		t.Errorf("telemetry (-want +got):\n%s", diff)
	}
	close(ex.release) // the abandoned goroutine ends once Run returns
}
