package review

import (
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
	good := ParseRepoConfig([]byte("validation:\n  provider: e2b\n  e2b:\n    template: node20\nexecution:\n  mode: always\n  branches: [main, 'release/*']\nreview:\n  requestChanges: true\n"))
	if good.ParseError != "" {
		t.Fatalf("ParseError = %q", good.ParseError)
	}
	want := RepoConfig{
		Validation: ValidationConfig{Provider: "e2b", E2B: E2BConfig{Template: "node20"}},
		Execution:  ExecutionPolicy{Mode: ModeAlways, Branches: []string{"main", "release/*"}},
		Review:     ReviewConfig{RequestChanges: true},
	}
	if diff := cmp.Diff(want, good.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	for name, in := range map[string]string{
		"unknown key":   "validation:\n  providr: e2b\n",
		"bad mode":      "execution:\n  mode: sometimes\n",
		"not yaml":      "validation: [unclosed\n",
		"wrong type":    "execution:\n  branches: 5\n",
		"over the size": "# " + strings.Repeat("x", MaxConfigBytes) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got := ParseRepoConfig([]byte(in)); got.ParseError == "" || !got.Found {
				t.Errorf("ParseRepoConfig accepted %s: %+v", name, got)
			}
		})
	}
	if got := ParseRepoConfig(nil); got.ParseError != "" {
		t.Errorf("empty file: ParseError = %q", got.ParseError)
	}
	at := "# " + strings.Repeat("x", MaxConfigBytes-3) + "\n"
	if len(at) != MaxConfigBytes {
		t.Fatalf("fixture is %d bytes", len(at))
	}
	if got := ParseRepoConfig([]byte(at)); got.ParseError != "" {
		t.Errorf("file of exactly MaxConfigBytes refused: %s", got.ParseError)
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
