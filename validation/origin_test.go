package validation

import (
	"testing"
)

func fail(name, key string) StepFailure { return StepFailure{Name: name, Key: key} }

func TestAttribute(t *testing.T) {
	one := 1
	failedStep := func(name string, fs ...StepFailure) StepResult {
		return StepResult{Name: name, Status: StatusFailed, ExitCode: &one, Failures: fs}
	}
	passed := func(name string) BaseStep { return BaseStep{Name: name, Status: StatusPassed} }
	baseFailed := func(name string, fs ...StepFailure) BaseStep {
		return BaseStep{Name: name, Status: StatusFailed, Failures: fs}
	}
	type want struct {
		step     Origin
		failures []Origin
	}
	tests := []struct {
		name  string
		steps []StepResult
		in    OriginInput
		want  map[string]want
	}{
		{
			name:  "passed on the base: introduced",
			steps: []StepResult{{Name: StepInstall, Status: StatusPassed}, failedStep(StepTest, fail("a", "a"))},
			in:    OriginInput{Base: []BaseStep{passed(StepInstall), passed(StepTest)}},
			want:  map[string]want{StepTest: {OriginIntroduced, []Origin{OriginIntroduced}}, StepInstall: {}},
		},
		{
			name:  "one old and one new failing test: the step is introduced, the old test preexisting",
			steps: []StepResult{failedStep(StepTest, fail("old", "old"), fail("new", "new"))},
			in:    OriginInput{Base: []BaseStep{passed(StepInstall), baseFailed(StepTest, fail("old", "old"))}},
			want:  map[string]want{StepTest: {OriginIntroduced, []Origin{OriginPreexisting, OriginIntroduced}}},
		},
		{
			name:  "only the base's failures: preexisting",
			steps: []StepResult{failedStep(StepTest, fail("old", "old")), failedStep(StepLint)},
			in:    OriginInput{Base: []BaseStep{passed(StepInstall), baseFailed(StepTest, fail("old", "old"), fail("other", "other")), baseFailed(StepLint)}},
			want:  map[string]want{StepTest: {OriginPreexisting, []Origin{OriginPreexisting}}, StepLint: {OriginPreexisting, nil}},
		},
		{
			name:  "passed on the retry: flaky, whatever the base says",
			steps: []StepResult{failedStep(StepTest, fail("a", "a"))},
			in:    OriginInput{Retried: map[string]Status{StepTest: StatusPassed}, Base: []BaseStep{passed(StepTest)}},
			want:  map[string]want{StepTest: {OriginFlaky, []Origin{OriginFlaky}}},
		},
		{
			name:  "failed on the retry: compared with the base",
			steps: []StepResult{failedStep(StepTest, fail("a", "a"))},
			in:    OriginInput{Retried: map[string]Status{StepTest: StatusFailed}, Base: []BaseStep{passed(StepInstall), baseFailed(StepTest, fail("a", "a"))}},
			want:  map[string]want{StepTest: {OriginPreexisting, []Origin{OriginPreexisting}}},
		},
		{
			name:  "no base: unknown",
			steps: []StepResult{failedStep(StepTest, fail("a", "a"))},
			in:    OriginInput{BaseReason: "comparison off"},
			want:  map[string]want{StepTest: {OriginUnknown, []Origin{OriginUnknown}}},
		},
		{
			name:  "the step does not exist on the base: unknown",
			steps: []StepResult{failedStep(StepLint, fail("a", "a"))},
			in:    OriginInput{Base: []BaseStep{passed(StepInstall), passed(StepTest)}},
			want:  map[string]want{StepLint: {OriginUnknown, []Origin{OriginUnknown}}},
		},
		{
			name:  "the base's install failed: unknown",
			steps: []StepResult{failedStep(StepTest, fail("a", "a"))},
			in:    OriginInput{Base: []BaseStep{baseFailed(StepInstall), {Name: StepTest, Status: StatusNotRun}}},
			want:  map[string]want{StepTest: {OriginUnknown, []Origin{OriginUnknown}}},
		},
		{
			name:  "install failing on both is preexisting",
			steps: []StepResult{failedStep(StepInstall), {Name: StepTest, Status: StatusNotRun}},
			in:    OriginInput{Base: []BaseStep{baseFailed(StepInstall)}},
			want:  map[string]want{StepInstall: {OriginPreexisting, nil}, StepTest: {}},
		},
		{
			name:  "timed out on the base counts as failing there",
			steps: []StepResult{{Name: StepTest, Status: StatusTimedOut}},
			in:    OriginInput{Base: []BaseStep{passed(StepInstall), {Name: StepTest, Status: StatusTimedOut}}},
			want:  map[string]want{StepTest: {OriginPreexisting, nil}},
		},
		{
			name:  "inconclusive on the base: unknown",
			steps: []StepResult{failedStep(StepTest)},
			in:    OriginInput{Base: []BaseStep{passed(StepInstall), {Name: StepTest, Status: StatusInconclusive}}},
			want:  map[string]want{StepTest: {OriginUnknown, nil}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Attribute(tt.steps, tt.in)
			for _, s := range tt.steps {
				w, ok := tt.want[s.Name]
				if !ok {
					t.Fatalf("no expectation for step %s", s.Name)
				}
				if s.Origin != w.step {
					t.Errorf("step %s origin %q, want %q", s.Name, s.Origin, w.step)
				}
				if len(s.Failures) != len(w.failures) {
					t.Fatalf("step %s has %d failures, want %d", s.Name, len(s.Failures), len(w.failures))
				}
				for i, f := range s.Failures {
					if f.Origin != w.failures[i] {
						t.Errorf("step %s failure %q origin %q, want %q", s.Name, f.Name, f.Origin, w.failures[i])
					}
				}
			}
		})
	}
}

