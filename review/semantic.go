package review

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// This file is the semantic (model) review of SPEC §3.4 and issue 15: what
// a Reviewer is given and returns, which of its findings may be inline
// comments, and the skip rule of GILF_SKIP_CODEX_ON_VALIDATION_FAILURE.
// Nothing here calls a model; review/semantic is the one real Reviewer.

// Reviewer reviews a pull request's diff with a model. The default is none
// (a nil Reviewer): the review posts validation alone.
//
// Review must return when ctx is done. Everything in SemanticInput but the
// memory text is the pull request author's (untrusted, possibly a prompt
// injection), and everything in SemanticOutput is the model's: the caller
// renders it with SanitizeModelFinding and never lets it change the
// validation outcome or the check conclusion. An error means no findings
// (the call failed or the answer could not be read): the caller records it
// and posts the validation review anyway. Review may be called
// concurrently.
type Reviewer interface {
	Review(ctx context.Context, in SemanticInput) (SemanticOutput, error)
}

// SemanticInput is what a Reviewer is given.
type SemanticInput struct {
	Title, Body string // the pull request's
	Diff        Diff
	// Record is the validation record of this head; Findings are the
	// validation findings as the hooks left them.
	Record   validation.Record
	Findings []validation.Finding
	// Memory is the repository's prepared review-memory text (the
	// base-branch file review.memory names); empty by default.
	Memory string
	// Earlier are the findings gilf posted on earlier heads whose threads
	// are open (path, line, title): context, so the model reports one
	// again with the same title only if it still applies.
	Earlier []SemanticFinding
	// Since, when set, is the head the model last reviewed: Diff is then
	// the changes since that head, not the whole pull request.
	Since string
}

// Diff is the pull request's change as the files API returns it.
type Diff struct {
	Files []DiffFile
	// Omitted says in plain words what the caller already left out (files
	// past the API's listing limit, patches GitHub did not send); the
	// reviewer adds what it cuts to fit its own budget.
	Omitted string
}

// DiffFile is one entry of GET /repos/{o}/{r}/pulls/{n}/files.
type DiffFile struct {
	Path     string // filename
	Previous string // previous_filename, for renames
	Status   string // added, removed, modified, renamed, copied, changed, unchanged
	// Patch is the unified-diff hunks without file headers; empty for a
	// binary file or one too large for GitHub to diff.
	Patch string
}

// SemanticFinding is one finding of the model. Line is a line of the new
// (right) side of Path; 0 when the finding names no line.
type SemanticFinding struct {
	Severity validation.Severity `json:"severity"`
	Path     string              `json:"path"`
	Line     int                 `json:"line"`
	Title    string              `json:"title"`
	Body     string              `json:"body"`
}

// TokenUsage is what the model's answer says it cost, for an
// estimate:tokens cost span. Zero counts mean the endpoint reported none.
type TokenUsage struct {
	Model            string `json:"model"`
	PromptTokens     int    `json:"promptTokens"`
	CompletionTokens int    `json:"completionTokens"`
	TotalTokens      int    `json:"totalTokens"`
}

// SemanticOutput is what a Reviewer returns.
type SemanticOutput struct {
	Findings []SemanticFinding
	Usage    TokenUsage
	// Notes are plain-words observations for the record: what of the
	// diff was cut to fit, findings dropped over a cap.
	Notes []string
}

// ModelSeverity maps a severity the model wrote to gilf's; ok is false
// for anything else (the caller decides what an unknown one becomes).
func ModelSeverity(s string) (validation.Severity, bool) {
	switch sev := validation.Severity(strings.ToLower(strings.TrimSpace(s))); sev {
	case validation.SeverityBlocker, validation.SeverityHigh, validation.SeverityMedium, validation.SeverityLow:
		return sev, true
	}
	return "", false
}

// InlineComments splits the model's findings: those whose line is on the
// right side of the diff of their file (an added or context line of one of
// its hunks) can be inline review comments (side RIGHT); every other one,
// including those with no line, a path outside the diff or a line GitHub
// would reject, is a body finding. Order is kept in both.
func InlineComments(findings []SemanticFinding, diff Diff) (inline, body []SemanticFinding) {
	lines := make(map[string]map[int]bool, len(diff.Files))
	for _, f := range diff.Files {
		lines[f.Path] = RightLines(f.Patch)
	}
	for _, f := range findings {
		if f.Line > 0 && lines[f.Path][f.Line] {
			inline = append(inline, f)
		} else {
			body = append(body, f)
		}
	}
	return inline, body
}

