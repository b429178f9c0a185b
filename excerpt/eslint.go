package excerpt

import (
	"regexp"
	"strconv"
	"strings"
)

// ESLint's formatters: stylish (the default) prints a file's path on a line
// of its own and then one indented line per problem; unix and compact print
// one line per problem with the path in front.
var (
	eslintStylish = regexp.MustCompile(`^\s+(\d+):(\d+)\s+(error|warning)\s+(.*?)(?:\s{2,}(\S+))?\s*$`)
	eslintUnix    = regexp.MustCompile(`^(\S.*?):(\d+):(\d+): (.*) \[(Error|Warning)(?:/(\S+))?\]$`)
	eslintCompact = regexp.MustCompile(`^(\S.*?): line (\d+), col (\d+), (Error|Warning) - (.*?)(?: \((\S+)\))?$`)
)

// lintProblem is one problem an ESLint formatter printed.
type lintProblem struct {
	line, col int
	level     Level
	msg, rule string
}

func (p lintProblem) annotation(path string) Annotation {
	title := p.rule
	if title == "" {
		title = "eslint"
	}
	return Annotation{
		Path: path, StartLine: p.line, EndLine: p.line, StartColumn: p.col, EndColumn: p.col,
		Level: p.level, Title: oneLine(title), Message: message([]string{p.msg}),
	}
}

func eslintLevel(s string) Level {
	if strings.EqualFold(s, "warning") {
		return LevelWarning
	}
	return LevelFailure
}

func parseESLint(lines []string, opts Options) []finding {
	var out []finding
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if len(l) > MaxLineBytes {
			continue
		}
		// stylish: a path line and its problems.
		if !blank(l) && indentOf(l) == "" && i+1 < len(lines) && len(lines[i+1]) <= MaxLineBytes && eslintStylish.MatchString(lines[i+1]) {
			file := strings.TrimSpace(l)
			rel, ok := repoPath(file, opts)
			shown := file
			if ok {
				shown = rel
			}
			block := []string{shown}
			var anns []Annotation
			var first lintProblem
			end := i + 1
			for ; end < len(lines); end++ {
				n := lines[end]
				if len(n) > MaxLineBytes {
					break
				}
				m := eslintStylish.FindStringSubmatch(n)
				if m == nil {
					break
				}
				p := stylishProblem(m)
				if end == i+1 {
					first = p
				}
				block = append(block, n)
				if ok {
					anns = append(anns, p.annotation(rel))
				}
			}
			f := finding{pos: i, annotations: anns, failure: Failure{
				Title: oneLine(shown + ": " + plural(end-i-1, "problem", "problems")),
				Text:  blockText(block, prefixedFrames),
			}}
			if ok {
				f.failure.Path, f.failure.Line = rel, first.line
			}
			out = append(out, f)
			i = end - 1
			continue
		}
		if m := eslintUnix.FindStringSubmatch(l); m != nil {
			lineNo, _ := strconv.Atoi(m[2])
			col, _ := strconv.Atoi(m[3])
			out = append(out, lintFinding(i, m[1], lintProblem{lineNo, col, eslintLevel(m[5]), m[4], m[6]}, opts))
			continue
		}
		if m := eslintCompact.FindStringSubmatch(l); m != nil {
			lineNo, _ := strconv.Atoi(m[2])
			col, _ := strconv.Atoi(m[3])
			out = append(out, lintFinding(i, m[1], lintProblem{lineNo, col, eslintLevel(m[4]), m[5], m[6]}, opts))
		}
	}
	return out
}

func stylishProblem(m []string) lintProblem {
	lineNo, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	return lintProblem{line: lineNo, col: col, level: eslintLevel(m[3]), msg: m[4], rule: m[5]}
}

// lintFinding is the failure of one unix or compact line.
func lintFinding(pos int, file string, p lintProblem, opts Options) finding {
	shown := file
	rel, ok := repoPath(file, opts)
	if ok {
		shown = rel
	}
	text := shown + ":" + strconv.Itoa(p.line) + ":" + strconv.Itoa(p.col) + ": " + p.msg
	if p.rule != "" {
		text += "  " + p.rule
	}
	f := finding{pos: pos, failure: Failure{Title: oneLine(p.msg), Text: cutBytes(text, MaxLineBytes)}}
	if ok && p.line > 0 {
		f.failure.Path, f.failure.Line = rel, p.line
		f.annotations = []Annotation{p.annotation(rel)}
	}
	return f
}