func TestInherited(t *testing.T) {
	rec := func(origins ...Origin) Record {
		r := Record{Outcome: OutcomeFailed}
		for _, o := range origins {
			r.Steps = append(r.Steps, StepResult{Name: string(o), Status: StatusFailed, Origin: o,
				Failures: []StepFailure{{Name: "x", Origin: o}}})
		}
		return r
	}
	tests := []struct {
		name             string
		rec              Record
		preexistingFails bool
		want             bool
	}{
		{"preexisting and flaky", rec(OriginPreexisting, OriginFlaky), false, true},
		{"an introduced step", rec(OriginPreexisting, OriginIntroduced), false, false},
		{"an unknown step", rec(OriginFlaky, OriginUnknown), false, false},
		{"never compared", rec(""), false, false},
		{"preexisting kept failing by the repository", rec(OriginPreexisting), true, false},
		{"flaky with preexisting: failure", rec(OriginFlaky), true, true},
		{"a passed run", Record{Outcome: OutcomePassed}, false, false},
		{"an introduced failure in a preexisting step", Record{Outcome: OutcomeFailed, Steps: []StepResult{{Status: StatusFailed, Origin: OriginPreexisting,
			Failures: []StepFailure{{Origin: OriginIntroduced}}}}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Inherited(tt.rec, tt.preexistingFails); got != tt.want {
				t.Errorf("Inherited = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFailureKey(t *testing.T) {
	if a, b := FailureKey("tsc", "TS2322: Type 'string' is not assignable", "src/a.ts", 3), FailureKey("tsc", "TS2322: other words", "src/a.ts", 3); a != b {
		t.Errorf("tsc keys differ by message: %q %q", a, b)
	}
	if a, b := FailureKey("tsc", "TS2322: x", "src/a.ts", 3), FailureKey("tsc", "TS2322: x", "src/a.ts", 4); a == b {
		t.Error("tsc keys equal across lines")
	}
	if a, b := FailureKey("jest", "adds", "a.js", 3), FailureKey("vitest", "adds", "b.js", 9); a != b {
		t.Errorf("test keys differ by location: %q %q", a, b)
	}
}
