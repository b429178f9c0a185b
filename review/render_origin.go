package review

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// This file renders failure origin (SPEC §3.4.1): the review's findings
// by whose they are — introduced by the pull request first, then those
// whose origin is unknown, then, folded, those already failing on the
// base and the flaky ones — and each failed step's failures with theirs.

// MaxListedFailures is how many failures of one step the review lists
// with their origins; the rest are counted.
const MaxListedFailures = 20

// originGroup is one heading of the grouped findings.
type originGroup struct {
	origin validation.Origin
	folded bool
}

// originGroups are in the order the review shows them.
var originGroups = []originGroup{
	{validation.OriginIntroduced, false},
	{validation.OriginUnknown, false},
	{validation.OriginPreexisting, true},
	{validation.OriginFlaky, true},
}

// findingOrigin is the origin of a finding's step; a finding of no
// failed step (or never compared) counts as introduced.
func findingOrigin(rec validation.Record, f validation.Finding) validation.Origin {
	for _, s := range rec.Steps {
		if s.Name == f.Step && s.Origin != "" {
			return s.Origin
		}
	}
	return validation.OriginIntroduced
}

// baseName is "`main` (`abc1234`)", or the base's path for gilf
// validate; plain HTML text, for a <summary>, with html.
func baseName(base *validation.BaseRun, operator, html bool) string {
	q := code
	if html {
		q = htmlText
	}
	switch {
	case base.Ref != "" && base.SHA != "":
		return q(base.Ref) + " (" + q(shortSHA(base.SHA)) + ")"
	case base.Ref != "":
		return q(base.Ref)
	case base.SHA != "":
		return q(shortSHA(base.SHA))
	case base.Path != "" && operator:
		return q(base.Path)
	}
	return "the base"
}

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

// originText is what the review calls an origin: a group's heading, and
// the words after one failure of it.
func originText(o validation.Origin, base *validation.BaseRun, operator, html bool) (title, words string) {
	switch o {
	case validation.OriginIntroduced:
		return "Introduced by this pull request", "introduced by this pull request"
	case validation.OriginPreexisting:
		on := baseName(base, operator, html)
		return "Already failing on " + on, "already failing on " + on
	case validation.OriginFlaky:
		return "Flaky: passed when run again", "passed when run again"
	}
	return "Not compared with the base", "origin unknown"
}

// failedVerdict is a failed run's verdict: it says so when no failure is
// the pull request's.
func failedVerdict(rec validation.Record) string {
	if validation.Inherited(rec, false) {
		return "⚠️ failed, but not because of this pull request"
	}
	return "❌ failed"
}

// originCounts counts the failed steps by origin.
func originCounts(rec validation.Record) map[validation.Origin]int {
	n := map[validation.Origin]int{}
	for _, s := range rec.Steps {
		if validation.Failed(s.Status) && s.Origin != "" {
			n[s.Origin]++
		}
	}
	return n
}

// writeOrigin says in one paragraph what the comparison found, and why
// the check is neutral when nothing is the pull request's.
func writeOrigin(b *strings.Builder, rec validation.Record, operator bool) {
	base := rec.Base
	n := originCounts(rec)
	var parts []string
	for _, g := range originGroups {
		if c := n[g.origin]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, originWords(g.origin, c)))
		}
	}
	b.WriteString("**Whose failures:** ")
	if len(parts) > 0 {
		b.WriteString(strings.Join(parts, ", ") + ". ")
	}
	switch {
	case base.Reason != "":
		b.WriteString("The base was not compared: " + prose(base.Reason) + ".")
	case base.Reused:
		b.WriteString("Compared with " + baseName(base, operator, false) + ", whose result gilf had from an earlier run.")
	default:
		b.WriteString("Compared with " + baseName(base, operator, false) + ", validated in this run.")
	}
	b.WriteString("\n\n")
	if validation.Inherited(rec, false) {
		b.WriteString("Every failure was already failing on " + baseName(base, operator, false) +
			" or passed when run again, so this pull request introduced none of them; the check is neutral" +
			" unless the repository sets `validation.preexisting: failure` in `" + ConfigPath + "`.\n\n")
	}
}

