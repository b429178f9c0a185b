package validation

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files under testdata/markers")

const testNonce = "0123456789abcdef0123456789abcdef"

// shellRunTimeout bounds every real shell run in these tests.
const shellRunTimeout = 20 * time.Second

func goldenPlan() Plan {
	return Plan{
		PackageManager: NPM,
		Steps: []Step{
			{Name: StepInstall, Argv: []string{"npm", "ci"}, Network: NetworkRegistry, Timeout: 10 * time.Minute},
			{Name: StepTest, Argv: []string{"npm", "run", "test"}, Script: "vitest run; echo $HOME `id`", Network: NetworkNone},
			{Name: StepTypecheck, Argv: []string{"npm", "run", "typecheck"}, Script: "true", Inconclusive: "the script can only succeed\nrm -rf /"},
			{Name: StepLint, Argv: []string{"npm", "run", "lint", "--", "it's", "$(id)", "a b"}, Network: NetworkNone},
			{Name: StepBuild, Argv: nil},
		},
	}
}

func TestBuildShellGolden(t *testing.T) {
	got := BuildShell(goldenPlan(), testNonce)
	path := filepath.Join("testdata", "markers", "shell.golden.sh")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("BuildShell mismatch (-want +got):\n%s", diff)
	}
	// Nothing the repository wrote reaches the script.
	for _, s := range []string{"vitest", "rm -rf", "can only succeed", "id`"} {
		if bytes.Contains(got, []byte(s)) {
			t.Errorf("script contains repository text %q", s)
		}
	}
}

func TestShellWord(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "''"},
		{"plain", "'plain'"},
		{"it's", `'it'\''s'`},
		{"''", `''\'''\'''`},
		{"$(id) `id` \\ \n", "'$(id) `id` \\ \n'"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := shellWord(tc.in); got != tc.want {
				t.Errorf("shellWord(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestNewNonce(t *testing.T) {
	a, err := NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(a) || a == b {
		t.Errorf("NewNonce() = %q then %q: want two different 32-digit hex strings", a, b)
	}
}

// runShell runs the generated script with /bin/sh in a temp dir and returns
// its combined output.
func runShell(t *testing.T, plan Plan, nonce string) []byte {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "gilf.sh")
	if err := os.WriteFile(script, BuildShell(plan, nonce), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), shellRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "CI=false"}
	// A stdin that never ends: a step that reads it would hang but for the
	// script's </dev/null.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh %s: %v\n%s", script, err, out)
	}
	return out
}

func shStep(name, script string) Step {
	return Step{Name: name, Argv: []string{"sh", "-c", script}, Timeout: time.Minute, Network: NetworkNone}
}

