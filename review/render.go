package review

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/validation"
)

// GitHubBodyLimit is the most characters GitHub accepts in a review or
// comment body; over it the API answers 422 and the job would retry
// forever.
const GitHubBodyLimit = 65536

// MaxBodyChars is the most a rendered body may hold, with room to spare
// under GitHubBodyLimit. It is counted in bytes, which is never fewer than
// the characters GitHub counts.
const MaxBodyChars = 60000

// Per-block limits, before the whole body is fitted to MaxBodyChars.
const (
	// DefaultFindingBodyChars is the most of one finding's body shown.
	DefaultFindingBodyChars = 20000
	// DefaultStepOutputChars is the most of one passing step's output
	// shown, folded, in the record.
	DefaultStepOutputChars = 3000
	// DefaultFailedStepOutputChars is the most of the whole output of a
	// step that did not pass shown, folded, after its finding's excerpt.
	DefaultFailedStepOutputChars = 20000
	// minFindingBodyChars is where cutting finding bodies stops and
	// cutting step output starts.
	minFindingBodyChars = 600
	// minStepOutputChars is the smallest output block worth showing.
	minStepOutputChars = 200
)

// EvidenceLine is one persisted artifact to list in the review. A URL is
// shown as a link; a storage key is shown as a key, never as a link (it is
// not a public URL).
type EvidenceLine struct {
	Kind string // test-output, log, …
	Name string
	URL  string
	Key  string
	// Note says what went wrong when the artifact was not persisted
	// ("upload failed: …"); such a line has neither URL nor Key.
	Note string
}

// CostLine is one lane's cost estimate. A nil USD means no estimate (no
// rate card, or missing inputs) and is shown as such, never as $0.00.
type CostLine struct {
	Lane     string // primary, shadow, semantic
	Executor string
	USD      *float64
	Note     string
}

// RenderOptions are what the review shows besides the record.
type RenderOptions struct {
	// JobID, when set, adds the hidden marker <!-- gilf:job=<id> --> that
	// lets a retry find what it already posted.
	JobID string
	// Evidence lists persisted artifacts by step name; "" holds those of
	// the whole run.
	Evidence map[string][]EvidenceLine
	// Costs are the estimates per lane.
	Costs []CostLine
	// Notes are extra lines from later stages (shadow lane, hooks).
	Notes []string
	// MaxChars overrides MaxBodyChars when positive and smaller.
	MaxChars int
	// Internals are the worker's own paths (its data and work
	// directories), withheld from what is posted (publicRecord).
	Internals []string
	// Semantic is the semantic review's section, nil when no reviewer
	// is configured.
	Semantic *SemanticSection
	// Operator renders for the operator (gilf validate), not for a pull
	// request: the worker's settings, paths and secret names are shown,
	// and an operator error says what to change.
	Operator bool
}

// limits are the per-block sizes of one rendering attempt, with the
// untrusted blocks sanitized once for every attempt.
type limits struct {
	finding int
	output  int
	failed  int      // output of a step that did not pass
	bodies  []string // sanitized finding bodies, by index
	outputs []string // sanitized step output, by index
}

// Render is the review body as a person reads it: a one-line verdict, the
// reason when nothing was proven, findings, the validation record, notes,
// evidence and cost estimates. It never exceeds MaxBodyChars: finding
// bodies are cut first, then step output, each with a line saying so.
func Render(rec validation.Record, opts RenderOptions) string {
	maxChars := MaxBodyChars
	if opts.MaxChars > 0 && opts.MaxChars < maxChars {
		maxChars = opts.MaxChars
	}
	if !opts.Operator {
		rec = publicRecord(rec, opts.Internals)
	}
	lim := limits{finding: DefaultFindingBodyChars, output: DefaultStepOutputChars, failed: DefaultFailedStepOutputChars}
	for _, f := range rec.Findings {
		lim.bodies = append(lim.bodies, sanitizeOutput(f.Body))
	}
	for _, st := range rec.Steps {
		lim.outputs = append(lim.outputs, sanitizeOutput(outputText(st.Output)))
	}
	for {
		body := render(rec, opts, lim)
		if len(body) <= maxChars {
			return body
		}
		switch {
		case lim.finding > minFindingBodyChars:
			lim.finding = max(minFindingBodyChars, lim.finding/2)
		case lim.failed > 0:
			lim.failed /= 2
			if lim.failed < minStepOutputChars {
				lim.failed = 0
			}
		case lim.output > 0:
			lim.output /= 2
			if lim.output < minStepOutputChars {
				lim.output = 0
			}
		default:
			return hardCut(body, maxChars)
		}
	}
}

