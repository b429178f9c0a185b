package excerpt

import (
	"regexp"
	"strconv"
	"strings"
)

// The test runners' failure blocks. Each parser finds where a failed test's
// block starts and ends; testFinding makes the failure and its annotation.
var (
	jestTitle      = regexp.MustCompile(`^\s*● (.+)$`)
	jestEnd        = regexp.MustCompile(`^\s?(?:FAIL|PASS)\s+\S|^\s*(?:Test Suites:|Summary of all failing tests)`)
	codeFrameLine  = regexp.MustCompile(`^\s*>?\s*\d*\s*\|`)
	vitestSection  = regexp.MustCompile(`⎯ Failed (?:Tests|Suites) \d+ ⎯`)
	vitestFail     = regexp.MustCompile(`^\s*FAIL\s+(\S.*)$`)
	vitestEnd      = regexp.MustCompile(`^\s*⎯+(?:\[\d+/\d+\]⎯*)?\s*$|^\s*Test Files\s`)
	mochaFailing   = regexp.MustCompile(`^\s*\d+ failing\s*$`)
	mochaItem      = regexp.MustCompile(`^ {2}(\d+)\) (.+)$`)
	nodeTestFail   = regexp.MustCompile(`^(\s*)✖ (.+?)(?: \(\d+(?:\.\d+)?m?s\))?\s*$`)
	nodeTestChild  = regexp.MustCompile(`^\s*(?:✔|✖|﹣|▶|ℹ) `)
	tapNotOK       = regexp.MustCompile(`^(\s*)not ok \d+(?: - (.*?))?(\s+#\s*(?i:todo|skip)\b.*)?\s*$`)
	tapKey         = regexp.MustCompile(`^([A-Za-z_]+):(?: (.*))?$`)
	uvuFail        = regexp.MustCompile(`^\s*FAIL\s+(?:(\S.*?)\s+)?"(.+)"\s*$`)
	uvuEnd         = regexp.MustCompile(`^\s*Total:\s+\d+`)
	avaFail        = regexp.MustCompile(`^\s*✘ \[fail\]: (.+)$`)
	avaLocation    = regexp.MustCompile(`^\s*(\S+):(\d+)\s*$`)
	avaCodeFrame   = regexp.MustCompile(`^\s*\d+: `)
	avaSeparator   = regexp.MustCompile(`^\s*─\s*$`)
	trailingTiming = regexp.MustCompile(` \(\d+(?:\.\d+)? ?m?s\)$`)
)

// testFinding makes the failure of a failed test's block and, when a frame
// in it is inside the repository, the annotation there. msg is the
// assertion's message.
func testFinding(pos int, title string, block, msg []string, opts Options, mode frameMode) finding {
	f := finding{pos: pos, failure: Failure{Title: oneLine(title), Text: blockText(block, mode)}}
	if p, fr, ok := firstRepoFrame(block, opts, mode); ok {
		f.failure.Path, f.failure.Line = p, fr.line
		f.annotations = []Annotation{frameAnnotation(p, fr, title, msg)}
	}
	return f
}

func frameAnnotation(p string, fr frame, title string, msg []string) Annotation {
	return Annotation{
		Path: p, StartLine: fr.line, EndLine: fr.line, StartColumn: fr.col, EndColumn: fr.col,
		Level: LevelFailure, Title: oneLine(title), Message: message(msg),
	}
}

