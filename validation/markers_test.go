package validation

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func markerPlan() Plan {
	return Plan{
		PackageManager: NPM,
		Steps: []Step{
			{Name: StepInstall, Argv: []string{"npm", "ci"}, Network: NetworkRegistry, Timeout: 10 * time.Minute},
			{Name: StepTest, Argv: []string{"npm", "run", "test"}, Network: NetworkNone, Timeout: 5 * time.Minute},
			{Name: StepTypecheck, Argv: []string{"npm", "run", "typecheck"}, Inconclusive: "the script can only succeed"},
			{Name: StepLint, Argv: []string{"npm", "run", "lint"}, Network: NetworkNone},
			{Name: StepBuild, Argv: []string{"npm", "run", "build"}, Network: NetworkNone},
		},
	}
}

// st and en print markers the way the generated shell does: START on its
// own line, END after a newline of the shell's own.
func startLine(step string) string { return MarkerStart + MarkerTag(testNonce, step) + "\n" }
func endLine(step, exit string) string {
	return "\n" + MarkerEnd + MarkerTag(testNonce, step) + ":" + exit + "\n"
}

// happy is a whole, consistent run of markerPlan.
func happyStream() string {
	return startLine(StepInstall) + "added 1 package\n" + endLine(StepInstall, "0") +
		startLine(StepTest) + "ok 1\nok 2\n" + endLine(StepTest, "0") +
		startLine(StepLint) + endLine(StepLint, "0") +
		startLine(StepBuild) + "built" + endLine(StepBuild, "0")
}

// summarize writes each result as "name status exit head".
func markerSummary(rs []StepResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		exit := "-"
		if r.ExitCode != nil {
			exit = fmt.Sprint(*r.ExitCode)
		}
		out[i] = fmt.Sprintf("%s %s %s %q", r.Name, r.Status, exit, r.Output.Head)
	}
	return out
}

// parseChunked parses stream in writes of chunk bytes (0: one write).
func parseChunked(t *testing.T, plan Plan, stream string, chunk int, opts CaptureOptions) ([]StepResult, string, *MarkerParser) {
	t.Helper()
	p := NewMarkerParser(plan, testNonce, opts)
	b := []byte(stream)
	if chunk <= 0 {
		chunk = len(b) + 1
	}
	for len(b) > 0 {
		k := min(chunk, len(b))
		if n, err := p.Write(b[:k]); err != nil || n != k {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, k)
		}
		b = b[k:]
	}
	rs, integrity := p.Finish()
	return rs, integrity, p
}

const notRunNoStart = "not_run - \"\""

