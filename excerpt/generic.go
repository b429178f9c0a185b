package excerpt

import (
	"regexp"
	"strings"
)

// genericLine matches the lines the generic fallback quotes.
var genericLine = regexp.MustCompile(`(?i)error|fail|assert`)

// genericFindings is the fallback when no tool's parser matched: the first
// GenericMaxBlocks lines that mention an error, a failure or an assertion,
// each with GenericContextBefore and GenericContextAfter lines around it;
// overlapping blocks merge.
func genericFindings(lines []string) []finding {
	type block struct{ from, to, match int }
	var blocks []block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if len(l) > MaxLineBytes || !genericLine.MatchString(l) || isSummaryNoise(l) {
			continue
		}
		to := min(i+GenericContextAfter+1, len(lines))
		if n := len(blocks); n > 0 && i-GenericContextBefore <= blocks[n-1].to && to-blocks[n-1].from <= MaxFailureLines {
			blocks[n-1].to = to // touches the previous block: grow it
		} else if n > 0 && i < blocks[n-1].to {
			continue // shown in the previous block, which is full
		} else if n == GenericMaxBlocks {
			break
		} else {
			from := max(i-GenericContextBefore, 0)
			if n > 0 {
				from = max(from, blocks[n-1].to)
			}
			blocks = append(blocks, block{from, to, i})
		}
	}
	out := make([]finding, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, finding{pos: b.from, failure: Failure{
			Title: oneLine(lines[b.match]),
			Text:  blockText(lines[b.from:b.to], prefixedFrames),
		}})
	}
	return out
}

// isSummaryNoise reports lines that mention failures without being one,
// such as "0 failed" or "npm error code 1" that closes every failed npm run.
func isSummaryNoise(l string) bool {
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, "npm error") || strings.HasPrefix(t, "npm ERR!") ||
		strings.Contains(t, " 0 failed") || strings.HasPrefix(t, "0 failed")
}