func render(rec validation.Record, opts RenderOptions, lim limits) string {
	var b strings.Builder
	if id := safeMarker(opts.JobID); id != "" {
		fmt.Fprintf(&b, "<!-- gilf:job=%s -->\n", id)
	}
	b.WriteString("## " + Verdict(rec) + "\n\n")
	writeSummary(&b, rec, opts.Operator)
	if rec.Base != nil { // failure origin: the findings by whose they are (render_origin.go)
		writeOrigin(&b, rec, opts.Operator)
		writeOriginFindings(&b, rec, opts, lim)
	} else {
		writeFindings(&b, rec, opts, lim)
	}
	writeSemantic(&b, opts.Semantic)
	writeRecord(&b, rec, opts, lim)
	writeCosts(&b, opts.Costs)
	b.WriteString("<sub>Output from the pull request is shown redacted, inside code blocks; mentions and references in it are neutralised.</sub>\n")
	return b.String()
}

// Verdict is the one-line verdict, plain text without markdown, as the
// review's heading and a check run's title: "gilf validation: ❌ failed".
func Verdict(rec validation.Record) string {
	return "gilf validation: " + verdict(rec)
}

// verdict is the outcome in plain words. Only a passed outcome says
// "passed"; gap, skipped, refused and inconclusive say "not validated"
// or "inconclusive".
func verdict(rec validation.Record) string {
	switch rec.Outcome {
	case validation.OutcomePassed:
		return "✅ passed"
	case validation.OutcomeFailed:
		return failedVerdict(rec)
	case validation.OutcomeGap:
		return "⚠️ not validated — nothing to run"
	case validation.OutcomeSkipped:
		return "⏭️ not validated — skipped"
	case validation.OutcomeRefused:
		return "🛑 not validated — refused"
	case validation.OutcomeInconclusive:
		return "❔ inconclusive — nothing was proven"
	case validation.OutcomeError:
		if rec.Refusal != nil {
			return "⚠️ not validated — gilf is not set up here"
		}
		return "⚠️ not validated — infrastructure error"
	}
	return "❔ not validated — unknown outcome " + safeMarker(string(rec.Outcome))
}

// gapWords says each gap reason in plain words.
func gapWords(r validation.GapReason) string {
	switch r {
	case validation.GapNoManifest:
		return "the repository has no package.json at its root"
	case validation.GapManifestUnreadable:
		return "package.json could not be read"
	case validation.GapManifestSymlink:
		return "package.json is a symbolic link, which gilf does not follow"
	case validation.GapManifestTooLarge:
		return "package.json is larger than gilf reads"
	case validation.GapManifestUnparseable:
		return "package.json is not valid JSON"
	case validation.GapScriptsInvalid:
		return "the scripts field of package.json is not an object of strings"
	case validation.GapNoScripts:
		return "package.json has none of the scripts gilf runs (test, typecheck, lint, build)"
	}
	return "there is nothing to run"
}

func writeSummary(b *strings.Builder, rec validation.Record, operator bool) {
	switch rec.Outcome {
	case validation.OutcomePassed, validation.OutcomeFailed:
		b.WriteString(stepSummary(rec.Steps) + "\n\n")
		// A failed run's reason names the first failed step, which the
		// summary line above already names with the rest.
		if rec.Reason != "" && rec.Outcome != validation.OutcomeFailed {
			b.WriteString(prose(rec.Reason) + "\n\n")
		}
		return
	case validation.OutcomeGap:
		why := "nothing to run"
		if rec.Gap != nil {
			why = gapWords(rec.Gap.Reason) + " (" + code(string(rec.Gap.Reason)) + ")"
			if rec.Gap.Msg != "" {
				why += ": " + prose(rec.Gap.Msg)
			}
		} else if rec.Reason != "" {
			why = prose(rec.Reason)
		}
		b.WriteString("**Why:** " + why + "\n\n")
	case validation.OutcomeRefused:
		why := prose(rec.Reason)
		if rec.Refusal != nil {
			why = prose(rec.Refusal.Msg) + " (" + code(string(rec.Refusal.Code)) + ")"
		}
		b.WriteString("**Why:** " + why + "\n\n")
	case validation.OutcomeError:
		if rec.Refusal != nil && operator {
			b.WriteString("**Why:** this worker is not set up to validate: " + prose(rec.Refusal.Msg) + " (" + code(string(rec.Refusal.Code)) + ").\n\n")
			return
		}
		if rec.Refusal != nil {
			// The operator's misconfiguration: the detail (which setting)
			// is in the worker's log, never on the pull request.
			b.WriteString("**Why:** gilf is not set up to validate pull requests here (" + code(string(rec.Refusal.Code)) + "). " +
				"The operator of this gilf installation must act; this says nothing about the pull request, and nothing of it was run.\n\n")
			return
		}
		if rec.Reason != "" {
			b.WriteString("**Why:** " + prose(rec.Reason) + "\n\n")
		}
	default:
		if rec.Reason != "" {
			b.WriteString("**Why:** " + prose(rec.Reason) + "\n\n")
		}
	}
	switch rec.Outcome {
	case validation.OutcomeInconclusive:
		if anyRan(rec.Steps) {
			b.WriteString("Steps ran, but their results prove nothing or cannot be trusted. This is not a pass.\n\n")
		} else {
			b.WriteString("No step ran as proof: every selected script is inconclusive. This is not a pass.\n\n")
		}
	case validation.OutcomeError:
		b.WriteString("gilf's own infrastructure failed; the job is retried. This is not a test result.\n\n")
	default:
		b.WriteString("No script of this pull request was run as proof, so nothing in it was checked. This is not a pass.\n\n")
	}
}

