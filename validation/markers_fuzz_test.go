package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzSecret() is planted by some seeds; no output may ever hold it.
func fuzzSecret() Secret { return Secret{Name: "FUZZ_TOKEN", Value: "fuzz-s3cret-Value"} }

// fuzzMaxOutput keeps captures small so truncation is exercised.
const fuzzMaxOutput = 64

func FuzzMarkerParser(f *testing.F) {
	seeds := []string{
		happyStream(),
		"",
		"\n",
		markerCommon,
		strings.ReplaceAll(happyStream(), "\n", "\r\n"),
		startLine(StepInstall) + endLine(StepInstall, "1") + startLine(StepTest) + endLine(StepTest, "0"),
		startLine(StepTest) + startLine(StepInstall) + endLine(StepLint, "0") + endLine(StepTest, "256"),
		startLine(StepInstall) + "x" + fuzzSecret().Value + "y\n" + strings.Repeat("z", 200) + endLine(StepInstall, "0"),
		startLine(StepInstall) + markerCommon + strings.Repeat("q", MaxMarkerLineBytes) + "\n" + endLine(StepInstall, "0"),
		MarkerEnd + MarkerTag(testNonce, StepInstall) + ":-1\n" + MarkerStart + MarkerTag(testNonce, "evil") + "\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i*7+1))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		plan := markerPlan()
		opts := CaptureOptions{MaxOutputBytes: fuzzMaxOutput, Secrets: []Secret{fuzzSecret()}}

		one := NewMarkerParser(plan, testNonce, opts)
		if _, err := one.Write(data); err != nil {
			t.Fatal(err)
		}
		want, wantInteg := one.Finish()

		p := NewMarkerParser(plan, testNonce, opts)
		size := int(chunk%64) + 1
		for rest := data; len(rest) > 0; {
			k := min(size, len(rest))
			if _, err := p.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
			size = size*5%67 + 1 // vary the write sizes
			checkParserBounds(t, p, opts)
		}
		got, integ := p.Finish()

		if len(got) != len(plan.Steps) {
			t.Fatalf("%d results for %d steps", len(got), len(plan.Steps))
		}
		if diff := cmp.Diff(want, got); diff != "" || integ != wantInteg {
			t.Fatalf("results depend on write sizes (-one +chunked):\n%s\nintegrity %q vs %q", diff, wantInteg, integ)
		}
		// Every byte is accounted for: step output as read, output outside
		// the steps, and marker lines (with the shell's newline before END).
		var raw int64
		for i := range p.steps {
			raw += p.steps[i].raw
		}
		if total := raw + p.unattrib + p.markers; total != int64(len(data)) {
			t.Fatalf("accounted %d bytes (steps %d, unattributed %d, markers %d) of %d", total, raw, p.unattrib, p.markers, len(data))
		}
		for i, r := range got {
			ps := plan.Steps[i]
			if r.Name != ps.Name || !r.Reported {
				t.Fatalf("result %d is %q (reported %v), want %q", i, r.Name, r.Reported, ps.Name)
			}
			switch r.Status {
			case StatusPassed:
				if r.ExitCode == nil || *r.ExitCode != 0 {
					t.Fatalf("%s passed with exit %v", r.Name, r.ExitCode)
				}
			case StatusFailed:
				if r.ExitCode != nil && (*r.ExitCode < 1 || *r.ExitCode > 255) {
					t.Fatalf("%s failed with exit %d", r.Name, *r.ExitCode)
				}
				if r.ExitCode == nil && integ == "" {
					t.Fatalf("%s failed without an END and integrity is empty", r.Name)
				}
			case StatusNotRun:
			case StatusInconclusive:
				if ps.Inconclusive == "" {
					t.Fatalf("%s inconclusive but runnable", r.Name)
				}
			default:
				t.Fatalf("%s has status %q", r.Name, r.Status)
			}
			if len(r.Output.Head)+len(r.Output.Tail) > fuzzMaxOutput {
				t.Fatalf("%s kept %d bytes", r.Name, len(r.Output.Head)+len(r.Output.Tail))
			}
			if strings.Contains(r.Output.Head, fuzzSecret().Value) || strings.Contains(r.Output.Tail, fuzzSecret().Value) {
				t.Fatalf("%s output holds the secret", r.Name)
			}
		}
	})
}

// checkParserBounds fails when any buffer of p outgrew its limit.
func checkParserBounds(t *testing.T, p *MarkerParser, opts CaptureOptions) {
	t.Helper()
	if len(p.scan.cand) > MaxMarkerLineBytes || cap(p.scan.cand) != MaxMarkerLineBytes {
		t.Fatalf("line buffer %d/%d", len(p.scan.cand), cap(p.scan.cand))
	}
	if len(p.issues) > MaxIntegrityIssues {
		t.Fatalf("%d integrity issues kept", len(p.issues))
	}
	for i := range p.steps {
		s := &p.steps[i]
		if s.capture == nil {
			continue
		}
		if cap(s.capture.head)+len(s.capture.ring) > opts.MaxOutputBytes {
			t.Fatalf("capture holds %d+%d bytes", cap(s.capture.head), len(s.capture.ring))
		}
		// The Redactor holds back less than its longest form.
		if s.red.m != nil && len(s.red.buf) >= s.red.m.maxLen {
			t.Fatalf("redactor holds %d bytes", len(s.red.buf))
		}
	}
}
