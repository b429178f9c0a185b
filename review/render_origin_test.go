package review

import (
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

const baseSHA = "fedcba9876543210fedcba9876543210fedcba98"

// originRecord is a head whose test step has one old and one new failing
// test (introduced), whose lint fails as on the base (preexisting) and
// whose typecheck passed when run again (flaky).
func originRecord() validation.Record {
	r := baseRecord()
	r.Outcome = validation.OutcomeFailed
	testOut := "✖ adds (1.2ms)\n  AssertionError: 3 !== 4\n✖ subtracts (0.4ms)\n  AssertionError: 1 !== 0\n# fail 2\n"
	lintOut := "src/a.js: uses var (lint rule no-var)\n"
	tcOut := "error: lost the race\n"
	r.Steps = []validation.StepResult{
		step("install", []string{"npm", "ci"}, validation.StatusPassed, intp(0), 800*time.Millisecond, "added 0 packages\n"),
		step("test", []string{"npm", "run", "test"}, validation.StatusFailed, intp(1), 1200*time.Millisecond, testOut),
		step("typecheck", []string{"npm", "run", "typecheck"}, validation.StatusFailed, intp(2), 900*time.Millisecond, tcOut),
		step("lint", []string{"npm", "run", "lint"}, validation.StatusFailed, intp(1), 300*time.Millisecond, lintOut),
	}
	r.Steps[1].Origin = validation.OriginIntroduced
	r.Steps[1].Failures = []validation.StepFailure{
		{Name: "adds", File: "test/sum.test.js", Line: 5, Origin: validation.OriginPreexisting},
		{Name: "subtracts @org/team #3", File: "test/sum.test.js", Line: 9, Origin: validation.OriginIntroduced},
	}
	r.Steps[2].Origin = validation.OriginFlaky
	r.Steps[3].Origin = validation.OriginPreexisting
	r.Findings = []validation.Finding{
		{Severity: validation.SeverityHigh, Step: "test", Title: "`npm run test` failed with exit code 1", Body: testOut, ExecutionClaim: true},
		{Severity: validation.SeverityHigh, Step: "typecheck", Title: "`npm run typecheck` failed with exit code 2", Body: tcOut, ExecutionClaim: true},
		{Severity: validation.SeverityMedium, Step: "lint", Title: "`npm run lint` failed with exit code 1", Body: lintOut, ExecutionClaim: true},
	}
	r.Base = &validation.BaseRun{Ref: "main", SHA: baseSHA, Outcome: validation.OutcomeFailed, Steps: []validation.BaseStep{
		{Name: "install", Status: validation.StatusPassed, ExitCode: intp(0)},
		{Name: "test", Status: validation.StatusFailed, ExitCode: intp(1)},
		{Name: "typecheck", Status: validation.StatusPassed, ExitCode: intp(0)},
		{Name: "lint", Status: validation.StatusFailed, ExitCode: intp(1)},
	}}
	return r
}

// neutralRecord has only failures that are not the pull request's.
func neutralRecord() validation.Record {
	r := originRecord()
	r.Steps[1].Origin = validation.OriginPreexisting
	r.Steps[1].Failures[1].Origin = validation.OriginPreexisting
	r.Base.Reused = true
	return r
}

// unknownRecord could not compare: the base's install failed.
func unknownRecord() validation.Record {
	r := originRecord()
	for i := range r.Steps {
		if validation.Failed(r.Steps[i].Status) {
			r.Steps[i].Origin = validation.OriginUnknown
			for j := range r.Steps[i].Failures {
				r.Steps[i].Failures[j].Origin = validation.OriginUnknown
			}
		}
	}
	r.Base.Steps, r.Base.Reason = nil, "the base's install failed"
	return r
}

// TestRenderOriginGolden renders the grouped review and the check run's
// summary: introduced first, unknown open, preexisting and flaky folded.
func TestRenderOriginGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  validation.Record
	}{
		{"origin-grouped", originRecord()},
		{"origin-neutral", neutralRecord()},
		{"origin-unknown", unknownRecord()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := Render(tc.rec, RenderOptions{JobID: "47"})
			checkBody(t, tc.rec, body)
			got := body + "\n=== check summary ===\n" + CheckSummary(tc.rec, RenderOptions{}, 0, 0)
			checkRenderGolden(t, tc.name, got)
		})
	}
}

// TestRenderOriginOrder checks what the goldens hold by rule: introduced
// first, the folded groups after it, the verdict and the summary's first
// failure by origin.
func TestRenderOriginOrder(t *testing.T) {
	body := Render(originRecord(), RenderOptions{})
	intro := strings.Index(body, "### Introduced by this pull request (1)")
	pre := strings.Index(body, "<summary>Already failing on main (fedcba9) (1)</summary>")
	flaky := strings.Index(body, "<summary>Flaky: passed when run again (1)</summary>")
	if intro < 0 || pre < intro || flaky < pre {
		t.Errorf("groups out of order (introduced %d, preexisting %d, flaky %d):\n%s", intro, pre, flaky, body)
	}
	if !strings.Contains(body, "## gilf validation: ❌ failed") {
		t.Errorf("a run with an introduced failure is not plainly failed:\n%s", body)
	}
	sum := CheckSummary(originRecord(), RenderOptions{}, 0, 0)
	if !strings.Contains(sum, "**First failure:** `npm run test` failed") {
		t.Errorf("the summary's first failure is not the introduced one:\n%s", sum)
	}
	neutral := Render(neutralRecord(), RenderOptions{})
	if !strings.Contains(neutral, "## gilf validation: ⚠️ failed, but not because of this pull request") ||
		!strings.Contains(neutral, "the check is neutral") || strings.Contains(neutral, "### Introduced") {
		t.Errorf("neutral review:\n%s", neutral)
	}
	if got := CheckConclusion(neutralRecord(), false); got != ConclusionNeutral {
		t.Errorf("conclusion %s, want neutral", got)
	}
	if got := CheckConclusion(neutralRecord(), true); got != ConclusionFailure {
		t.Errorf("conclusion with validation.preexisting: failure is %s, want failure", got)
	}
	if got := CheckConclusion(unknownRecord(), false); got != ConclusionFailure {
		t.Errorf("conclusion of unknown origins is %s, want failure", got)
	}
	if got := CheckConclusion(originRecord(), false); got != ConclusionFailure {
		t.Errorf("conclusion with an introduced failure is %s, want failure", got)
	}
}

// TestOutputKeepsPackageNames: what a step printed is quoted byte for
// byte in its code block — `@polka/url` keeps no inserted character —
// while the same text in a title, outside any code block, is neutralised.
func TestOutputKeepsPackageNames(t *testing.T) {
	rec := failedRecord()
	out := "Error: Cannot find module '@polka/url' from src/index.js\ncc @octocat see #12\n"
	rec.Steps[1].Output = validation.Output{Head: out, Bytes: int64(len(out))}
	rec.Findings[0].Body = out
	rec.Findings[0].Title = "`test` failed: @octocat #12"
	body := Render(rec, RenderOptions{})
	checkBody(t, rec, body)
	if !strings.Contains(body, "Error: Cannot find module '@polka/url' from src/index.js\ncc @octocat see #12\n") {
		t.Errorf("the output was changed in its code block:\n%s", body)
	}
	if !strings.Contains(body, "failed: @\u200boctocat \u200b#12") {
		t.Errorf("the title's mention is live:\n%s", body)
	}
}