// messageLines returns the lines of body before its first stack frame,
// leaving out code frames.
func messageLines(body []string, mode frameMode) []string {
	var out []string
	for _, l := range body {
		if _, ok := parseFrame(l, mode); ok {
			break
		}
		if len(l) > MaxLineBytes || codeFrameLine.MatchString(l) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// dedupe drops the findings a runner printed twice (node:test repeats its
// failures under "failing tests:", Jest under "Summary of all failing
// tests").
func dedupe(fs []finding) []finding {
	seen := make(map[string]bool, len(fs))
	out := fs[:0]
	for _, f := range fs {
		key := f.failure.Title + "\x00" + f.failure.Text
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, f)
	}
	return out
}

// match returns re's submatches in l, or nil when l does not match or is
// longer than MaxLineBytes.
func match(re *regexp.Regexp, l string) []string {
	if len(l) > MaxLineBytes {
		return nil
	}
	return re.FindStringSubmatch(l)
}

func parseJest(lines []string, opts Options) []finding {
	var out []finding
	for i := 0; i < len(lines); i++ {
		m := match(jestTitle, lines[i])
		if m == nil {
			continue
		}
		end := i + 1
		for end < len(lines) && match(jestTitle, lines[end]) == nil && match(jestEnd, lines[end]) == nil {
			end++
		}
		title := strings.TrimSpace(m[1])
		if title != "Console" {
			body := lines[i+1 : end]
			out = append(out, testFinding(i, title, lines[i:end], messageLines(body, prefixedFrames), opts, prefixedFrames))
		}
		i = end - 1
	}
	return dedupe(out)
}

func parseVitest(lines []string, opts Options) []finding {
	var out []finding
	in := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if len(l) > MaxLineBytes {
			continue
		}
		if vitestSection.MatchString(l) {
			in = true
			continue
		}
		m := match(vitestFail, l)
		if !in || m == nil {
			continue
		}
		end := i + 1
		for end < len(lines) && match(vitestFail, lines[end]) == nil && match(vitestEnd, lines[end]) == nil &&
			match(vitestSection, lines[end]) == nil {
			end++
		}
		title := strings.TrimSpace(m[1])
		if _, name, ok := strings.Cut(title, " > "); ok {
			title = name
		}
		out = append(out, testFinding(i, title, lines[i:end], messageLines(lines[i+1:end], prefixedFrames), opts, prefixedFrames))
		i = end - 1
	}
	return out
}

func parseMocha(lines []string, opts Options) []finding {
	var out []finding
	in, next := false, 1
	for i := 0; i < len(lines); i++ {
		if !in {
			in = match(mochaFailing, lines[i]) != nil
			continue
		}
		m := match(mochaItem, lines[i])
		if m == nil || m[1] != strconv.Itoa(next) {
			continue
		}
		next++
		// The title goes on over indented lines up to one ending in ":".
		title := []string{strings.TrimSpace(m[2])}
		body := i + 1
		for !strings.HasSuffix(title[len(title)-1], ":") && body < len(lines) && body-i < 6 &&
			!blank(lines[body]) && len(lines[body]) <= MaxLineBytes {
			title = append(title, strings.TrimSpace(lines[body]))
			body++
		}
		end := body
		for end < len(lines) {
			n := match(mochaItem, lines[end])
			if n != nil && n[1] == strconv.Itoa(next) || strings.HasPrefix(lines[end], "npm ") {
				break
			}
			end++
		}
		name := strings.TrimSuffix(strings.Join(title, " "), ":")
		out = append(out, testFinding(i, name, lines[i:end], messageLines(lines[body:end], prefixedFrames), opts, prefixedFrames))
		i = end - 1
	}
	return out
}

func parseNodeTest(lines []string, opts Options) []finding {
	var out []finding
	for i := 0; i < len(lines); i++ {
		m := match(nodeTestFail, lines[i])
		if m == nil || m[2] == "failing tests:" {
			continue
		}
		indent := len(m[1])
		end := i + 1
		for end < len(lines) {
			n := lines[end]
			if !blank(n) && (len(indentOf(n)) <= indent || match(nodeTestChild, n) != nil) {
				break
			}
			end++
		}
		body := lines[i+1 : end]
		hasBody := false
		for _, l := range body {
			hasBody = hasBody || !blank(l)
		}
		if hasBody { // a suite's line has only its tests under it
			out = append(out, testFinding(i, m[2], lines[i:end], messageLines(body, prefixedFrames), opts, prefixedFrames))
		}
		i = end - 1
	}
	return dedupe(out)
}

