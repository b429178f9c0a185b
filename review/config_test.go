package review

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func TestMergeValidation(t *testing.T) {
	tests := []struct {
		name        string
		worker, run ValidationConfig
		want        ValidationConfig
	}{
		{
			name:   "worker provider wins at the top level",
			worker: ValidationConfig{Provider: "managed-e2b", CodeChangesOnly: ptr(true)},
			run:    ValidationConfig{Provider: "local", CodeChangesOnly: ptr(false)},
			want:   ValidationConfig{Provider: "managed-e2b", CodeChangesOnly: ptr(true)},
		},
		{
			name:   "run provider used when the worker supplies none",
			worker: ValidationConfig{CodeChangesOnly: ptr(false)},
			run:    ValidationConfig{Provider: "self-host"},
			want:   ValidationConfig{Provider: "self-host", CodeChangesOnly: ptr(false)},
		},
		{
			name: "codeChangesOnly defaults to true",
			want: ValidationConfig{CodeChangesOnly: ptr(true)},
		},
		{
			name:   "nested objects: run values win, worker fills the rest",
			worker: ValidationConfig{Crabbox: CrabboxConfig{Provider: "aws", Class: "small"}, E2B: E2BConfig{Template: "base", TimeoutMs: 1000, CPU: 2}},
			run:    ValidationConfig{Crabbox: CrabboxConfig{Class: "large"}, E2B: E2BConfig{TimeoutMs: 5000, MemoryMB: 4096}},
			want: ValidationConfig{CodeChangesOnly: ptr(true),
				Crabbox: CrabboxConfig{Provider: "aws", Class: "large"},
				E2B:     E2BConfig{Template: "base", TimeoutMs: 5000, CPU: 2, MemoryMB: 4096}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, MergeValidation(tt.worker, tt.run)); diff != "" {
				t.Errorf("MergeValidation (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRepoConfig(t *testing.T) {
	good := ParseRepoConfig([]byte("validation:\n  provider: e2b\n  e2b:\n    template: node20\n  env:\n    FORCE_COLOR: 1\n    NODE_OPTIONS: --max-old-space-size=2048\nexecution:\n  mode: always\n  branches: [main, 'release/*']\nreview:\n  requestChanges: true\n"))
	if len(good.Errors) != 0 {
		t.Fatalf("Errors = %q", good.Problems())
	}
	want := RepoConfig{
		Validation: ValidationConfig{Provider: "e2b", E2B: E2BConfig{Template: "node20"},
			Env: map[string]string{"FORCE_COLOR": "1", "NODE_OPTIONS": "--max-old-space-size=2048"}},
		Execution: ExecutionPolicy{Mode: ModeAlways, Branches: []string{"main", "release/*"}},
		Review:    ReviewConfig{RequestChanges: true},
	}
	if diff := cmp.Diff(want, good.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	// Each problem is reported with its line, its key and what is
	// allowed, never with a Go type name.
	for _, tt := range []struct {
		name, in string
		want     []string
	}{
		{"unknown key", "validation:\n  providr: e2b\n", []string{"line 2, validation.providr: unknown key (did you mean provider?)", "allowed: provider, codeChangesOnly, crabbox, e2b, env"}},
		{"typo in a mode", "execution:\n  mode: nevr\n", []string{"line 2, execution.mode:", `"nevr" is not one of auto, always, never`}},
		{"not yaml", "validation: [unclosed\n", []string{"not valid YAML"}},
		{"list wanted", "execution:\n  branches: 5\n", []string{"line 2, execution.branches: expected a list"}},
		{"bool wanted", "review:\n  drafts: yes please\n", []string{"line 2, review.drafts: expected true or false, found \"yes please\""}},
		{"number wanted", "validation:\n  e2b:\n    timeoutMs: soon\n", []string{"line 3, validation.e2b.timeoutMs: expected a whole number"}},
		{"secret env", "validation:\n  env:\n    NPM_TOKEN: abc\n", []string{"line 3, validation.env.NPM_TOKEN: NPM_TOKEN looks like a secret"}},
		{"reserved env", "validation:\n  env:\n    PATH: /tmp\n", []string{"validation.env.PATH: PATH is set by gilf itself"}},
		{"env value cap", "validation:\n  env:\n    BIG: " + strings.Repeat("x", MaxRepoEnvValueBytes+1) + "\n", []string{"over the 4096-byte limit"}},
		{"section not a mapping", "execution: never\n", []string{"line 1, execution: expected a mapping of keys"}},
		{"two documents", "review: {}\n---\nreview: {}\n", []string{"more than one YAML document"}},
		{"over the size", "# " + strings.Repeat("x", MaxConfigBytes) + "\n", []string{"over the 65536-byte limit"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseRepoConfig([]byte(tt.in))
			msg := got.Problems()
			if len(got.Errors) == 0 || !got.Found {
				t.Fatalf("ParseRepoConfig accepted it: %+v", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("problems %q do not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "review.") && strings.Contains(msg, "Config") || strings.Contains(msg, "!!") {
				t.Errorf("problems %q quote Go or YAML internals", msg)
			}
		})
	}
	at := "validation:\n  env:\n    OK: " + strings.Repeat("x", MaxRepoEnvValueBytes) + "\n"
	if got := ParseRepoConfig([]byte(at)); len(got.Errors) != 0 {
		t.Errorf("a value of exactly MaxRepoEnvValueBytes refused: %s", got.Problems())
	}
	var many strings.Builder
	many.WriteString("validation:\n  env:\n")
	for i := range MaxRepoEnvEntries + 1 {
		fmt.Fprintf(&many, "    V%d: x\n", i)
	}
	if got := ParseRepoConfig([]byte(many.String())); !strings.Contains(got.Problems(), "65 variables, over the limit of 64") {
		t.Errorf("MaxRepoEnvEntries+1 variables: %q", got.Problems())
	}
	if got := ParseRepoConfig(nil); len(got.Errors) != 0 {
		t.Errorf("empty file: %s", got.Problems())
	}
	at = "# " + strings.Repeat("x", MaxConfigBytes-3) + "\n"
	if len(at) != MaxConfigBytes {
		t.Fatalf("fixture is %d bytes", len(at))
	}
	if got := ParseRepoConfig([]byte(at)); len(got.Errors) != 0 {
		t.Errorf("file of exactly MaxConfigBytes refused: %s", got.Problems())
	}
	var bad strings.Builder
	for i := range MaxConfigErrors + 5 {
		fmt.Fprintf(&bad, "k%d: 1\n", i)
	}
	if got := ParseRepoConfig([]byte(bad.String())); len(got.Errors) != MaxConfigErrors+5 || !strings.HasSuffix(got.Problems(), "… and 5 more") {
		t.Errorf("%d errors; problems end %q", len(got.Errors), got.Problems()[max(0, len(got.Problems())-40):])
	}
}

func TestExecutionPolicy(t *testing.T) {
	facts := PRFacts{BaseRef: "main", Author: "octocat", Labels: []string{"bug"},
		Files: []ChangedFile{{Name: "src/index.js"}, {Name: "README.md"}}}
	tests := []struct {
		name    string
		policy  ExecutionPolicy
		wantRun bool
	}{
		{"empty policy runs", ExecutionPolicy{}, true},
		{"never", ExecutionPolicy{Mode: ModeNever}, false},
		{"always with no filters", ExecutionPolicy{Mode: ModeAlways}, true},
		{"branch glob matches", ExecutionPolicy{Branches: []string{"ma*"}}, true},
		{"branch does not match", ExecutionPolicy{Branches: []string{"release/*"}}, false},
		{"author matches case-insensitively", ExecutionPolicy{Authors: []string{"OctoCat"}}, true},
		{"author not listed", ExecutionPolicy{Authors: []string{"someone"}}, false},
		{"label present", ExecutionPolicy{Labels: []string{"bug", "x"}}, true},
		{"label absent", ExecutionPolicy{Labels: []string{"run-ci"}}, false},
		{"path matches with **", ExecutionPolicy{Paths: []string{"src/**"}}, true},
		{"path does not match", ExecutionPolicy{Paths: []string{"lib/**"}}, false},
		{"always does not override a failing filter", ExecutionPolicy{Mode: ModeAlways, Labels: []string{"run-ci"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, reason := tt.policy.Decide(facts)
			if run != tt.wantRun {
				t.Fatalf("Decide = %v (%q), want %v", run, reason, tt.wantRun)
			}
			if !run && reason == "" {
				t.Error("a policy that disables validation must say why")
			}
		})
	}
}

func TestClassifyDiff(t *testing.T) {
	attrs := []byte("# generated\nsrc/gen/** linguist-generated\nsrc/gen/keep.js -linguist-generated\n*.pb.js linguist-generated=true\n")
	files := func(names ...string) []ChangedFile {
		var out []ChangedFile
		for _, n := range names {
			out = append(out, ChangedFile{Name: n})
		}
		return out
	}
	tests := []struct {
		name  string
		files []ChangedFile
		want  DiffClass
	}{
		{"no files", nil, DiffEmpty},
		{"markdown anywhere", files("README.md", "packages/a/CHANGELOG.md"), DiffDocsOnly},
		{"docs dir and license", files("docs/guide/intro.html", "LICENSE"), DiffDocsOnly},
		{"lockfiles", files("package-lock.json", "packages/x/yarn.lock"), DiffGeneratedOnly},
		{"dist output", files("dist/index.js", "dist/sub/a.map"), DiffGeneratedOnly},
		{"gitattributes generated", files("src/gen/api.js", "proto/x.pb.js"), DiffGeneratedOnly},
		{"gitattributes later line unsets", files("src/gen/keep.js"), DiffCode},
		{"code", files("src/index.js"), DiffCode},
		{"docs plus code", files("README.md", "index.js"), DiffCode},
		{"docs plus lockfile is neither", files("README.md", "package-lock.json"), DiffCode},
		{"rename from code into docs is code", []ChangedFile{{Name: "docs/old.js", Previous: "src/old.js"}}, DiffCode},
		{"package.json is code", files("package.json"), DiffCode},
		{"markdown-looking dir is not docs", files("notes.md/index.js"), DiffCode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyDiff(tt.files, attrs); got != tt.want {
				t.Errorf("ClassifyDiff = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*.md", "a/b/c.md", true},
		{"docs/**", "docs", true},
		{"docs/**", "docs/a/b.txt", true},
		{"docs/**", "mydocs/a", false},
		{"src/**/test/*.js", "src/a/b/test/x.js", true},
		{"src/**/test/*.js", "src/test/x.js", true},
		{"src/**/test/*.js", "src/test/y/x.js", false},
		{"/dist/", "dist/a.js", true},
		{"[", "[", false},
		{"", "x", false},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}
