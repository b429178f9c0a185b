// Package excerpt turns the output of one failed step, already redacted,
// into what a pull request's author can act on: the failures the known
// tools (tsc, ESLint, Jest, Vitest, Mocha, node:test, TAP, AVA, uvu)
// printed, each with its message and the first stack frame inside the
// repository, check-run annotations at the lines they name, and a short
// excerpt for the review that quotes the failures before the output's tail.
//
// The package is pure: it reads no files and runs nothing. Its input is
// untrusted; every parser works line by line with RE2 expressions on lines
// of bounded length, so time is linear in the output and memory bounded by
// it.
package excerpt

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// The limits. Each has its test at the boundary.
const (
	// DefaultMaxFailures is how many parsed failures Parse keeps when
	// Options.MaxFailures is zero.
	DefaultMaxFailures = 10
	// DefaultMaxAnnotations is how many annotations Parse keeps when
	// Options.MaxAnnotations is zero.
	DefaultMaxAnnotations = 200
	// MaxLineBytes is the longest line a parser looks at; longer lines are
	// never taken for a tool's line, and are cut to this length in a
	// failure's text.
	MaxLineBytes = 4096
	// MaxFailureLines is how many lines of one failure block Failure.Text
	// keeps, after the stack frames are collapsed.
	MaxFailureLines = 60
	// MaxTitleBytes bounds Failure.Title and Annotation.Title.
	MaxTitleBytes = 200
	// MaxMessageLines and MaxMessageBytes bound Annotation.Message.
	MaxMessageLines = 10
	MaxMessageBytes = 1024
	// TailLines is how many of the output's last lines Excerpt quotes at
	// most; after failures it quotes only lines that follow the last one
	// it showed.
	TailLines = 20
	// GenericMaxBlocks is how many matching lines, with their context, the
	// generic fallback quotes; GenericContextBefore and GenericContextAfter
	// are the lines of context around each.
	GenericMaxBlocks     = 5
	GenericContextBefore = 2
	GenericContextAfter  = 3
)

// Level is an annotation's level, as GitHub's annotation_level names it.
type Level string

// The levels.
const (
	LevelFailure Level = "failure"
	LevelWarning Level = "warning"
	LevelNotice  Level = "notice"
)

// An Annotation is a check-run annotation at a file's lines.
type Annotation struct {
	// Path is relative to the repository root, slash-separated and clean:
	// never absolute, never above the root, never inside node_modules.
	Path string
	// StartLine and EndLine are 1-based; EndLine >= StartLine.
	StartLine, EndLine int
	// StartColumn and EndColumn are 0 when unknown, and set only when
	// StartLine == EndLine.
	StartColumn, EndColumn int
	Level                  Level
	// Title is short and one line: "TS2322", "no-unused-vars", a test name.
	Title string
	// Message is one or a few lines.
	Message string
}

// A Failure is one failure a tool reported: a failed test, a type error, a
// file's lint errors.
type Failure struct {
	// Tool is the parser that found it: "tsc", "eslint", "jest", "vitest",
	// "node:test", "tap", "mocha", "uvu", "ava" or "generic" (Biome and
	// oxlint have no parser yet; their output gets the generic fallback).
	Tool string
	// Title is the failing test's name or the error's first line.
	Title string
	// Text is the failure's block whole: the message, expected, actual and
	// diff, the stack frames inside the repository; each run of frames in
	// node_modules or node's internals is collapsed into one line, at the
	// frames' indentation, "… N frames in node_modules/node internals
	// hidden". Blocks longer than MaxFailureLines end in "… N more lines".
	Text string
	// Path and Line locate the first frame inside the repository, or the
	// error; Path is "" and Line 0 when unknown.
	Path string
	Line int
	// Annotations are this failure's own annotations (an ESLint file's
	// problems, one each), kept whatever Options.MaxAnnotations says.
	Annotations []Annotation
}

// Options are Parse's settings; the zero value means the defaults.
type Options struct {
	// Root is the directory the step ran in as the tool saw it
	// ("/workspace" in the local sandbox, "/home/user/gilf/repo" on E2B).
	// Absolute paths under it become repo-relative; other absolute paths
	// are dropped from annotations.
	Root string
	// Exists, when set, reports whether a repo-relative path exists in the
	// checkout; annotations and locations for paths it rejects are dropped.
	Exists func(path string) bool
	// MaxFailures is how many failures Parse keeps; 0 means
	// DefaultMaxFailures.
	MaxFailures int
	// MaxAnnotations is how many annotations Parse keeps; 0 means
	// DefaultMaxAnnotations.
	MaxAnnotations int
}

// Result is what Parse found.
type Result struct {
	// Tools names the parsers that matched, in the order Parse runs them.
	Tools []string
	// Failures are in the order the output printed them.
	Failures    []Failure
	Annotations []Annotation
	// Omitted counts the failures found beyond Options.MaxFailures.
	Omitted int
}

// finding is what a parser reports: a failure at an output line, with its
// annotations.
type finding struct {
	pos         int // index of the failure's first line in the output
	failure     Failure
	annotations []Annotation
}

// parser finds one tool's failures in the output's lines.
type parser struct {
	tool  string
	parse func(lines []string, opts Options) []finding
}