func TestBuildShellRuns(t *testing.T) {
	nonce, err := NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	exit := func(n int) *int { return &n }
	tests := []struct {
		name  string
		plan  Plan
		want  []StepResult // Name, Status, ExitCode, Output.Head, Reason compared
		never []string     // markers that must not be printed
		// anyOutput skips comparing output the shell itself words
		// differently from one sh to another.
		anyOutput bool
	}{
		{
			name: "steps pass, fail, are skipped and see CI=true",
			plan: Plan{Steps: []Step{
				shStep(StepInstall, "echo installing"),
				shStep(StepTest, `echo "it's"; printf 'no newline'; exit 3`),
				{Name: StepTypecheck, Argv: []string{"sh", "-c", "echo never"}, Inconclusive: "the script can only succeed"},
				shStep(StepLint, "echo to-stderr >&2; cat; echo after-cat"),
				shStep(StepBuild, `test "$CI" = true && printf ''`),
			}},
			want: []StepResult{
				{Name: StepInstall, Status: StatusPassed, ExitCode: exit(0), Output: Output{Head: "installing\n"}},
				{Name: StepTest, Status: StatusFailed, ExitCode: exit(3), Output: Output{Head: "it's\nno newline"}},
				{Name: StepTypecheck, Status: StatusInconclusive, Reason: "the script can only succeed"},
				{Name: StepLint, Status: StatusPassed, ExitCode: exit(0), Output: Output{Head: "to-stderr\nafter-cat\n"}},
				{Name: StepBuild, Status: StatusPassed, ExitCode: exit(0)},
			},
			never: []string{MarkerStart + MarkerTag(nonce, StepTypecheck)},
		},
		{
			name: "install failure stops the shell",
			plan: Plan{Steps: []Step{
				shStep(StepInstall, "echo 'npm ERR! missing lockfile'; exit 1"),
				shStep(StepTest, "echo tests ran"),
			}},
			want: []StepResult{
				{Name: StepInstall, Status: StatusFailed, ExitCode: exit(1), Output: Output{Head: "npm ERR! missing lockfile\n"}},
				{Name: StepTest, Status: StatusNotRun, Reason: "not run: the install step failed"},
			},
			never: []string{MarkerStart + MarkerTag(nonce, StepTest), "tests ran"},
		},
		{
			name: "arguments reach the command unchanged",
			plan: Plan{Steps: []Step{
				{Name: StepTest, Argv: []string{"printf", "%s|", "a b", "$HOME", "`id`", "it's", "\\n", "", "\n"}},
			}},
			want: []StepResult{
				{Name: StepTest, Status: StatusPassed, ExitCode: exit(0), Output: Output{Head: "a b|$HOME|`id`|it's|\\n||\n|"}},
			},
		},
		{
			name: "a step with no command fails as not found",
			plan: Plan{Steps: []Step{{Name: StepTest}, {Name: StepLint, Argv: []string{"echo", "nul\x00byte"}}}},
			want: []StepResult{
				{Name: StepTest, Status: StatusFailed, ExitCode: exit(127), Output: Output{Head: "gilf: this step has no runnable command\n"}},
				{Name: StepLint, Status: StatusFailed, ExitCode: exit(127), Output: Output{Head: "gilf: this step has no runnable command\n"}},
			},
		},
		{
			name:      "a signal is reported as the shell's status",
			plan:      Plan{Steps: []Step{shStep(StepTest, "kill -9 $$")}},
			want:      []StepResult{{Name: StepTest, Status: StatusFailed, ExitCode: exit(137)}},
			anyOutput: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := runShell(t, tc.plan, nonce)
			for _, s := range tc.never {
				if bytes.Contains(out, []byte(s)) {
					t.Errorf("output contains %q:\n%s", s, out)
				}
			}
			p := NewMarkerParser(tc.plan, nonce, CaptureOptions{})
			if _, err := p.Write(out); err != nil {
				t.Fatal(err)
			}
			got, integrity := p.Finish()
			if integrity != "" {
				t.Errorf("integrity = %q, want none\n%s", integrity, out)
			}
			if p.Unattributed() != 0 {
				t.Errorf("Unattributed() = %d, want 0", p.Unattributed())
			}
			opts := cmp.Options{
				cmpopts.IgnoreFields(StepResult{}, "Argv", "TimeoutMs", "Network", "Reported"),
				cmpopts.IgnoreFields(Output{}, "Bytes", "SHA256"),
			}
			if tc.anyOutput {
				opts = append(opts, cmpopts.IgnoreFields(StepResult{}, "Output"))
			}
			if diff := cmp.Diff(tc.want, got, opts); diff != "" {
				t.Errorf("results mismatch (-want +got):\n%s\noutput:\n%s", diff, out)
			}
			for _, r := range got {
				if !r.Reported {
					t.Errorf("step %s: Reported is false", r.Name)
				}
				if r.ExitCode != nil && (r.Output.Bytes != int64(len(r.Output.Head)) || r.Output.SHA256 != sha256Hex([]byte(r.Output.Head))) {
					t.Errorf("step %s: bytes %d, sha %s for head %q", r.Name, r.Output.Bytes, r.Output.SHA256, r.Output.Head)
				}
			}
			if strings.Count(string(out), MarkerEnd) != countRan(got) {
				t.Errorf("END markers do not match the steps that ran:\n%s", out)
			}
		})
	}
}

func countRan(rs []StepResult) int {
	n := 0
	for _, r := range rs {
		if r.ExitCode != nil {
			n++
		}
	}
	return n
}

func TestBuildShellExportsPlanEnv(t *testing.T) {
	plan := Plan{
		Steps: []Step{{Name: StepTest, Argv: []string{"sh", "-c", `printf '%s|%s|%s\n' "$FORCE_COLOR" "$QUOTED" "$CI"`}}},
		Env:   map[string]string{"FORCE_COLOR": "1", "QUOTED": `it's "$HOME" ; rm -rf /`, "CI": "false", "GITHUB_TOKEN": "x"},
	}
	script := string(BuildShell(plan, "n0nce"))
	if strings.Contains(script, "GITHUB_TOKEN") {
		t.Errorf("a secret-looking name was written into the script:\n%s", script)
	}
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	if want := `1|it's "$HOME" ; rm -rf /|true`; !strings.Contains(string(out), want) {
		t.Errorf("output %q does not hold %q: the values must arrive verbatim and CI stays true", out, want)
	}
}