func originWords(o validation.Origin, n int) string {
	switch o {
	case validation.OriginIntroduced:
		return plural(n, "step failing because of this pull request", "steps failing because of this pull request")
	case validation.OriginPreexisting:
		return plural(n, "step already failing on the base", "steps already failing on the base")
	case validation.OriginFlaky:
		return plural(n, "flaky step (passed when run again)", "flaky steps (passed when run again)")
	}
	return plural(n, "step of unknown origin", "steps of unknown origin")
}

// originOrder is the record's findings in the order of the groups.
func originOrder(rec validation.Record) []validation.Finding {
	if rec.Base == nil {
		return rec.Findings
	}
	out := make([]validation.Finding, 0, len(rec.Findings))
	for _, g := range originGroups {
		for _, f := range rec.Findings {
			if findingOrigin(rec, f) == g.origin {
				out = append(out, f)
			}
		}
	}
	return out
}

// writeOriginFindings writes the findings by group: open for introduced
// and unknown, folded for preexisting and flaky.
func writeOriginFindings(b *strings.Builder, rec validation.Record, opts RenderOptions, lim limits) {
	n := 0
	for _, g := range originGroups {
		var idx []int
		for i, f := range rec.Findings {
			if findingOrigin(rec, f) == g.origin {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		title, _ := originText(g.origin, rec.Base, opts.Operator, g.folded)
		if g.folded {
			fmt.Fprintf(b, "<details>\n<summary>%s (%d)</summary>\n\n", title, len(idx))
		} else {
			fmt.Fprintf(b, "### %s (%d)\n\n", title, len(idx))
		}
		if g.origin == validation.OriginUnknown && rec.Base.Reason != "" {
			b.WriteString("gilf could not tell whose these failures are: " + prose(rec.Base.Reason) + ".\n\n")
		}
		for _, i := range idx {
			n++
			var failures strings.Builder
			writeStepFailures(&failures, rec, rec.Findings[i].Step, opts.Operator)
			writeFinding(b, n, i, rec.Findings[i], lim, failures.String())
		}
		if g.folded {
			b.WriteString("</details>\n\n")
		}
	}
}

// writeStepFailures lists a step's parsed failures with their origins,
// at most MaxListedFailures of them, unless the step's origin is unknown.
func writeStepFailures(b *strings.Builder, rec validation.Record, step string, operator bool) {
	var st *validation.StepResult
	for i := range rec.Steps {
		if rec.Steps[i].Name == step {
			st = &rec.Steps[i]
		}
	}
	// Unknown says nothing per failure: the step's group says it all.
	if st == nil || len(st.Failures) == 0 || st.Origin == validation.OriginUnknown {
		return
	}
	fmt.Fprintf(b, "Failures of %s (%d):\n\n", code(step), len(st.Failures))
	// The pull request's own first.
	failures := slices.Clone(st.Failures)
	slices.SortStableFunc(failures, func(a, b validation.StepFailure) int {
		return cmp.Compare(blameRank(a.Origin), blameRank(b.Origin))
	})
	for i, f := range failures {
		if i == MaxListedFailures {
			fmt.Fprintf(b, "- … and %d more\n", len(st.Failures)-i)
			break
		}
		line := "- " + originMark(f.Origin) + " " + code(f.Name)
		if f.File != "" && !strings.HasPrefix(f.Name, f.File) {
			loc := f.File
			if f.Line > 0 {
				loc += fmt.Sprintf(":%d", f.Line)
			}
			line += " at " + code(loc)
		}
		_, words := originText(f.Origin, rec.Base, operator, false)
		line += " — " + words
		b.WriteString(line + "\n")
	}
	b.WriteString("\n")
}

func originMark(o validation.Origin) string {
	switch o {
	case validation.OriginIntroduced:
		return "❌"
	case validation.OriginPreexisting:
		return "⏮️"
	case validation.OriginFlaky:
		return "🔁"
	}
	return "❔"
}