// parsers run in this order; Result.Tools follows it.
var parsers = []parser{
	{"tsc", parseTSC},
	{"eslint", parseESLint},
	{"jest", parseJest},
	{"vitest", parseVitest},
	{"node:test", parseNodeTest},
	{"tap", parseTAP},
	{"mocha", parseMocha},
	{"uvu", parseUVU},
	{"ava", parseAVA},
}

// Parse finds the failures and annotations in one step's output. It strips
// ANSI escapes first. When no tool's parser matches, the generic fallback
// quotes the lines that mention an error, a failure or an assertion.
func Parse(output string, opts Options) Result {
	if opts.MaxFailures <= 0 {
		opts.MaxFailures = DefaultMaxFailures
	}
	if opts.MaxAnnotations <= 0 {
		opts.MaxAnnotations = DefaultMaxAnnotations
	}
	lines := splitLines(StripANSI(output))
	var res Result
	var found []finding
	for _, p := range parsers {
		fs := p.parse(lines, opts)
		if len(fs) == 0 {
			continue
		}
		res.Tools = append(res.Tools, p.tool)
		for i := range fs {
			fs[i].failure.Tool = p.tool
		}
		found = append(found, fs...)
	}
	if len(found) == 0 {
		if fs := genericFindings(lines); len(fs) > 0 {
			res.Tools = append(res.Tools, "generic")
			found = fs
		}
	}
	slices.SortStableFunc(found, func(a, b finding) int { return cmp.Compare(a.pos, b.pos) })
	for _, f := range found {
		keep := len(res.Failures) < opts.MaxFailures
		var own []Annotation
		for _, a := range f.annotations {
			if a.StartLine < 1 || a.Path == "" {
				continue
			}
			a.EndLine = max(a.EndLine, a.StartLine)
			if a.EndLine != a.StartLine || a.StartColumn < 0 || a.EndColumn < a.StartColumn {
				a.StartColumn, a.EndColumn = 0, 0
			}
			if keep {
				own = append(own, a)
			}
			if len(res.Annotations) < opts.MaxAnnotations {
				res.Annotations = append(res.Annotations, a)
			}
		}
		if keep {
			f.failure.Annotations = own
			res.Failures = append(res.Failures, f.failure)
		} else {
			res.Omitted++
		}
	}
	return res
}

// splitLines splits s into lines without their newlines; a final newline
// does not start another line.
func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// indentOf returns the leading spaces and tabs of l.
func indentOf(l string) string {
	return l[:len(l)-len(strings.TrimLeft(l, " \t"))]
}

// blank reports whether l holds only white space.
func blank(l string) bool { return strings.TrimSpace(l) == "" }

// cutBytes cuts s to at most n bytes on a rune boundary, ending it with "…"
// when it cut.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	if n < len(ell) {
		return ""
	}
	return runePrefix(s, n-len(ell)) + ell
}

// runePrefix returns the longest prefix of s of at most n bytes that ends
// on a rune boundary.
func runePrefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// runeSuffix returns the longest suffix of s of at most n bytes that starts
// on a rune boundary.
func runeSuffix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && s[i]&0xc0 == 0x80 {
		i++
	}
	return s[i:]
}

// oneLine makes a title: the first line, trimmed, within MaxTitleBytes.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return cutBytes(strings.TrimSpace(s), MaxTitleBytes)
}

// message makes an annotation message of lines: trimmed, without blank
// lines at either end, within MaxMessageLines and MaxMessageBytes.
func message(lines []string) string {
	var kept []string
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if len(kept) == 0 && blank(l) {
			continue
		}
		kept = append(kept, l)
	}
	for len(kept) > 0 && blank(kept[len(kept)-1]) {
		kept = kept[:len(kept)-1]
	}
	more := len(kept) > MaxMessageLines
	kept = dedent(kept[:min(len(kept), MaxMessageLines)])
	if more {
		kept = append(kept, "…")
	}
	return cutBytes(strings.Join(kept, "\n"), MaxMessageBytes)
}

// blockText makes a failure's text of its lines: frames collapsed, common
// indentation removed, blank lines at either end dropped, each line within
// MaxLineBytes and at most MaxFailureLines lines.
func blockText(lines []string, mode frameMode) string {
	lines = collapseFrames(lines, mode)
	for len(lines) > 0 && blank(lines[0]) {
		lines = lines[1:]
	}
	for len(lines) > 0 && blank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	out := make([]string, 0, min(len(lines), MaxFailureLines+1))
	for i, l := range lines {
		if i == MaxFailureLines {
			out = append(out, "… "+plural(len(lines)-i, "more line", "more lines"))
			break
		}
		out = append(out, cutBytes(strings.TrimRight(l, " \t"), MaxLineBytes))
	}
	return strings.Join(dedent(out), "\n")
}

// dedent removes the indentation the non-blank lines have in common.
func dedent(lines []string) []string {
	common := -1
	for _, l := range lines {
		if blank(l) {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if common < 0 || n < common {
			common = n
		}
	}
	if common <= 0 {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) >= common {
			out[i] = l[common:]
		} else {
			out[i] = strings.TrimLeft(l, " ")
		}
	}
	return out
}

// plural formats n with the singular or plural unit.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