// stepSummary counts what ran: "3 of 4 steps ran; 1 failed: `test` (exit code 1)".
func stepSummary(steps []validation.StepResult) string {
	ran, passed := 0, 0
	var bad []string
	incon, notRun := 0, 0
	for _, s := range steps {
		switch s.Status {
		case validation.StatusPassed:
			ran++
			passed++
		case validation.StatusFailed, validation.StatusTimedOut, validation.StatusKilled:
			ran++
			bad = append(bad, code(s.Name)+" "+statusWords(s))
		case validation.StatusInconclusive:
			incon++
		case validation.StatusNotRun:
			notRun++
		}
	}
	var parts []string
	if len(bad) == 0 {
		parts = append(parts, fmt.Sprintf("%d of %d %s ran and passed", passed, len(steps), plural(len(steps), "step", "steps")))
	} else {
		parts = append(parts, fmt.Sprintf("%d of %d %s ran; %d did not pass: %s", ran, len(steps), plural(len(steps), "step", "steps"), len(bad), strings.Join(bad, ", ")))
	}
	if incon > 0 {
		parts = append(parts, fmt.Sprintf("%d inconclusive (proves nothing, not run)", incon))
	}
	if notRun > 0 {
		parts = append(parts, fmt.Sprintf("%d not run", notRun))
	}
	return strings.Join(parts, "; ") + "."
}

// statusWords is a step's ending in words: "failed (exit code 1)".
func statusWords(s validation.StepResult) string {
	switch s.Status {
	case validation.StatusFailed:
		if s.ExitCode != nil {
			return fmt.Sprintf("failed (exit code %d)", *s.ExitCode)
		}
		return "failed"
	case validation.StatusTimedOut:
		return "timed out"
	case validation.StatusKilled:
		if s.Signal != "" {
			return "killed (" + inline(s.Signal) + ")"
		}
		return "killed"
	}
	return inline(string(s.Status))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func severityMark(s validation.Severity) string {
	switch s {
	case validation.SeverityBlocker:
		return "🛑"
	case validation.SeverityHigh:
		return "🔴"
	case validation.SeverityMedium:
		return "🟠"
	case validation.SeverityLow:
		return "🟡"
	}
	return "⚪"
}

func writeFindings(b *strings.Builder, rec validation.Record, opts RenderOptions, lim limits) {
	if len(rec.Findings) == 0 {
		return
	}
	fmt.Fprintf(b, "### Findings (%d)\n\n", len(rec.Findings))
	for i, f := range rec.Findings {
		writeFinding(b, i+1, i, f, lim, "")
	}
}

// writeFinding writes finding f, the index-th of the record, numbered n;
// before its body, what is given (its failures' origins).
func writeFinding(b *strings.Builder, n, index int, f validation.Finding, lim limits, before string) {
	fmt.Fprintf(b, "#### %d. %s %s: %s\n\n", n, severityMark(f.Severity), inline(string(f.Severity)), prose(f.Title))
	var meta []string
	if f.Step != "" {
		meta = append(meta, "step "+code(f.Step))
	}
	if f.Path != "" {
		meta = append(meta, "path "+code(f.Path))
	}
	if f.EvidenceStatus != "" {
		e := "evidence " + inline(f.EvidenceStatus)
		if f.DowngradedReason != "" {
			e += " — " + inline(f.DowngradedReason)
		}
		meta = append(meta, e)
	}
	if len(meta) > 0 {
		b.WriteString(strings.Join(meta, " · ") + "\n\n")
	}
	b.WriteString(before)
	if f.Body != "" {
		body, cut := cutMiddle(lim.bodies[index], lim.finding)
		b.WriteString(fence(body))
		if cut {
			b.WriteString("\n_This finding's text was truncated to fit the review; the full output is in the evidence._\n")
		}
		b.WriteString("\n")
	}
	for _, ref := range f.Evidence {
		b.WriteString("- " + evidenceRef(ref.Kind, ref.ID, ref.URL, ref.Key, "") + "\n")
	}
	if len(f.Evidence) > 0 {
		b.WriteString("\n")
	}
}

// evidenceRef renders one artifact: a link for an http(s) URL, a storage
// key as a key.
func evidenceRef(kind, name, url, key, note string) string {
	label := inline(kind)
	if name != "" {
		label += " " + code(name)
	}
	switch {
	case safeURL(url):
		return label + ": [download](" + url + ")"
	case key != "":
		return label + ": stored under key " + code(key) + " (a storage key, not a public URL)"
	case note != "":
		return label + ": not stored — " + inline(note)
	}
	return label + ": not stored"
}

// safeURL accepts the URLs gilf's evidence store makes: http(s), with no
// character that could end the markdown link.
func safeURL(u string) bool {
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return false
	}
	return !strings.ContainsFunc(u, func(r rune) bool {
		return r <= ' ' || r > '~' || strings.ContainsRune("()<>[]`\\\"'", r)
	})
}

