package validation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNewRecord(t *testing.T) {
	secret := Secret{Name: "NPM_TOKEN", Value: "npm_abcdefghijklmnop"}
	plan := markerPlan()
	plan.Notes = []string{"npm runs pretest before test"}
	stream := startLine(StepInstall) + endLine(StepInstall, "0") +
		startLine(StepTest) + "leaked " + secret.Value + "\nFAIL\n" + endLine(StepTest, "1") +
		startLine(StepLint) + secret.Value + endLine(StepLint, "0") + startLine(StepBuild) + endLine(StepBuild, "0")
	steps, integrity, _ := parseChunked(t, plan, stream, 0, CaptureOptions{Secrets: []Secret{secret}})
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	rec := NewRecord(RecordInput{
		Plan: plan, Executor: "managed-e2b", Tier: TierRemote,
		Platform: Platform{OS: "linux", Arch: "amd64", Node: "v20.19.0"},
		Steps:    steps, Integrity: integrity,
		SecretsWithheld: []string{"GITHUB_TOKEN"}, Notes: []string{"install had network"},
		Started: start, Finished: start.Add(time.Minute),
	})
	want := Record{
		Outcome:            OutcomeFailed,
		Reason:             "step test failed with exit code 1",
		Executor:           "managed-e2b",
		IsolationTier:      TierRemote,
		PackageManager:     NPM,
		Platform:           Platform{OS: "linux", Arch: "amd64", Node: "v20.19.0"},
		Steps:              steps,
		Findings:           []Finding{{Severity: SeverityHigh, Step: StepTest, Title: "`npm run test` failed with exit code 1", Body: "leaked [REDACTED:NPM_TOKEN]\nFAIL\n", ExecutionClaim: true}},
		ReportedByExecutor: true,
		Redactions:         2,
		SecretsWithheld:    []string{"GITHUB_TOKEN"},
		Notes:              []string{"npm runs pretest before test", "install had network"},
		Started:            start,
		Finished:           start.Add(time.Minute),
	}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("NewRecord mismatch (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret.Value) {
		t.Errorf("the record's JSON holds the secret")
	}
	if plan.Notes[0] != "npm runs pretest before test" || len(plan.Notes) != 1 {
		t.Errorf("NewRecord changed the plan's notes: %q", plan.Notes)
	}
}

func TestNewRecordGap(t *testing.T) {
	gap := &Gap{Reason: GapNoManifest, Msg: "no package.json at the repository root"}
	rec := NewRecord(RecordInput{Plan: Plan{Gap: gap}, Executor: "local"})
	if rec.Outcome != OutcomeGap || rec.Gap != gap || rec.Steps == nil || rec.Findings == nil || rec.ReportedByExecutor {
		t.Errorf("gap record: %+v", rec)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"steps":[]`) || !strings.Contains(string(b), `"findings":[]`) {
		t.Errorf("steps and findings must be empty lists, not null: %s", b)
	}
}
