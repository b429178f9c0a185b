package validation

import (
	"strings"
	"testing"
)

func exitCode(n int) *int { return &n }

func passed(name string) StepResult {
	return StepResult{Name: name, Status: StatusPassed, ExitCode: exitCode(0)}
}

func withStatus(r StepResult, st Status) StepResult {
	r.Status = st
	return r
}

func TestConclude(t *testing.T) {
	plan := Plan{Steps: []Step{
		{Name: StepInstall, Argv: []string{"npm", "ci"}},
		{Name: StepTest, Argv: []string{"npm", "run", "test"}},
		{Name: StepLint, Argv: []string{"npm", "run", "lint"}},
	}}
	onlyInconclusive := Plan{Steps: []Step{
		{Name: StepInstall, Argv: []string{"npm", "ci"}},
		{Name: StepTest, Argv: []string{"npm", "test"}, Inconclusive: "npm's default test script"},
	}}
	inconclusiveStep := StepResult{Name: StepTest, Status: StatusInconclusive, Reason: "npm's default test script"}
	tests := []struct {
		name      string
		plan      Plan
		steps     []StepResult
		integrity string
		want      Outcome
		reason    string // substring
	}{
		{
			name: "all passed", plan: plan,
			steps: []StepResult{passed(StepInstall), passed(StepTest), passed(StepLint)},
			want:  OutcomePassed, reason: "every planned step passed",
		},
		{
			name:  "gap wins over everything",
			plan:  Plan{Gap: &Gap{Reason: GapNoScripts, Msg: "package.json has none of test, typecheck, lint, build"}},
			steps: nil, integrity: "forged", want: OutcomeGap, reason: "no_scripts",
		},
		{
			name: "integrity problems make it inconclusive even when all passed", plan: plan,
			steps:     []StepResult{passed(StepInstall), passed(StepTest), passed(StepLint)},
			integrity: `duplicate END marker for step "test"`, want: OutcomeInconclusive, reason: "duplicate END",
		},
		{
			name: "a failing step fails the run", plan: plan,
			steps: []StepResult{passed(StepInstall), {Name: StepTest, Status: StatusFailed, ExitCode: exitCode(1)}, passed(StepLint)},
			want:  OutcomeFailed, reason: "test failed with exit code 1",
		},
		{
			name: "a timeout is a failure", plan: plan,
			steps: []StepResult{passed(StepInstall), {Name: StepTest, Status: StatusTimedOut, TimeoutMs: 600000}, passed(StepLint)},
			want:  OutcomeFailed, reason: "test timed out after 10m",
		},
		{
			name: "a signal is a failure", plan: plan,
			steps: []StepResult{passed(StepInstall), passed(StepTest), {Name: StepLint, Status: StatusKilled, Signal: "SIGKILL", Reason: "memory limit"}},
			want:  OutcomeFailed, reason: "lint was killed by SIGKILL (memory limit)",
		},
		{
			name: "install failure with the rest not run", plan: plan,
			steps: []StepResult{{Name: StepInstall, Status: StatusFailed, ExitCode: exitCode(1)}, {Name: StepTest, Status: StatusNotRun}, {Name: StepLint, Status: StatusNotRun}},
			want:  OutcomeFailed, reason: "install failed",
		},
		{
			name: "a step not run while none failed (cancelled)", plan: plan,
			steps: []StepResult{passed(StepInstall), passed(StepTest), {Name: StepLint, Status: StatusNotRun}},
			want:  OutcomeInconclusive, reason: "lint did not run",
		},
		{
			name: "only install passed, the script is inconclusive", plan: onlyInconclusive,
			steps: []StepResult{passed(StepInstall), inconclusiveStep},
			want:  OutcomeInconclusive, reason: "npm's default test script",
		},
		{
			name: "an inconclusive script reported passed proves nothing", plan: onlyInconclusive,
			steps: []StepResult{passed(StepInstall), passed(StepTest)},
			want:  OutcomeInconclusive, reason: "no script that ran can prove anything",
		},
		{
			name: "passed without an exit status is missing evidence", plan: plan,
			steps: []StepResult{passed(StepInstall), {Name: StepTest, Status: StatusPassed}, passed(StepLint)},
			want:  OutcomeInconclusive, reason: "test is marked passed without an exit status of 0",
		},
		{
			name: "passed with a non-zero exit is contradictory", plan: plan,
			steps: []StepResult{passed(StepInstall), {Name: StepTest, Status: StatusPassed, ExitCode: exitCode(2)}, passed(StepLint)},
			want:  OutcomeInconclusive, reason: "without an exit status of 0",
		},
		{
			name: "passed with a signal is contradictory", plan: plan,
			steps: []StepResult{passed(StepInstall), {Name: StepTest, Status: StatusPassed, ExitCode: exitCode(0), Signal: "SIGTERM"}, passed(StepLint)},
			want:  OutcomeInconclusive, reason: "without an exit status of 0",
		},
		{
			name: "a runnable step ended inconclusive", plan: plan,
			steps: []StepResult{passed(StepInstall), withStatus(passed(StepTest), StatusInconclusive), passed(StepLint)},
			want:  OutcomeInconclusive, reason: "ended inconclusive",
		},
		{
			name: "an unknown status", plan: plan,
			steps: []StepResult{passed(StepInstall), withStatus(passed(StepTest), "skipped-ish"), passed(StepLint)},
			want:  OutcomeInconclusive, reason: "unknown status",
		},
		{
			name: "fewer results than steps", plan: plan,
			steps: []StepResult{passed(StepInstall), passed(StepTest)},
			want:  OutcomeInconclusive, reason: "2 step results for a plan of 3 steps",
		},
		{
			name: "results out of plan order", plan: plan,
			steps: []StepResult{passed(StepInstall), passed(StepLint), passed(StepTest)},
			want:  OutcomeInconclusive, reason: `step 2 is "lint" in the results but "test" in the plan`,
		},
		{
			name: "an empty plan is not a pass", plan: Plan{},
			want: OutcomeInconclusive, reason: "no steps",
		},
		{
			name: "only install ran", plan: Plan{Steps: []Step{{Name: StepInstall}}},
			steps: []StepResult{passed(StepInstall)},
			want:  OutcomeInconclusive, reason: "only the install step ran",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := Conclude(tc.plan, tc.steps, tc.integrity)
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Errorf("Conclude() = %s, %q; want %s, reason containing %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

func TestShortDuration(t *testing.T) {
	tests := []struct {
		ms   int64
		want string
	}{
		{600000, "10m"}, {90000, "1m30s"}, {1500, "1.5s"}, {3600000, "1h"}, {5400000, "1h30m"}, {1, "1ms"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := shortDuration(tc.ms); got != tc.want {
				t.Errorf("shortDuration(%d) = %q, want %q", tc.ms, got, tc.want)
			}
		})
	}
}

// A reason that names the killer is said once: "was killed by the memory
// limit of …", never "was killed by SIGKILL (killed by SIGKILL)".
func TestStepEndingSaysTheKillerOnce(t *testing.T) {
	for _, tt := range []struct {
		s    StepResult
		want string
	}{
		{StepResult{Status: StatusKilled, Signal: "SIGKILL", Reason: "killed by SIGKILL"}, "was killed by SIGKILL"},
		{StepResult{Status: StatusKilled, Signal: "SIGKILL", Reason: "killed by the memory limit of 1024 bytes"}, "was killed by the memory limit of 1024 bytes"},
		{StepResult{Status: StatusKilled, Signal: "SIGKILL"}, "was killed by SIGKILL"},
		{StepResult{Status: StatusKilled, Signal: "SIGKILL", Reason: "the run was cancelled"}, "was killed by SIGKILL (the run was cancelled)"},
	} {
		if got := stepEnding(tt.s); got != tt.want {
			t.Errorf("stepEnding(%+v) = %q, want %q", tt.s, got, tt.want)
		}
	}
}
