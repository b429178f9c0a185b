package validation

import (
	"strings"
	"unicode/utf8"
)

// FindingBodyBytes is the most output a finding's body quotes: the end of
// the step's (already redacted) output, where runners print their failures.
const FindingBodyBytes = 4096

// Findings returns one finding per step that failed, timed out or was
// killed: high severity for install, test, typecheck and build, medium for
// lint and any other step. Each claims an execution and has no path; its
// body is the redacted tail of the step's output.
func Findings(steps []StepResult) []Finding {
	out := []Finding{}
	for _, s := range steps {
		switch s.Status {
		case StatusFailed, StatusTimedOut, StatusKilled:
		default:
			continue
		}
		out = append(out, Finding{
			Severity:       stepSeverity(s.Name),
			Step:           s.Name,
			Title:          "`" + displayCommand(s) + "` " + stepEnding(s),
			Body:           findingBody(s.Output),
			ExecutionClaim: true,
		})
	}
	return out
}

func stepSeverity(name string) Severity {
	switch name {
	case StepInstall, StepTest, StepTypecheck, StepBuild:
		return SeverityHigh
	default:
		return SeverityMedium
	}
}

// displayCommand writes the step's argv as a one-line command that can sit
// inside a markdown code span: arguments that need it are shell-quoted,
// backticks and control characters are replaced.
func displayCommand(s StepResult) string {
	if len(s.Argv) == 0 {
		return s.Name
	}
	words := make([]string, len(s.Argv))
	for i, a := range s.Argv {
		if a == "" || strings.IndexFunc(a, needsShellQuote) >= 0 {
			a = shellWord(a)
		}
		words[i] = a
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '`':
			return '\''
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '?'
		}
		return r
	}, strings.Join(words, " "))
}

func needsShellQuote(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	case strings.ContainsRune("@%+=:,./_-", r):
		return false
	}
	return true
}

// findingBody is the last FindingBodyBytes of the output, starting on a
// rune boundary and, when the cut leaves one close by, on a new line.
func findingBody(o Output) string {
	text := o.Head
	if o.Truncated {
		text = o.Tail
	}
	if len(text) <= FindingBodyBytes {
		return text
	}
	text = text[len(text)-FindingBodyBytes:]
	for k := 0; k < utf8.UTFMax-1 && len(text) > 0 && !utf8.RuneStart(text[0]); k++ {
		text = text[1:]
	}
	if nl := strings.IndexByte(text, '\n'); nl >= 0 && nl < len(text)/4 {
		text = text[nl+1:]
	}
	return text
}
