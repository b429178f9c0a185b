package excerpt

import (
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// frame is one parsed stack frame line.
type frame struct {
	loc       string // the location as printed, file:// URL or path
	line, col int
}

// framePrefixes start a stack frame line once the indentation is trimmed:
// V8's "at ", Vitest's "❯ " and AVA's "› ".
var framePrefixes = []string{"at ", "❯ ", "› "}

// frameMode says which lines parseFrame takes for frames.
type frameMode int

const (
	// prefixedFrames are lines that start with "at ", "❯ " or "› ".
	prefixedFrames frameMode = iota
	// parenFrames are those and also "name (location)" lines without a
	// prefix, as TAP's stack block prints them.
	parenFrames
	// bareFrames are all of those and also a bare location, as TAP's stack
	// block prints a frame without a function name.
	bareFrames
)

// parseFrame parses a V8, Vitest or AVA stack frame line.
func parseFrame(line string, mode frameMode) (frame, bool) {
	t := strings.TrimSpace(line)
	if len(t) > MaxLineBytes {
		return frame{}, false
	}
	prefixed := false
	for _, p := range framePrefixes {
		if rest, ok := strings.CutPrefix(t, p); ok {
			t, prefixed = rest, true
			break
		}
	}
	if !prefixed && mode == prefixedFrames {
		return frame{}, false
	}
	t = strings.TrimSuffix(t, " {") // node prints the error's own fields after the last frame
	if open := strings.LastIndexByte(t, '('); open >= 0 && strings.HasSuffix(t, ")") {
		t = t[open+1 : len(t)-1]
	} else if !prefixed && mode == parenFrames {
		return frame{}, false
	} else if sp := strings.LastIndexByte(t, ' '); sp >= 0 {
		t = t[sp+1:]
	}
	loc, lineNo, col, ok := splitLocation(t)
	if !ok {
		return frame{}, false
	}
	return frame{loc: loc, line: lineNo, col: col}, true
}

// splitLocation splits "path:line:col" or "path:line".
func splitLocation(s string) (loc string, line, col int, ok bool) {
	head, last, found := cutLastNumber(s)
	if !found {
		return "", 0, 0, false
	}
	if h2, n, found := cutLastNumber(head); found {
		head, line, col = h2, n, last
	} else {
		line = last
	}
	if head == "" || line < 1 {
		return "", 0, 0, false
	}
	return head, line, col, true
}

// cutLastNumber cuts ":N" off the end of s.
func cutLastNumber(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 || i == len(s)-1 || len(s)-i > 8 {
		return s, 0, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 {
		return s, 0, false
	}
	return s[:i], n, true
}

// internalLocation reports whether a frame location is in node_modules or
// in node itself, the frames a PR author did not write.
func internalLocation(loc string) bool {
	return strings.HasPrefix(loc, "node:") || strings.HasPrefix(loc, "internal/") ||
		strings.Contains(loc, "node_modules/") || strings.Contains(loc, `node_modules\`) ||
		loc == "native" || loc == "<anonymous>"
}

// repoPath turns a path or file:// URL as a tool printed it into a
// repo-relative, slash-separated, cleaned path. It reports false for a path
// outside Root, above the repository, inside node_modules, or one that
// opts.Exists rejects.
func repoPath(p string, opts Options) (string, bool) {
	if rest, ok := strings.CutPrefix(p, "file://"); ok {
		if u, err := url.PathUnescape(rest); err == nil {
			rest = u
		}
		p = rest
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if p == "" || len(p) > MaxLineBytes || strings.ContainsAny(p, "\x00\n") {
		return "", false
	}
	if path.IsAbs(p) {
		root := path.Clean(strings.ReplaceAll(opts.Root, `\`, "/"))
		if opts.Root == "" || !path.IsAbs(root) {
			return "", false
		}
		rel, ok := strings.CutPrefix(path.Clean(p), root)
		if !ok || (root != "/" && !strings.HasPrefix(rel, "/")) {
			return "", false
		}
		p = strings.TrimPrefix(rel, "/")
	}
	p = path.Clean(p)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
		return "", false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "node_modules" {
			return "", false
		}
	}
	if opts.Exists != nil && !opts.Exists(p) {
		return "", false
	}
	return p, true
}

// hiddenFramesLine is the line that stands for n collapsed frames.
func hiddenFramesLine(indent string, n int) string {
	unit := "frames"
	if n == 1 {
		unit = "frame"
	}
	return fmt.Sprintf("%s… %d %s in node_modules/node internals hidden", indent, n, unit)
}

// collapseFrames replaces each run of stack frames in node_modules or node
// internals with one line saying how many were hidden. Frames in the
// repository stay. mode says which lines are frames.
func collapseFrames(lines []string, mode frameMode) []string {
	out := make([]string, 0, len(lines))
	hidden, indent := 0, ""
	flush := func() {
		if hidden > 0 {
			out = append(out, hiddenFramesLine(indent, hidden))
			hidden = 0
		}
	}
	for _, l := range lines {
		if f, ok := parseFrame(l, mode); ok && internalLocation(f.loc) {
			if hidden == 0 {
				indent = indentOf(l)
			}
			hidden++
			if strings.HasSuffix(l, " {") { // node prints the error's fields after its last frame
				out = append(out, hiddenFramesLine(indent, hidden)+" {")
				hidden = 0
			}
			continue
		}
		flush()
		out = append(out, l)
	}
	flush()
	return out
}

// firstRepoFrame returns the repo-relative path and line of the first frame
// in lines that is inside the repository.
func firstRepoFrame(lines []string, opts Options, mode frameMode) (string, frame, bool) {
	for _, l := range lines {
		f, ok := parseFrame(l, mode)
		if !ok || internalLocation(f.loc) {
			continue
		}
		if p, ok := repoPath(f.loc, opts); ok {
			return p, f, true
		}
	}
	return "", frame{}, false
}
