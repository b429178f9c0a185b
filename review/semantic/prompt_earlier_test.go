package semantic

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/review"
)

// An incremental review tells the model what the diff is and lists the
// earlier findings, at most maxPromptEarlier of them.
func TestUserMessageEarlierFindings(t *testing.T) {
	earlier := func(n int) []review.SemanticFinding {
		var out []review.SemanticFinding
		for i := range n {
			out = append(out, review.SemanticFinding{Path: "a.js", Line: i + 1, Title: fmt.Sprintf("finding %d", i+1)})
		}
		return out
	}
	in := review.SemanticInput{Title: "t", Diff: review.Diff{Files: []review.DiffFile{{Path: "a.js", Status: "modified", Patch: "@@ -1 +1 @@\n-a\n+b"}}}}
	msg, _ := userMessage(in, 1<<20)
	if strings.Contains(msg, "changes since commit") || strings.Contains(msg, "already posted") {
		t.Errorf("a whole review's message speaks of earlier reviews:\n%s", msg)
	}

	in.Since = strings.Repeat("a", 40)
	in.Earlier = earlier(maxPromptEarlier)
	msg, _ = userMessage(in, 1<<20)
	if !strings.Contains(msg, "only the changes since commit "+in.Since) || !strings.Contains(msg, "- a.js line 50: finding 50\n") || strings.Contains(msg, "left out") {
		t.Errorf("at the cap, every earlier finding is listed:\n%s", msg)
	}
	in.Earlier = earlier(maxPromptEarlier + 1)
	msg, _ = userMessage(in, 1<<20)
	if strings.Contains(msg, "finding 51") || !strings.Contains(msg, "(gilf left out 1 more earlier findings)") {
		t.Errorf("over the cap, the rest is counted:\n%s", msg)
	}
}