func writeCosts(b *strings.Builder, lines []CostLine) {
	if len(lines) == 0 {
		return
	}
	basis := "wall-clock time"
	if slices.ContainsFunc(lines, func(c CostLine) bool { return c.Lane == costs.LaneSemantic }) {
		basis = "wall-clock time, the model's token counts"
	}
	b.WriteString("### Cost estimates\n\nEstimates from " + basis + " and published rates, not bills.\n\n")
	b.WriteString("| Lane | Executor | Estimate | Note |\n|---|---|---|---|\n")
	for _, c := range lines {
		note := "—"
		if c.Note != "" {
			note = inline(c.Note)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", inline(c.Lane), code(c.Executor), usd(c.USD), note)
	}
	b.WriteString("\n")
}

// usd shows an estimate; nil is "no estimate", never $0.00.
func usd(v *float64) string {
	switch {
	case v == nil:
		return "no estimate"
	case *v == 0:
		return "≈ $0 (estimate)"
	case *v < 0.0001:
		return "< $0.0001 (estimate)"
	}
	return fmt.Sprintf("≈ $%.4f (estimate)", *v)
}

func duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		m := int(d / time.Minute)
		s := int((d % time.Minute) / time.Second)
		if s == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, s)
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

func size(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	case n < 1024*1024*1024:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1024*1024))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1024*1024*1024))
}

// hardCut is the last resort when even the smallest blocks do not fit
// (thousands of notes): it keeps whole lines up to the limit, closes a
// fence left open and says the rest was cut.
func hardCut(body string, limit int) string {
	const tail = "\n_gilf cut the rest of this review to fit GitHub's size limit._\n"
	var b strings.Builder
	open := ""
	for line := range strings.Lines(body) {
		closing := 0
		if open != "" {
			closing = len(open) + 1
		}
		if b.Len()+len(line)+closing+len(tail) > limit {
			break
		}
		b.WriteString(line)
		t := strings.TrimRight(line, "\n")
		switch {
		case open == "" && strings.HasPrefix(t, "```"):
			open = t[:longestRun(t, '`')]
		case open != "" && t == open:
			open = ""
		}
	}
	if open != "" {
		b.WriteString(open + "\n")
	}
	b.WriteString(tail)
	return b.String()
}

// CheckSummaryFailureChars is the most of the first failure the check
// run's summary quotes; the rest is in its text and the review.
const CheckSummaryFailureChars = 4000

// CheckSummary is the check run's summary: what ran, then the first
// failure from its beginning, and how many annotations point at the
// files (and how many more were left out).
func CheckSummary(rec validation.Record, opts RenderOptions, annotations, omitted int) string {
	rec = publicRecord(rec, opts.Internals)
	var b strings.Builder
	writeSummary(&b, rec, false)
	if rec.Base != nil {
		writeOrigin(&b, rec, false)
	}
	for _, f := range originOrder(rec) {
		if !f.ExecutionClaim {
			continue
		}
		b.WriteString("**First failure:** " + prose(f.Title))
		if f.Path != "" {
			b.WriteString(" — " + code(f.Path))
		}
		b.WriteString("\n\n")
		if f.Body != "" {
			body, cut := headCut(sanitizeOutput(f.Body), CheckSummaryFailureChars)
			b.WriteString(fence(body))
			if cut {
				b.WriteString("\n_The rest is in the details below and in the review._\n")
			}
			b.WriteString("\n")
		}
		break
	}
	if annotations > 0 {
		fmt.Fprintf(&b, "%d %s on the files below.", annotations, plural(annotations, "annotation", "annotations"))
		if omitted > 0 {
			fmt.Fprintf(&b, " %d more were found and not annotated (the limit is %d).", omitted, MaxAnnotations)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// headCut keeps the beginning of s, at most limit bytes, ending on a
// whole line when one ends close to the limit.
func headCut(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	cut := runeStart(s, limit)
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl > cut*3/4 {
		cut = nl
	}
	return s[:cut], true
}