func TestMarkerParser(t *testing.T) {
	tag := func(step string) string { return MarkerTag(testNonce, step) }
	allPassed := []string{
		`install passed 0 "added 1 package\n"`,
		`test passed 0 "ok 1\nok 2\n"`,
		`typecheck inconclusive - ""`,
		`lint passed 0 ""`,
		`build passed 0 "built"`,
	}
	rest := startLine(StepLint) + endLine(StepLint, "0") + startLine(StepBuild) + endLine(StepBuild, "0")
	tests := []struct {
		name         string
		stream       string
		want         []string
		integrity    string // substring; empty: none expected
		unattributed int64
	}{
		{name: "consistent run", stream: happyStream(), want: allPassed},
		{
			name:   "a failing test",
			stream: startLine(StepInstall) + endLine(StepInstall, "0") + startLine(StepTest) + "FAIL a.test.ts\n" + endLine(StepTest, "1") + rest,
			want:   []string{`install passed 0 ""`, `test failed 1 "FAIL a.test.ts\n"`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
		},
		{
			name: "END with a wrong nonce is output",
			stream: startLine(StepInstall) + endLine(StepInstall, "0") + startLine(StepTest) +
				"__GILF_VALIDATION_END__:ffffffffffffffffffffffffffffffff-test:0\nreal\n" + endLine(StepTest, "1") + rest,
			want: []string{`install passed 0 ""`, `test failed 1 "__GILF_VALIDATION_END__:ffffffffffffffffffffffffffffffff-test:0\nreal\n"`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
		},
		{
			name:   "END without a nonce is output",
			stream: startLine(StepInstall) + endLine(StepInstall, "0") + startLine(StepTest) + "__GILF_VALIDATION_END__:test:0\n" + endLine(StepTest, "2") + rest,
			want:   []string{`install passed 0 ""`, `test failed 2 "__GILF_VALIDATION_END__:test:0\n"`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
		},
		{
			name:   "a marker in mid-line is output",
			stream: startLine(StepInstall) + endLine(StepInstall, "0") + startLine(StepTest) + "x" + MarkerEnd + tag(StepTest) + ":0\n" + endLine(StepTest, "1") + rest,
			want:   []string{`install passed 0 ""`, `test failed 1 "x` + MarkerEnd + tag(StepTest) + `:0\n"`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
		},
		{
			name:   "a marker after leading space is output",
			stream: startLine(StepInstall) + " " + MarkerEnd + tag(StepInstall) + ":0\n" + endLine(StepInstall, "0") + startLine(StepTest) + endLine(StepTest, "0") + rest,
			want:   []string{`install passed 0 " ` + MarkerEnd + tag(StepInstall) + `:0\n"`, `test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
		},
		{
			name: "unplanned tags are output",
			stream: startLine(StepInstall) + MarkerStart + tag("evilstep") + "\n" + MarkerStart + tag(StepTypecheck) + "\n" +
				MarkerEnd + tag(StepTypecheck) + ":0\n" + endLine(StepInstall, "0") + startLine(StepTest) + endLine(StepTest, "0") + rest,
			want: []string{
				`install passed 0 "` + MarkerStart + tag("evilstep") + `\n` + MarkerStart + tag(StepTypecheck) + `\n` + MarkerEnd + tag(StepTypecheck) + `:0\n"`,
				`test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`,
			},
		},
		{
			name:   "carriage returns before newlines are tolerated",
			stream: strings.ReplaceAll(happyStream(), "\n", "\r\n"),
			want: []string{
				`install passed 0 "added 1 package\r\n\r"`, `test passed 0 "ok 1\r\nok 2\r\n\r"`, `typecheck inconclusive - ""`,
				`lint passed 0 "\r"`, `build passed 0 "built\r"`,
			},
		},
		{
			name:      "two carriage returns are not tolerated",
			stream:    startLine(StepInstall) + "\n" + MarkerEnd + tag(StepInstall) + ":0\r\r\n",
			want:      []string{`install failed - "\n` + MarkerEnd + tag(StepInstall) + `:0\r\r\n"`, "test " + notRunNoStart, `typecheck inconclusive - ""`, "lint " + notRunNoStart, "build " + notRunNoStart},
			integrity: `step "install" has a START marker but no END marker`,
		},
		{
			name:      "trailing bytes after the exit status",
			stream:    startLine(StepInstall) + "\n" + MarkerEnd + tag(StepInstall) + ":0 \n",
			want:      []string{`install failed - "\n` + MarkerEnd + tag(StepInstall) + `:0 \n"`, "test " + notRunNoStart, `typecheck inconclusive - ""`, "lint " + notRunNoStart, "build " + notRunNoStart},
			integrity: "malformed exit status",
		},
		{
			name:         "output outside steps is counted, not kept",
			stream:       "preamble\n" + happyStream()[:len(happyStream())-len(startLine(StepBuild)+"built"+endLine(StepBuild, "0"))] + "between\n" + startLine(StepBuild) + "built" + endLine(StepBuild, "0") + "after",
			want:         allPassed,
			unattributed: int64(len("preamble\n") + len("between\n") + len("after")),
		},
		{
			name:   "the last END may lack its newline",
			stream: strings.TrimSuffix(happyStream(), "\n"),
			want:   allPassed,
		},
		{
			name:   "only the shell's newline before END is removed",
			stream: startLine(StepInstall) + "a\n\n" + endLine(StepInstall, "0") + startLine(StepTest) + endLine(StepTest, "0") + rest,
			want:   []string{`install passed 0 "a\n\n"`, `test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
		},
		{
			name:      "END before START",
			stream:    startLine(StepInstall) + endLine(StepInstall, "0") + endLine(StepTest, "0") + startLine(StepTest) + endLine(StepTest, "0") + rest,
			want:      []string{`install passed 0 ""`, `test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
			integrity: `END marker for step "test" before its START`,
			// the rejected END line is output outside every step
			unattributed: int64(len(endLine(StepTest, "0"))),
		},
		{
			name:      "END for a step other than the open one",
			stream:    startLine(StepInstall) + "x" + endLine(StepTest, "0") + endLine(StepInstall, "0") + startLine(StepTest) + endLine(StepTest, "0") + rest,
			want:      []string{`install passed 0 "x\n` + MarkerEnd + tag(StepTest) + `:0\n"`, `test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
			integrity: `END marker for step "test" before its START`,
		},
		{
			name:      "duplicate START",
			stream:    startLine(StepInstall) + startLine(StepInstall) + endLine(StepInstall, "0") + startLine(StepTest) + endLine(StepTest, "0") + rest,
			want:      []string{`install passed 0 "` + strings.TrimSuffix(startLine(StepInstall), "\n") + `\n"`, `test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
			integrity: `duplicate START marker for step "install"`,
		},
		{
			name:         "duplicate END",
			stream:       startLine(StepInstall) + endLine(StepInstall, "0") + endLine(StepInstall, "1") + startLine(StepTest) + endLine(StepTest, "0") + rest,
			want:         []string{`install passed 0 ""`, `test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
			integrity:    `duplicate END marker for step "install"`,
			unattributed: int64(len(endLine(StepInstall, "1"))),
		},
		{
			name:      "a step started out of plan order",
			stream:    startLine(StepTest) + endLine(StepTest, "0") + startLine(StepInstall) + endLine(StepInstall, "0") + rest,
			want:      []string{`install passed 0 ""`, `test passed 0 ""`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
			integrity: `step "test" started out of plan order (expected "install")`,
		},
		{
			name:      "a step skipped",
			stream:    startLine(StepInstall) + endLine(StepInstall, "0") + rest,
			want:      []string{`install passed 0 ""`, "test " + notRunNoStart, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
			integrity: `step "lint" started out of plan order (expected "test")`,
		},
		{
			name:      "nested START",
			stream:    startLine(StepInstall) + "i\n" + startLine(StepTest) + "t\n" + endLine(StepTest, "0") + rest,
			want:      []string{`install failed - "i\n"`, `test passed 0 "t\n"`, `typecheck inconclusive - ""`, `lint passed 0 ""`, `build passed 0 ""`},
			integrity: `START marker for step "test" while step "install" is still open`,
		},
		{
			name:      "a missing END",
			stream:    startLine(StepInstall) + endLine(StepInstall, "0") + startLine(StepTest) + "running...\n",
			want:      []string{`install passed 0 ""`, `test failed - "running...\n"`, `typecheck inconclusive - ""`, "lint " + notRunNoStart, "build " + notRunNoStart},
			integrity: `step "test" has a START marker but no END marker`,
		},
		{
			name:   "install failure leaves the rest not run",
			stream: startLine(StepInstall) + "npm ERR!\n" + endLine(StepInstall, "1"),
			want: []string{
				`install failed 1 "npm ERR!\n"`, `test not_run - ""`, `typecheck inconclusive - ""`, `lint not_run - ""`, `build not_run - ""`,
			},
		},
		{
			name:      "a step started after a failed install",
			stream:    startLine(StepInstall) + endLine(StepInstall, "1") + startLine(StepTest) + endLine(StepTest, "0"),
			want:      []string{`install failed 1 ""`, `test not_run - ""`, `typecheck inconclusive - ""`, `lint not_run - ""`, `build not_run - ""`},
			integrity: `step "test" started after the install step failed`,
			// the START line, and the END that then closes nothing
			unattributed: int64(len(startLine(StepTest)) + len(endLine(StepTest, "0"))),
		},
		{
			name:   "no markers at all",
			stream: "sandbox died\n",
			want: []string{
				"install " + notRunNoStart, "test " + notRunNoStart, `typecheck inconclusive - ""`, "lint " + notRunNoStart, "build " + notRunNoStart,
			},
			unattributed: int64(len("sandbox died\n")),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, wantInteg, _ := parseChunked(t, markerPlan(), tc.stream, 0, CaptureOptions{})
			if diff := cmp.Diff(tc.want, markerSummary(want)); diff != "" {
				t.Errorf("results mismatch (-want +got):\n%s", diff)
			}
			if tc.integrity == "" && wantInteg != "" {
				t.Errorf("integrity = %q, want none", wantInteg)
			}
			if !strings.Contains(wantInteg, tc.integrity) || (tc.integrity != "") != (wantInteg != "") {
				t.Errorf("integrity = %q, want it to contain %q", wantInteg, tc.integrity)
			}
			// The same results whatever the write sizes.
			for _, chunk := range []int{1, 2, 3, 7, 19, 64} {
				got, integ, p := parseChunked(t, markerPlan(), tc.stream, chunk, CaptureOptions{})
				if diff := cmp.Diff(want, got); diff != "" || integ != wantInteg {
					t.Fatalf("chunk %d: results differ from one write (-one +chunked):\n%s\nintegrity %q vs %q", chunk, diff, wantInteg, integ)
				}
				if p.Unattributed() != tc.unattributed {
					t.Errorf("chunk %d: Unattributed() = %d, want %d", chunk, p.Unattributed(), tc.unattributed)
				}
			}
		})
	}
}

func TestMarkerParserMalformedExit(t *testing.T) {
	for _, exit := range []string{"", "-1", "+0", "256", "999", "1000", "99999999999999999999", "0x0", " 0", "0 ", "00", "01", "0\x00", "1.0", "٣"} {
		t.Run(fmt.Sprintf("%q", exit), func(t *testing.T) {
			stream := startLine(StepInstall) + endLine(StepInstall, exit) + endLine(StepInstall, "0") + startLine(StepTest) + endLine(StepTest, "0")
			rs, integrity, _ := parseChunked(t, markerPlan(), stream, 0, CaptureOptions{})
			if !strings.Contains(integrity, `END marker of step "install" has a malformed exit status`) {
				t.Errorf("integrity = %q, want a malformed exit status", integrity)
			}
			// The malformed line is output of the open step, which the
			// next valid END closes.
			if rs[0].Status != StatusPassed || !strings.Contains(rs[0].Output.Head, MarkerEnd) {
				t.Errorf("install: %s %q", rs[0].Status, rs[0].Output.Head)
			}
		})
	}
	for _, exit := range []string{"0", "1", "9", "10", "99", "100", "255"} {
		t.Run("valid "+exit, func(t *testing.T) {
			rs, integrity, _ := parseChunked(t, markerPlan(), startLine(StepInstall)+endLine(StepInstall, exit), 0, CaptureOptions{})
			if integrity != "" || rs[0].ExitCode == nil || fmt.Sprint(*rs[0].ExitCode) != exit {
				t.Errorf("integrity %q, exit %v", integrity, rs[0].ExitCode)
			}
		})
	}
}

func TestMarkerParserLineCap(t *testing.T) {
	overhead := len(MarkerStart) + len(testNonce) + 1 // START line without the step name
	tests := []struct {
		name    string
		lineLen int
		marker  bool
	}{
		{"START line of exactly MaxMarkerLineBytes", MaxMarkerLineBytes, true},
		{"START line one byte longer", MaxMarkerLineBytes + 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			step := strings.Repeat("s", tc.lineLen-overhead)
			plan := Plan{Steps: []Step{{Name: step, Argv: []string{"x"}}}}
			stream := MarkerStart + MarkerTag(testNonce, step) + "\nout"
			if got := len(stream) - len("\nout"); got != tc.lineLen {
				t.Fatalf("START line is %d bytes, want %d", got, tc.lineLen)
			}
			for _, chunk := range []int{0, 1, 100} {
				rs, integrity, p := parseChunked(t, plan, stream, chunk, CaptureOptions{})
				started := rs[0].Status != StatusNotRun
				if started != tc.marker {
					t.Errorf("chunk %d: step started = %v, want %v (integrity %q)", chunk, started, tc.marker, integrity)
				}
				if cap(p.scan.cand) != MaxMarkerLineBytes {
					t.Errorf("chunk %d: line buffer grew to %d", chunk, cap(p.scan.cand))
				}
			}
		})
	}
}

// TestMarkerParserLongLine streams a 16 MiB line that starts like a marker:
// it is output, never held whole.
func TestMarkerParserLongLine(t *testing.T) {
	const size = 16 << 20
	line := append([]byte(markerCommon), bytes.Repeat([]byte("x"), size-len(markerCommon))...)
	p := NewMarkerParser(markerPlan(), testNonce, CaptureOptions{MaxOutputBytes: 1000})
	for _, b := range [][]byte{[]byte(startLine(StepInstall)), line[:10], line[10:4000], line[4000:], []byte(endLine(StepInstall, "0"))} {
		for len(b) > 0 {
			k := min(len(b), 1<<20)
			if _, err := p.Write(b[:k]); err != nil {
				t.Fatal(err)
			}
			b = b[k:]
			if cap(p.scan.cand) != MaxMarkerLineBytes || len(p.scan.cand) > MaxMarkerLineBytes {
				t.Fatalf("line buffer is %d/%d bytes", len(p.scan.cand), cap(p.scan.cand))
			}
		}
	}
	rs, integrity := p.Finish()
	if integrity != "" || rs[0].Status != StatusPassed || rs[0].Output.Bytes != size || !rs[0].Output.Truncated {
		t.Errorf("install: %s, %d bytes, truncated %v, integrity %q", rs[0].Status, rs[0].Output.Bytes, rs[0].Output.Truncated, integrity)
	}
	if !strings.HasPrefix(rs[0].Output.Head, markerCommon+"xxx") || rs[0].Output.Tail != strings.Repeat("x", 500) {
		t.Errorf("head %q… tail …%q", rs[0].Output.Head[:30], rs[0].Output.Tail[480:])
	}
}

func TestMarkerParserRedactsAndTruncates(t *testing.T) {
	secret := Secret{Name: "GITHUB_TOKEN", Value: "ghs_0123456789abcdefABCDEF"}
	out := "token=" + secret.Value + "\n" + strings.Repeat("line\n", 100) + "again " + secret.Value + "\n"
	stream := startLine(StepInstall) + out + endLine(StepInstall, "0") + startLine(StepTest) + secret.Value + endLine(StepTest, "1")
	for _, chunk := range []int{0, 1, 5, 13} {
		rs, integrity, _ := parseChunked(t, markerPlan(), stream, chunk, CaptureOptions{MaxOutputBytes: 100, Secrets: []Secret{secret}})
		if integrity != "" {
			t.Fatalf("integrity %q", integrity)
		}
		inst := rs[0].Output
		redacted := strings.ReplaceAll(out, secret.Value, "[REDACTED:GITHUB_TOKEN]")
		want := Output{
			Head: redacted[:50], Tail: redacted[len(redacted)-50:],
			Bytes: int64(len(redacted)), SHA256: sha256Hex([]byte(redacted)), Truncated: true, Redactions: 2,
		}
		if diff := cmp.Diff(want, inst); diff != "" {
			t.Errorf("chunk %d: install output mismatch (-want +got):\n%s", chunk, diff)
		}
		if rs[1].Output.Head != "[REDACTED:GITHUB_TOKEN]" || rs[1].Output.Redactions != 1 {
			t.Errorf("chunk %d: test output %+v", chunk, rs[1].Output)
		}
		for _, r := range rs {
			if strings.Contains(r.Output.Head+r.Output.Tail, secret.Value) {
				t.Errorf("chunk %d: step %s output holds the secret", chunk, r.Name)
			}
		}
	}
}

func TestMarkerParserResultFields(t *testing.T) {
	clock := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time {
		clock = clock.Add(1500 * time.Millisecond)
		return clock
	}
	rs, _, _ := parseChunked(t, markerPlan(), happyStream(), 0, CaptureOptions{Now: now})
	r := rs[1]
	if r.Name != StepTest || !cmp.Equal(r.Argv, []string{"npm", "run", "test"}) || r.TimeoutMs != 300000 ||
		r.Network != NetworkNone || !r.Reported || r.Duration != 1500*time.Millisecond || r.DurationMs != 1500 {
		t.Errorf("test result: %+v", r)
	}
	if rs[2].Reason != "the script can only succeed" || !rs[2].Reported {
		t.Errorf("typecheck result: %+v", rs[2])
	}
}

func TestMarkerParserFinish(t *testing.T) {
	p := NewMarkerParser(markerPlan(), testNonce, CaptureOptions{})
	if _, err := p.Write([]byte(happyStream())); err != nil {
		t.Fatal(err)
	}
	a, ia := p.Finish()
	b, ib := p.Finish()
	if diff := cmp.Diff(a, b); diff != "" || ia != ib {
		t.Errorf("second Finish differs:\n%s", diff)
	}
	if _, err := p.Write([]byte("more")); !errors.Is(err, ErrParserFinished) {
		t.Errorf("Write after Finish: err = %v, want ErrParserFinished", err)
	}
}

func TestMarkerParserIssueCap(t *testing.T) {
	stream := startLine(StepInstall) + endLine(StepInstall, "0") + strings.Repeat(endLine(StepInstall, "0"), MaxIntegrityIssues+5)
	_, integrity, _ := parseChunked(t, markerPlan(), stream, 0, CaptureOptions{})
	if n := strings.Count(integrity, "duplicate END"); n != MaxIntegrityIssues || !strings.HasSuffix(integrity, "; and 5 more") {
		t.Errorf("integrity lists %d issues: %q", n, integrity)
	}
}

// TestMarkerParserSteadyStateAllocs shows memory does not grow with the
// stream: inside a step, a write allocates nothing.
func TestMarkerParserSteadyStateAllocs(t *testing.T) {
	for _, secrets := range [][]Secret{nil, {{Name: "S", Value: "not-in-this-output"}}} {
		p := NewMarkerParser(markerPlan(), testNonce, CaptureOptions{Secrets: secrets})
		chunk := bytes.Repeat([]byte(" ✓ src/components/button.test.ts > renders (3 ms)\n"), 600)
		if _, err := p.Write([]byte(startLine(StepInstall))); err != nil {
			t.Fatal(err)
		}
		for range 100 { // fill the head and the tail ring first
			if _, err := p.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := p.Write(chunk); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("secrets %d: a write allocates %v times, want 0", len(secrets), allocs)
		}
	}
}