func parseTAP(lines []string, opts Options) []finding {
	var out []finding
	for i := 0; i < len(lines); i++ {
		m := match(tapNotOK, lines[i])
		if m == nil || m[3] != "" {
			continue
		}
		title := strings.ReplaceAll(strings.TrimSpace(m[2]), `\#`, "#")
		start, end := i, i+1
		var fields map[string][]string
		var yaml []string
		if end < len(lines) && strings.TrimSpace(lines[end]) == "---" {
			yamlEnd := end + 1
			for yamlEnd < len(lines) && strings.TrimSpace(lines[yamlEnd]) != "..." && yamlEnd-end < 4*MaxFailureLines {
				yamlEnd++
			}
			yaml = lines[end+1 : min(yamlEnd, len(lines))]
			fields = tapFields(yaml)
			end = min(yamlEnd+1, len(lines))
		}
		i = end - 1
		if ft := strings.Join(fields["failureType"], ""); strings.Contains(ft, "subtestsFailed") {
			continue // its failed subtests are reported themselves
		}
		block := []string{strings.TrimSpace(m[0])}
		for _, l := range yaml {
			if strings.HasPrefix(strings.TrimSpace(l), "duration_ms:") {
				continue
			}
			block = append(block, l)
		}
		f := finding{pos: start, failure: Failure{Title: oneLine(title), Text: blockText(block, bareFrames)}}
		msg := fields["error"]
		p, fr, ok := firstRepoFrame(fields["stack"], opts, bareFrames)
		if !ok {
			loc := strings.Join(fields["location"], "")
			if l, lineNo, col, found := splitLocation(loc); found {
				p, ok = repoPath(l, opts)
				fr = frame{loc: l, line: lineNo, col: col}
			}
		}
		if ok {
			f.failure.Path, f.failure.Line = p, fr.line
			f.annotations = []Annotation{frameAnnotation(p, fr, title, msg)}
		}
		out = append(out, f)
	}
	return out
}

// tapFields reads the top-level keys of a TAP YAML diagnostic block: a
// plain value, or the lines of a block scalar (|, |-, >, >-) under it.
func tapFields(yaml []string) map[string][]string {
	fields := map[string][]string{}
	base := -1
	key, indent := "", ""
	for _, l := range yaml {
		if len(l) > MaxLineBytes {
			continue
		}
		ind := len(indentOf(l))
		if base < 0 && !blank(l) {
			base = ind
			indent = strings.Repeat(" ", base+2)
		}
		if ind == base {
			m := tapKey.FindStringSubmatch(strings.TrimSpace(l))
			if m == nil {
				key = ""
				continue
			}
			key = m[1]
			switch v := strings.TrimSpace(m[2]); v {
			case "|", "|-", ">", ">-", "":
			default:
				fields[key] = append(fields[key], yamlScalar(v))
			}
			continue
		}
		if key != "" {
			fields[key] = append(fields[key], strings.TrimPrefix(l, indent))
		}
	}
	return fields
}

// yamlScalar unquotes a single- or double-quoted YAML scalar, as far as
// node's TAP reporter quotes them.
func yamlScalar(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'")
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		if u, err := strconv.Unquote(v); err == nil {
			return u
		}
	}
	return v
}

func parseUVU(lines []string, opts Options) []finding {
	var out []finding
	for i := 0; i < len(lines); i++ {
		m := match(uvuFail, lines[i])
		if m == nil {
			continue
		}
		end := i + 1
		for end < len(lines) && match(uvuFail, lines[end]) == nil && match(uvuEnd, lines[end]) == nil {
			end++
		}
		title := m[2]
		if m[1] != "" {
			title = m[1] + " › " + m[2]
		}
		out = append(out, testFinding(i, title, lines[i:end], messageLines(lines[i+1:end], prefixedFrames), opts, prefixedFrames))
		i = end - 1
	}
	return out
}
