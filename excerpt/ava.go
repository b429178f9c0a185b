package excerpt

import (
	"slices"
	"strconv"
	"strings"
)

// avaPrefixScan bounds the summaries parseAVA compares with one line.
const avaPrefixScan = 16

// parseAVA reads AVA's default reporter: a summary line per failed test,
// "✘ [fail]: <title> <message>", then after a "─" the failures in
// detail, each starting with its title alone on a line, then its
// location (file:line, absent for an error thrown), a code frame, the
// message and the stack. A failure whose detail is missing (cut from the
// output) is still reported, by its summary line.
func parseAVA(lines []string, opts Options) []finding {
	fails := newAVAFailures(lines)
	if fails == nil {
		return nil
	}
	var out []finding
	for i := fails.all[0].pos + 1; i < len(lines); i++ {
		f := fails.titleOf(lines[i])
		if f == nil {
			continue
		}
		end := i + 1
		for end < len(lines) && match(avaSeparator, lines[end]) == nil && fails.titleOf(lines[end]) == nil {
			end++
		}
		out = append(out, avaDetail(lines, i, end, opts))
		f.found = true // AVA prints each failure's detail once
		i = end - 1
	}
	for _, f := range fails.all {
		if !f.found {
			out = append(out, finding{pos: f.pos, failure: Failure{Title: oneLine(f.summary), Text: cutBytes(strings.TrimSpace(lines[f.pos]), MaxLineBytes)}})
		}
	}
	return out
}

// avaFailed is one failure of AVA's summary.
type avaFailed struct {
	summary string // title and message, as the summary line has them
	pos     int
	found   bool
}

// avaFailures are the failures of the summary, indexed by summary: they
// are looked up in sorted order, so a line costs a binary search and at
// most avaPrefixScan comparisons.
type avaFailures struct {
	all       []*avaFailed
	bySummary map[string][]*avaFailed
	sorted    []string
	next      map[string]int // found failures are a prefix of each summary's
}

// newAVAFailures reads the summary lines of lines; nil when there are
// none.
func newAVAFailures(lines []string) *avaFailures {
	a := &avaFailures{bySummary: map[string][]*avaFailed{}, next: map[string]int{}}
	for i, l := range lines {
		if m := match(avaFail, l); m != nil {
			f := &avaFailed{summary: strings.TrimSpace(trailingTiming.ReplaceAllString(m[1], "")), pos: i}
			a.all = append(a.all, f)
			a.bySummary[f.summary] = append(a.bySummary[f.summary], f)
		}
	}
	if len(a.all) == 0 {
		return nil
	}
	for k := range a.bySummary {
		a.sorted = append(a.sorted, k)
	}
	slices.Sort(a.sorted)
	return a
}

// take is the first failure with this summary whose detail is not found
// yet, nil when none.
func (a *avaFailures) take(summary string) *avaFailed {
	q := a.bySummary[summary]
	for a.next[summary] < len(q) && q[a.next[summary]].found {
		a.next[summary]++
	}
	if a.next[summary] < len(q) {
		return q[a.next[summary]]
	}
	return nil
}

// titleOf returns the failure whose title line l is: its summary is the
// title, or the title, a space and the message.
func (a *avaFailures) titleOf(l string) *avaFailed {
	t := strings.TrimSpace(l)
	if t == "" || len(l) > MaxLineBytes || match(avaFail, l) != nil {
		return nil
	}
	if f := a.take(t); f != nil {
		return f
	}
	i, _ := slices.BinarySearch(a.sorted, t+" ")
	for k := i; k < len(a.sorted) && k < i+avaPrefixScan && strings.HasPrefix(a.sorted[k], t+" "); k++ {
		if f := a.take(a.sorted[k]); f != nil {
			return f
		}
	}
	return nil
}

// avaDetail is the finding of the failure detailed in lines[i:end]: its
// title, then its location when AVA printed one, the code frame (left
// out of the message), the message and the stack.
func avaDetail(lines []string, i, end int, opts Options) finding {
	title := strings.TrimSpace(lines[i])
	body := lines[i+1 : end]
	lm := []string(nil)
	first := 0
	for first < len(body) && blank(body[first]) {
		first++
	}
	if first < len(body) {
		lm = match(avaLocation, body[first])
	}
	var msg []string
	for k, l := range body {
		if lm != nil && k <= first {
			continue
		}
		if _, ok := parseFrame(l, prefixedFrames); ok {
			break
		}
		if len(l) <= MaxLineBytes && !avaCodeFrame.MatchString(l) {
			msg = append(msg, l)
		}
	}
	fd := testFinding(i, title, lines[i:end], msg, opts, prefixedFrames)
	if lm != nil {
		lineNo, _ := strconv.Atoi(lm[2])
		if p, ok := repoPath(lm[1], opts); ok && lineNo > 0 {
			fd.failure.Path, fd.failure.Line = p, lineNo
			fd.annotations = []Annotation{frameAnnotation(p, frame{loc: lm[1], line: lineNo}, title, msg)}
		}
	}
	return fd
}