// RightLines parses a file's patch in the files API's format (hunks, each
// starting "@@ -a,b +c,d @@", no file headers) and returns the line numbers
// of the new side it shows: added and context lines. Deleted lines, "\ No
// newline at end of file" and text past a hunk's counts are not lines of
// the new side. A malformed hunk header ends the parse: what came before
// it stands.
func RightLines(patch string) map[int]bool {
	out := map[int]bool{}
	for n := range RightLineText(patch) {
		out[n] = true
	}
	return out
}

// RightLineText is RightLines with each line's text (without its diff
// prefix): the code a finding on that line points at.
func RightLineText(patch string) map[int]string {
	out := map[int]string{}
	var newLine, oldLeft, newLeft int
	for ln := range strings.Lines(patch) {
		ln = strings.TrimSuffix(ln, "\n")
		if strings.HasPrefix(ln, "@@ ") {
			start, oldN, newN, ok := parseHunkHeader(ln)
			if !ok {
				return out
			}
			newLine, oldLeft, newLeft = start, oldN, newN
			continue
		}
		if oldLeft <= 0 && newLeft <= 0 {
			continue // outside a hunk
		}
		switch {
		case strings.HasPrefix(ln, "+"):
			if newLeft > 0 {
				out[newLine] = strings.TrimSuffix(ln[1:], "\r")
				newLine++
				newLeft--
			}
		case strings.HasPrefix(ln, "-"):
			oldLeft--
		case strings.HasPrefix(ln, `\`):
			// "\ No newline at end of file": not a line.
		default: // context; an empty line is a context line whose space was lost
			if newLeft > 0 {
				out[newLine] = strings.TrimSuffix(strings.TrimPrefix(ln, " "), "\r")
				newLine++
				newLeft--
			}
			oldLeft--
		}
	}
	return out
}

// parseHunkHeader reads "@@ -a[,b] +c[,d] @@ ..." and returns c, b and d
// (a missing count is 1).
func parseHunkHeader(ln string) (newStart, oldN, newN int, ok bool) {
	fields := strings.Fields(ln)
	if len(fields) < 4 || fields[0] != "@@" || fields[3] != "@@" ||
		!strings.HasPrefix(fields[1], "-") || !strings.HasPrefix(fields[2], "+") {
		return 0, 0, 0, false
	}
	_, oldN, ok1 := parseRange(fields[1][1:])
	newStart, newN, ok2 := parseRange(fields[2][1:])
	return newStart, oldN, newN, ok1 && ok2
}

func parseRange(s string) (start, n int, ok bool) {
	a, b, hasCount := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	n = 1
	if hasCount {
		if n, err = strconv.Atoi(b); err != nil || n < 0 {
			return 0, 0, false
		}
	}
	return start, n, true
}

// MaxModelFindingBytes caps what one model finding may add to a review:
// its body is cut in the middle beyond this, saying so.
const MaxModelFindingBytes = 4000

// maxModelTitleBytes and maxModelPathBytes cap a finding's one-line parts.
const (
	maxModelTitleBytes = 200
	maxModelPathBytes  = 400
)

// SanitizeModelFinding makes a model's finding safe to post: the model
// read the pull request's text, so what it wrote is as untrusted as the
// pull request. The body becomes sanitized text in a fence no line of it
// can close (no markdown, HTML or links render; mentions and #references
// are neutralised), cut to MaxModelFindingBytes; the title becomes inline
// text with its markdown escaped and its URLs not linked; the path loses
// control characters and is capped; an unknown severity becomes low.
func SanitizeModelFinding(f SemanticFinding) SemanticFinding {
	if sev, ok := ModelSeverity(string(f.Severity)); ok {
		f.Severity = sev
	} else {
		f.Severity = validation.SeverityLow
	}
	body, _ := cutMiddle(sanitize(f.Body), MaxModelFindingBytes)
	f.Body = fence(body)
	title := f.Title
	if len(title) > maxModelTitleBytes {
		title = title[:runeStart(title, maxModelTitleBytes)] + "…"
	}
	f.Title = inline(title)
	f.Path = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || visibleRune(r) != "" {
			return -1
		}
		return r
	}, strings.ToValidUTF8(f.Path, ""))
	if len(f.Path) > maxModelPathBytes {
		f.Path = f.Path[:runeStart(f.Path, maxModelPathBytes)]
	}
	if f.Line < 0 {
		f.Line = 0
	}
	return f
}

// The reasons SemanticShouldRun gives, for the record.
const (
	SemanticRunFlagOff      = "GILF_SKIP_CODEX_ON_VALIDATION_FAILURE is off: a validation failure does not disable the semantic review"
	SemanticRunMemory       = "the repository's review-memory text is not empty: the skip rule does not apply"
	SemanticRunNoneQualify  = "no validation finding is blocker or high, or names a changed path"
	semanticSkipSevere      = "skipped: validation found a %s finding (%s) and GILF_SKIP_CODEX_ON_VALIDATION_FAILURE=1"
	semanticSkipChangedPath = "skipped: validation found a %s finding on changed path %s and GILF_SKIP_CODEX_ON_VALIDATION_FAILURE=1"
)

// SkipInput is what the skip rule reads.
type SkipInput struct {
	// Flag is GILF_SKIP_CODEX_ON_VALIDATION_FAILURE=1 (see SkipFlag).
	Flag bool
	// Memory is the prepared review-memory text.
	Memory string
	// PriorReviews counts earlier reviews of this pull request. It is
	// here to say so: prior-review history alone is not the memory-text
	// gate, and the rule never reads it.
	PriorReviews int
	Findings     []validation.Finding
	Changed      []ChangedFile
}

// SkipFlag reads GILF_SKIP_CODEX_ON_VALIDATION_FAILURE: on only when it is
// exactly "1" (default off).
func SkipFlag(v string) bool { return v == "1" }

// SemanticShouldRun is the skip rule of SPEC §3.4 (seed 002): with the
// flag on and the memory text empty (or only white space), any blocker or
// high validation finding skips the model, even one with no path; a
// medium or low one skips it only when a failure path extracted from it
// (its Path, or a path its body names, with any :line:col dropped) is a
// changed path (new or previous name). With the flag off, or memory text
// present, the model runs. reason says why, for the record.
func SemanticShouldRun(in SkipInput) (run bool, reason string) {
	if !in.Flag {
		return true, SemanticRunFlagOff
	}
	if strings.TrimSpace(in.Memory) != "" {
		return true, SemanticRunMemory
	}
	for _, f := range in.Findings {
		if f.Severity == validation.SeverityBlocker || f.Severity == validation.SeverityHigh {
			return false, fmt.Sprintf(semanticSkipSevere, f.Severity, findingName(f))
		}
	}
	changed := map[string]bool{}
	for _, c := range in.Changed {
		for _, n := range []string{c.Name, c.Previous} {
			if n != "" {
				changed[cleanFailurePath(n)] = true
			}
		}
	}
	for _, f := range in.Findings {
		for _, p := range FailurePaths(f) {
			if changed[p] {
				return false, fmt.Sprintf(semanticSkipChangedPath, f.Severity, p)
			}
		}
	}
	return true, SemanticRunNoneQualify
}

func findingName(f validation.Finding) string {
	switch {
	case f.Title != "":
		return f.Title
	case f.Step != "":
		return "step " + f.Step
	}
	return "no title"
}

// FailurePaths extracts the repository paths a validation finding names:
// its Path, then each word of its body that looks like a relative path
// ("src/a.ts:12:5", "./lib/x.js", "(test/y.test.js)"), cleaned of
// surrounding punctuation, a leading "./" and a trailing :line[:col].
func FailurePaths(f validation.Finding) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		p = cleanFailurePath(p)
		if p == "" || seen[p] || strings.HasPrefix(p, "/") || strings.Contains(p, "://") || !strings.ContainsAny(p, "./") {
			return
		}
		seen[p] = true
		out = append(out, p)
	}
	add(f.Path)
	for _, w := range strings.FieldsFunc(f.Body, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '"' || r == '\'' || r == '`' || r == '(' || r == ')' || r == '[' || r == ']' || r == '<' || r == '>' || r == ','
	}) {
		add(w)
	}
	return out
}

func cleanFailurePath(p string) string {
	p = strings.TrimSpace(p)
	p = strings.TrimRight(p, ".;:!?")
	// Drop :line and :line:col.
	for range 2 {
		i := strings.LastIndexByte(p, ':')
		if i < 0 {
			break
		}
		if _, err := strconv.Atoi(p[i+1:]); err != nil {
			break
		}
		p = p[:i]
	}
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	return p
}
