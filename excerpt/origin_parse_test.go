package excerpt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAVASummaryWithoutDetail: a failure whose detail was cut from the
// output is still reported, by its summary line; the others by their
// detail, whose title line is the summary without its message.
func TestAVASummaryWithoutDetail(t *testing.T) {
	out := "  ✘ [fail]: a › one Value is not `true`\n  ✘ [fail]: a › two Error thrown in test\n  ─\n\n" +
		"  a › one\n\n  a.test.js:3\n\n   3: t.true(false);\n\n  Value is not `true`:\n\n  false\n\n  ─\n\n  2 tests failed\n"
	res := Parse(out, Options{Root: "/workspace"})
	if len(res.Failures) != 2 || res.Omitted != 0 {
		t.Fatalf("failures %+v, want 2", res.Failures)
	}
	titles := map[string]bool{}
	for _, f := range res.Failures {
		titles[f.Title] = true
	}
	if !titles["a › one"] || !titles["a › two Error thrown in test"] {
		t.Errorf("titles %v, want the detailed one by its title and the other by its summary", titles)
	}
}

// TestExcerptStartsAtTitle: ESLint's output followed by tsc --pretty's
// (a lint script running both) quotes from the first failure's first
// line, never from inside a block.
func TestExcerptStartsAtTitle(t *testing.T) {
	var parts []string
	for _, name := range []string{"eslint", "tsc-pretty"} {
		b, err := os.ReadFile(filepath.Join("testdata", "raw", name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	out := "> lint\n> eslint . && tsc --noEmit --pretty\n\n" + strings.Join(parts, "")
	res := Parse(out, Options{Root: rawRoot})
	ex := Excerpt(out, res, 3000)
	if !strings.HasPrefix(ex, "src/cart.js\n") || !strings.Contains(ex, "\nsrc/total.ts:6:9 - error TS2322:") {
		t.Errorf("excerpt does not start at the failures' titles:\n%s", ex)
	}
}
