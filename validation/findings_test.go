package validation

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestFindings(t *testing.T) {
	npm := func(s string) []string { return []string{"npm", "run", s} }
	tests := []struct {
		name  string
		steps []StepResult
		want  []Finding
	}{
		{
			name:  "nothing failed",
			steps: []StepResult{passed(StepInstall), {Name: StepTest, Status: StatusInconclusive}, {Name: StepLint, Status: StatusNotRun}},
			want:  []Finding{},
		},
		{
			name: "failed test is high with its output",
			steps: []StepResult{{Name: StepTest, Argv: npm("test"), Status: StatusFailed, ExitCode: exitCode(1),
				Output: Output{Head: "FAIL src/a.test.ts\nexpected 1 to be 2\n"}}},
			want: []Finding{{Severity: SeverityHigh, Step: StepTest, Title: "`npm run test` failed with exit code 1",
				Body: "FAIL src/a.test.ts\nexpected 1 to be 2\n", ExecutionClaim: true}},
		},
		{
			name:  "lint is medium",
			steps: []StepResult{{Name: StepLint, Argv: npm("lint"), Status: StatusFailed, ExitCode: exitCode(2)}},
			want:  []Finding{{Severity: SeverityMedium, Step: StepLint, Title: "`npm run lint` failed with exit code 2", ExecutionClaim: true}},
		},
		{
			name:  "timed out typecheck",
			steps: []StepResult{{Name: StepTypecheck, Argv: npm("typecheck"), Status: StatusTimedOut, TimeoutMs: 600000}},
			want:  []Finding{{Severity: SeverityHigh, Step: StepTypecheck, Title: "`npm run typecheck` timed out after 10m", ExecutionClaim: true}},
		},
		{
			name:  "killed build",
			steps: []StepResult{{Name: StepBuild, Argv: npm("build"), Status: StatusKilled, Signal: "SIGKILL", Reason: "memory limit reached"}},
			want:  []Finding{{Severity: SeverityHigh, Step: StepBuild, Title: "`npm run build` was killed by SIGKILL (memory limit reached)", ExecutionClaim: true}},
		},
		{
			name:  "install failure is high; steps not run have none",
			steps: []StepResult{{Name: StepInstall, Argv: []string{"npm", "ci"}, Status: StatusFailed, ExitCode: exitCode(1)}, {Name: StepTest, Status: StatusNotRun}},
			want:  []Finding{{Severity: SeverityHigh, Step: StepInstall, Title: "`npm ci` failed with exit code 1", ExecutionClaim: true}},
		},
		{
			name:  "a step that never reported its end",
			steps: []StepResult{{Name: StepTest, Argv: npm("test"), Status: StatusFailed, Reason: "the step started but did not report how it ended"}},
			want: []Finding{{Severity: SeverityHigh, Step: StepTest, ExecutionClaim: true,
				Title: "`npm run test` failed without an exit status (the step started but did not report how it ended)"}},
		},
		{
			name:  "hostile argv cannot break the code span",
			steps: []StepResult{{Name: StepTest, Argv: []string{"npm", "run", "te`st\n", "a b"}, Status: StatusFailed, ExitCode: exitCode(1)}},
			want:  []Finding{{Severity: SeverityHigh, Step: StepTest, Title: "`npm run 'te'st?' 'a b'` failed with exit code 1", ExecutionClaim: true}},
		},
		{
			name:  "truncated output quotes the tail",
			steps: []StepResult{{Name: StepTest, Argv: npm("test"), Status: StatusFailed, ExitCode: exitCode(1), Output: Output{Head: "start", Tail: "the end\n", Truncated: true}}},
			want:  []Finding{{Severity: SeverityHigh, Step: StepTest, Title: "`npm run test` failed with exit code 1", Body: "the end\n", ExecutionClaim: true}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Findings(tc.steps)); diff != "" {
				t.Errorf("Findings() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindingBody(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	tests := []struct {
		name string
		out  string
		want string
	}{
		{"exactly the limit is whole", strings.Repeat(line, FindingBodyBytes/100) + strings.Repeat("y", FindingBodyBytes%100), strings.Repeat(line, FindingBodyBytes/100) + strings.Repeat("y", FindingBodyBytes%100)},
		{"over the limit starts on the next line", "first line\n" + strings.Repeat(line, FindingBodyBytes/100+1), strings.Repeat(line, FindingBodyBytes/100)},
		{"no line break keeps the last bytes", strings.Repeat("z", FindingBodyBytes+10), strings.Repeat("z", FindingBodyBytes)},
		{"a rune cut by the limit is dropped", "\u20ac" + strings.Repeat("a", FindingBodyBytes-2), strings.Repeat("a", FindingBodyBytes-2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := findingBody(Output{Head: tc.out})
			if got != tc.want {
				t.Errorf("body is %d bytes starting %q, want %d bytes starting %q", len(got), got[:min(20, len(got))], len(tc.want), tc.want[:min(20, len(tc.want))])
			}
			if len(got) > FindingBodyBytes || !utf8.ValidString(got) {
				t.Errorf("body is %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
		})
	}
}
