package validation

import (
	"strconv"
	"time"
)

// Origin says whose a failure is (SPEC §3.4.1).
type Origin string

const (
	// OriginIntroduced: it fails on the head and passed on the base.
	OriginIntroduced Origin = "introduced"
	// OriginPreexisting: it fails on the base too.
	OriginPreexisting Origin = "preexisting"
	// OriginFlaky: it passed when the step ran once more at the same head.
	OriginFlaky Origin = "flaky"
	// OriginUnknown: the base could not be validated.
	OriginUnknown Origin = "unknown"
)

// Blames reports whether o is the pull request's to fix, or may be:
// introduced, unknown, or no origin at all (never compared).
func (o Origin) Blames() bool {
	return o != OriginPreexisting && o != OriginFlaky
}

// StepFailure is one failure parsed from a step's output: a test's name,
// or a file, line and code for a type checker or linter. Key is what two
// runs' failures are compared by; it is not shown.
type StepFailure struct {
	Name   string `json:"name"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Origin Origin `json:"origin,omitempty"`
	Key    string `json:"-"`
}

// FailureKey is the key a failure is compared by: a test's name, or
// file:line and the first word of the title (TS2322, no-unused-vars) for
// the tools that name files. Line numbers are kept as SPEC says: a
// failure that moved is a different failure.
func FailureKey(tool, title, file string, line int) string {
	switch tool {
	case "tsc", "eslint":
		code := title
		for i, r := range title {
			if r == ' ' || r == ':' {
				code = title[:i]
				break
			}
		}
		return tool + "\x1f" + file + "\x1f" + strconv.Itoa(line) + "\x1f" + code
	}
	return "test\x1f" + title
}

// BaseRun is what the base was found to do, as the record shows it.
type BaseRun struct {
	// Ref is the base branch, SHA its commit; Path replaces both for
	// gilf validate --base.
	Ref  string `json:"ref,omitempty"`
	SHA  string `json:"sha,omitempty"`
	Path string `json:"path,omitempty"`
	// Outcome is the base run's outcome over install and the steps that
	// failed on the head; "" when it did not run.
	Outcome Outcome `json:"outcome,omitempty"`
	// Reused is true when the result came from the store: an earlier
	// run at the same base sha with the same executor and commands.
	Reused bool `json:"reused"`
	// Reason says why the base could not be compared, "" when it was.
	Reason string        `json:"reason,omitempty"`
	Steps  []BaseStep    `json:"steps"`
	Wall   time.Duration `json:"-"`
}

// BaseStep is one step of the base's run.
type BaseStep struct {
	Name     string `json:"name"`
	Status   Status `json:"status"`
	ExitCode *int   `json:"exitCode"`
	// Reason says why a step did not run on the base (no such script
	// there, the install failed).
	Reason   string        `json:"reason,omitempty"`
	Failures []StepFailure `json:"failures,omitempty"`
}

// OriginInput is what Attribute compares for one record.
type OriginInput struct {
	// Retried are the head's failed steps as they ended when run once
	// more in a fresh sandbox, by name; a step absent was not retried.
	Retried map[string]Status
	// Base is the base's run; nil when it could not be validated, and
	// BaseReason then says why.
	Base       []BaseStep
	BaseReason string
}

// Attribute sets the origin of every failed step of steps and of each of
// its failures (already parsed into steps[i].Failures), and returns what
// the record should say about the comparison. It is pure. In order, for
// a step that failed, timed out or was killed:
//   - it passed on the retry → flaky, and every failure flaky;
//   - the base has no result for it (no base, the step does not exist
//     there, the base's install failed, it did not run) → unknown;
//   - it passed on the base → introduced, every failure introduced;
//   - it failed on the base too: each failure that is among the base's
//     is preexisting, the others introduced; the step is preexisting
//     when none is introduced, else introduced.
func Attribute(steps []StepResult, in OriginInput) {
	base := map[string]BaseStep{}
	baseInstallFailed := false
	for _, b := range in.Base {
		base[b.Name] = b
		if b.Name == StepInstall && b.Status != StatusPassed {
			baseInstallFailed = true
		}
	}
	for i := range steps {
		s := &steps[i]
		if !Failed(s.Status) {
			continue
		}
		if st, ok := in.Retried[s.Name]; ok && st == StatusPassed {
			s.Origin = OriginFlaky
			setOrigins(s.Failures, OriginFlaky)
			continue
		}
		b, ok := base[s.Name]
		switch {
		case in.Base == nil || !ok:
			s.Origin = OriginUnknown
		case b.Status == StatusPassed:
			s.Origin = OriginIntroduced
		case s.Name != StepInstall && baseInstallFailed, !Failed(b.Status):
			s.Origin = OriginUnknown
		default:
			known := map[string]bool{}
			for _, f := range b.Failures {
				known[f.Key] = true
			}
			s.Origin = OriginPreexisting
			for j := range s.Failures {
				f := &s.Failures[j]
				if known[f.Key] {
					f.Origin = OriginPreexisting
				} else {
					f.Origin, s.Origin = OriginIntroduced, OriginIntroduced
				}
			}
			continue
		}
		setOrigins(s.Failures, s.Origin)
	}
}

func setOrigins(fs []StepFailure, o Origin) {
	for i := range fs {
		fs[i].Origin = o
	}
}

// Failed reports whether a step status is a failure: failed, timed out or
// killed.
func Failed(s Status) bool {
	return s == StatusFailed || s == StatusTimedOut || s == StatusKilled
}

// Inherited reports whether every failure of a failed record is someone
// else's: each failed step and each of its failures is preexisting or
// flaky, and at least one step failed. preexistingFails (the repository's
// validation.preexisting: failure) counts preexisting failures as the
// pull request's.
func Inherited(rec Record, preexistingFails bool) bool {
	if rec.Outcome != OutcomeFailed {
		return false
	}
	failed := false
	for _, s := range rec.Steps {
		if !Failed(s.Status) {
			continue
		}
		failed = true
		if s.Origin.Blames() || preexistingFails && s.Origin == OriginPreexisting {
			return false
		}
		for _, f := range s.Failures {
			if f.Origin.Blames() || preexistingFails && f.Origin == OriginPreexisting {
				return false
			}
		}
	}
	return failed
}
