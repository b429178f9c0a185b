package excerpt

import (
	"regexp"
	"strconv"
	"strings"
)

// tsc prints a diagnostic as "file(line,col): error TSn: message", or with
// --pretty as "file:line:col - error TSn: message" followed by the code
// frame.
var (
	tscPlain  = regexp.MustCompile(`^(\S[^()]*)\((\d+),(\d+)\): (error|warning|message) (TS\d+): (.*)$`)
	tscPretty = regexp.MustCompile(`^(\S.*?):(\d+):(\d+) - (error|warning|message) (TS\d+): (.*)$`)
	tscFound  = regexp.MustCompile(`^Found \d+ errors?\b`)
)

func parseTSC(lines []string, opts Options) []finding {
	var out []finding
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if len(l) > MaxLineBytes || !strings.Contains(l, " TS") {
			continue
		}
		m := tscPlain.FindStringSubmatch(l)
		pretty := false
		if m == nil {
			if m = tscPretty.FindStringSubmatch(l); m == nil {
				continue
			}
			pretty = true
		}
		// The block: continuation lines (indented in the plain form; the
		// code frame up to the next diagnostic in the pretty form).
		end := i + 1
		for end < len(lines) {
			n := lines[end]
			if len(n) <= MaxLineBytes && (tscPlain.MatchString(n) || tscPretty.MatchString(n) || tscFound.MatchString(n)) {
				break
			}
			if !pretty && !strings.HasPrefix(n, " ") {
				break
			}
			end++
		}
		block := lines[i:end]
		lineNo, _ := strconv.Atoi(m[2])
		col, _ := strconv.Atoi(m[3])
		f := finding{pos: i, failure: Failure{
			Title: oneLine(m[5] + ": " + m[6]),
			Text:  blockText(block, prefixedFrames),
		}}
		msg := []string{m[6]}
		for _, n := range block[1:] {
			if pretty && (blank(n) || !strings.HasPrefix(n, "  ")) {
				break // the message ends where the code frame starts
			}
			msg = append(msg, n)
		}
		if p, ok := repoPath(m[1], opts); ok && lineNo > 0 {
			f.failure.Path, f.failure.Line = p, lineNo
			level := LevelFailure
			switch m[4] {
			case "warning":
				level = LevelWarning
			case "message":
				level = LevelNotice
			}
			f.annotations = []Annotation{{
				Path: p, StartLine: lineNo, EndLine: lineNo, StartColumn: col, EndColumn: col,
				Level: level, Title: m[5], Message: message(msg),
			}}
		}
		out = append(out, f)
		i = end - 1
	}
	return out
}
