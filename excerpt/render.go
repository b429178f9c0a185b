package excerpt

import (
	"strings"
)

// tailHeader separates the failures from the output's last lines.
const tailHeader = "── last lines of the output ──"

// minTailBytes is the least budget worth spending on the tail after the
// failures; with less left, Excerpt ends after the failures.
const minTailBytes = 80

// Excerpt renders the text a review shows for one failed step, within
// budget bytes, cut on rune and line boundaries: the first failures of res
// whole, in order, then "… and N more failures" when some did not fit or
// were omitted, then a separator and as many of the output's last lines as
// the remaining budget holds (at most TailLines). When res has no failures
// the generic fallback's blocks stand in for them. The output is stripped
// of ANSI escapes and the tail's node_modules frames are collapsed too.
func Excerpt(output string, res Result, budget int) string {
	if budget <= 0 {
		return ""
	}
	lines := splitLines(StripANSI(output))
	failures, omitted := res.Failures, res.Omitted
	if len(failures) == 0 {
		for _, f := range genericFindings(lines) {
			failures = append(failures, f.failure)
		}
	}
	var b strings.Builder
	left := budget
	shown := 0
	for i, f := range failures {
		more := len(failures) - i - 1 + omitted
		reserve := 0
		if more > 0 {
			reserve = len(moreLine(more)) + 2
		}
		piece := f.Text + "\n"
		if shown > 0 {
			piece = "\n" + piece
		}
		if len(piece)+reserve <= left {
			b.WriteString(piece)
			left -= len(piece)
			shown++
			continue
		}
		if shown == 0 { // the first failure, cut to fit
			if cut := cutLines(f.Text, left-reserve-1); cut != "" {
				b.WriteString(cut + "\n")
				left -= len(cut) + 1
				shown++
			}
		}
		break
	}
	if more := len(failures) - shown + omitted; more > 0 {
		if line := "\n" + moreLine(more) + "\n"; len(line) <= left {
			b.WriteString(line)
			left -= len(line)
		}
	}
	if b.Len() == 0 {
		return tail(lines, budget)
	}
	header := "\n" + tailHeader + "\n"
	if left >= len(header)+minTailBytes {
		if t := tail(after(lines, failures[:shown]), left-len(header)); t != "" {
			b.WriteString(header + t)
		}
	}
	return b.String()
}

// moreLine says how many failures the excerpt does not show.
func moreLine(n int) string {
	return "… and " + plural(n, "more failure", "more failures")
}

// after returns the lines of the output's tail that follow the last of
// shown, so that the tail does not quote it again: those after the last
// line equal to that failure's last line, when it is among the last
// 4*TailLines lines. It returns nil when only blank lines and collapsed
// frames would follow.
func after(lines []string, shown []Failure) []string {
	if len(shown) == 0 {
		return lines
	}
	text := splitLines(shown[len(shown)-1].Text)
	last := ""
	for i := len(text) - 1; i >= 0 && last == ""; i-- {
		if t := strings.TrimSpace(text[i]); !strings.HasPrefix(t, "… ") {
			last = t
		}
	}
	if last == "" {
		return lines
	}
	for i := len(lines) - 1; i >= max(len(lines)-4*TailLines, 0); i-- {
		if strings.TrimSpace(lines[i]) != last {
			continue
		}
		rest := lines[i+1:]
		for _, l := range collapseFrames(rest, parenFrames) {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "… ") {
				return rest
			}
		}
		return nil
	}
	return lines
}

// cutLines returns the longest run of s's first lines within n bytes; when
// even the first line does not fit, its start cut on a rune boundary.
func cutLines(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	cut := s[:n+1]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		return s[:i]
	}
	return cutBytes(s, n)
}

// tail returns the output's last non-blank-ended lines, frames collapsed,
// at most TailLines of them, within n bytes; a last line longer than n
// keeps its end.
func tail(lines []string, n int) string {
	for len(lines) > 0 && blank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	// Collapse only what can show, plus the frames just before it.
	from := max(len(lines)-4*TailLines, 0)
	lines = collapseFrames(lines[from:], bareFrames)
	lines = lines[max(len(lines)-TailLines, 0):]
	var kept []string
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimRight(lines[i], " \t")
		need := len(l) + 1
		if size+need > n {
			if len(kept) == 0 {
				const ell = "…"
				if n > len(ell)+1 {
					kept = append(kept, ell+runeSuffix(l, n-len(ell)-1))
				}
			}
			break
		}
		kept = append(kept, l)
		size += need
	}
	rev := make([]string, 0, len(kept))
	for i := len(kept) - 1; i >= 0; i-- {
		rev = append(rev, kept[i])
	}
	for len(rev) > 0 && blank(rev[0]) {
		rev = rev[1:]
	}
	if len(rev) == 0 {
		return ""
	}
	return strings.Join(rev, "\n") + "\n"
}
