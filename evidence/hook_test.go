package evidence

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name               string
		artifacts, require bool
		want               Options
	}{
		{"both off", false, false, Options{BodyBudget: DefaultBodyBudget}},
		{"artifacts only", true, false, Options{Enabled: true, BodyBudget: DefaultBodyBudget}},
		{"require alone does nothing", false, true, Options{BodyBudget: DefaultBodyBudget}},
		{"both on", true, true, Options{Enabled: true, Require: true, BodyBudget: DefaultBodyBudget}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, NewOptions(tt.artifacts, tt.require)); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

// countingStore records Put calls and delegates to a real store.
type countingStore struct {
	Store
	puts int
}

func (c *countingStore) Put(ctx context.Context, obj Object) (validation.EvidenceRef, error) {
	c.puts++
	return c.Store.Put(ctx, obj)
}

// panickingStore is a broken Store implementation.
type panickingStore struct{}

func (panickingStore) Put(context.Context, Object) (validation.EvidenceRef, error) {
	panic("store exploded")
}

func runFixture() ([]validation.Finding, []validation.StepResult) {
	exit1 := 1
	findings := []validation.Finding{
		{Severity: validation.SeverityHigh, Step: "test", Title: "test failed", ExecutionClaim: true},
		{Severity: validation.SeverityBlocker, Step: "build", Title: "build failed", ExecutionClaim: true},
		{Severity: validation.SeverityLow, Path: "src/a.ts", Title: "style", ExecutionClaim: false},
	}
	steps := []validation.StepResult{
		{Name: "install", Status: validation.StatusPassed, Output: validation.Output{Head: "added 1 package", Bytes: 15}},
		{Name: "test", Status: validation.StatusFailed, ExitCode: &exit1, Output: validation.Output{Head: "1 failing", Bytes: 9}},
		{Name: "build", Status: validation.StatusNotRun, Reason: "install failed"},
	}
	return findings, steps
}

func TestRun(t *testing.T) {
	scope := Scope{Repo: "octo/hello", SHA: "abc", Review: "job-1"}
	findings, steps := runFixture()
	orig := cloneFindings(findings)

	t.Run("disabled does nothing", func(t *testing.T) {
		fs, _ := newFS(t, FSOptions{})
		cs := &countingStore{Store: fs}
		res := Run(t.Context(), nil, NewOptions(false, true), cs, Input{Scope: scope, Findings: findings, Steps: steps})
		if cs.puts != 0 || res.Err != "" || len(res.Stored) != 0 {
			t.Fatalf("disabled hook acted: puts %d, %+v", cs.puts, res)
		}
		if d := cmp.Diff(orig, res.Findings); d != "" {
			t.Fatalf("findings changed (-want +got):\n%s", d)
		}
	})

	t.Run("enabled attaches after upload", func(t *testing.T) {
		fs, dir := newFS(t, FSOptions{})
		res := Run(t.Context(), slog.New(slog.DiscardHandler), NewOptions(true, false), fs, Input{Scope: scope, Findings: findings, Steps: steps})
		if res.Err != "" || len(res.Failures) != 0 {
			t.Fatalf("hook: %+v", res)
		}
		wantKey := "review-artifacts/octo%2Fhello/abc/evidence/job-1/test-output/test.log"
		wantTest := []validation.EvidenceRef{{Kind: "test-output", Key: wantKey}}
		if d := cmp.Diff(wantTest, res.Findings[0].Evidence); d != "" {
			t.Fatalf("test finding evidence (-want +got):\n%s", d)
		}
		if len(res.Findings[1].Evidence) != 0 || res.Findings[1].EvidenceStatus != "" {
			t.Fatalf("build finding (not run, no artifact) = %+v", res.Findings[1])
		}
		if len(res.Stored) != 2 || res.Stored[0].Kind != KindLog || res.Stored[1].Ref.Key != wantKey {
			t.Fatalf("stored = %+v", res.Stored)
		}
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(wantKey))); err != nil || string(b) != "1 failing" {
			t.Fatalf("stored body %q, %v", b, err)
		}
		if d := cmp.Diff(orig, findings); d != "" {
			t.Fatalf("input findings were modified (-want +got):\n%s", d)
		}
	})

	t.Run("require marks unbacked execution claims", func(t *testing.T) {
		fs, _ := newFS(t, FSOptions{})
		res := Run(t.Context(), slog.New(slog.DiscardHandler), NewOptions(true, true), fs, Input{Scope: scope, Findings: findings, Steps: steps})
		got := res.Findings
		if got[0].EvidenceStatus != "" {
			t.Errorf("backed finding marked: %+v", got[0])
		}
		if got[1].EvidenceStatus != EvidenceStatusUnverified || got[1].DowngradedReason != ReasonNoEvidence ||
			got[1].Severity != validation.SeverityBlocker || got[1].Title != "build failed" {
			t.Errorf("unbacked claim = %+v", got[1])
		}
		if got[2].EvidenceStatus != "" {
			t.Errorf("non-claim marked: %+v", got[2])
		}
		if len(got) != len(findings) {
			t.Errorf("findings dropped: %d of %d", len(got), len(findings))
		}
	})

	t.Run("upload failure is recorded, not attached", func(t *testing.T) {
		fs, dir := newFS(t, FSOptions{})
		// A file where the repository directory must go: every upload for
		// this repository fails in the filesystem itself.
		if err := os.MkdirAll(filepath.Join(dir, "review-artifacts"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "review-artifacts", "octo%2Fhello"), []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		res := Run(t.Context(), slog.New(slog.NewJSONHandler(&logs, nil)), NewOptions(true, true), fs, Input{Scope: scope, Findings: findings, Steps: steps})
		if res.Err != "" || len(res.Stored) != 0 || len(res.Failures) != 2 {
			t.Fatalf("result = %+v", res)
		}
		for _, f := range res.Findings {
			if len(f.Evidence) != 0 {
				t.Fatalf("reference attached after failure: %+v", f)
			}
		}
		if f := res.Failures[1]; f.Step != "test" || !strings.HasSuffix(f.Key, "/test-output/test.log") || f.Reason == "" {
			t.Fatalf("failure = %+v", f)
		}
		if res.Findings[0].EvidenceStatus != EvidenceStatusUnverified {
			t.Fatalf("claim whose upload failed not unverified: %+v", res.Findings[0])
		}
		if !strings.Contains(logs.String(), "evidence upload failed") {
			t.Fatalf("failure not logged: %s", logs.String())
		}
	})

	errorCases := []struct {
		name  string
		store Store
		scope Scope
		want  string
	}{
		{"panic in the store", panickingStore{}, scope, "panic: store exploded"},
		{"no store", nil, scope, "no evidence store configured"},
		{"unusable scope", &countingStore{}, Scope{Repo: "octo/hello"}, "empty head sha"},
	}
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			res := Run(t.Context(), slog.New(slog.NewJSONHandler(&logs, nil)), NewOptions(true, true), tt.store, Input{Scope: tt.scope, Findings: findings, Steps: steps})
			if !strings.Contains(res.Err, tt.want) {
				t.Fatalf("Err = %q, want %q", res.Err, tt.want)
			}
			if d := cmp.Diff(orig, res.Findings); d != "" {
				t.Fatalf("findings not the originals (-want +got):\n%s", d)
			}
			if !strings.Contains(logs.String(), `"level":"ERROR"`) {
				t.Fatalf("hook failure not logged: %s", logs.String())
			}
		})
	}
}

func TestAttachLimitsAndMatching(t *testing.T) {
	fs, _ := newFS(t, FSOptions{})
	scope := Scope{Repo: "o/r", SHA: "s", Review: "r"}
	var arts []Artifact
	for i := range MaxArtifactsPerRun + 1 {
		a := build(t, []byte("x"), B)
		a.Name = "n" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		arts = append(arts, a)
	}
	findings := []validation.Finding{{Step: "test", ExecutionClaim: true}, {Step: "lint"}}
	got, stored, failures := Attach(t.Context(), fs, scope, findings, arts)
	if len(stored) != MaxArtifactsPerRun || len(failures) != 1 || !strings.Contains(failures[0].Reason, "limit") || failures[0].Code != validation.CodeArtifactCeiling {
		t.Fatalf("stored %d, failures %+v", len(stored), failures)
	}
	if len(got[0].Evidence) != MaxArtifactsPerRun || len(got[1].Evidence) != 0 {
		t.Fatalf("evidence counts %d/%d", len(got[0].Evidence), len(got[1].Evidence))
	}
}

func TestRequireKeepsReferencedFindings(t *testing.T) {
	in := []validation.Finding{
		{Severity: validation.SeverityHigh, ExecutionClaim: true, Evidence: []validation.EvidenceRef{{Kind: "log", ID: "42"}}},
		{Severity: validation.SeverityHigh, ExecutionClaim: true, Evidence: []validation.EvidenceRef{{Kind: "log", URL: "https://x"}}},
		{Severity: validation.SeverityHigh, ExecutionClaim: true, Evidence: []validation.EvidenceRef{{Kind: "log"}}},
		{Severity: validation.SeverityMedium, ExecutionClaim: true},
	}
	got := Require(in)
	want := []string{"", "", EvidenceStatusUnverified, EvidenceStatusUnverified}
	for i, f := range got {
		if f.EvidenceStatus != want[i] || f.Severity != in[i].Severity {
			t.Errorf("finding %d = %+v, want status %q", i, f, want[i])
		}
	}
	if in[3].EvidenceStatus != "" {
		t.Fatal("Require modified its input")
	}
}
