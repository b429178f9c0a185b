package excerpt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFormats(t *testing.T) {
	tests := []struct {
		name   string
		output string
		opts   Options
		tools  []string
		titles []string
		want   []Annotation
	}{
		{
			name:   "tsc warning and absolute path",
			output: "/workspace/src/a.ts(3,7): warning TS6133: 'x' is declared but its value is never read.\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"tsc"},
			titles: []string{"TS6133: 'x' is declared but its value is never read."},
			want:   []Annotation{{Path: "src/a.ts", StartLine: 3, EndLine: 3, StartColumn: 7, EndColumn: 7, Level: LevelWarning, Title: "TS6133", Message: "'x' is declared but its value is never read."}},
		},
		{
			name: "tsc continuation lines",
			output: "src/a.ts(3,7): error TS2322: Type '{ a: string; }' is not assignable to type 'B'.\n" +
				"  Property 'b' is missing in type '{ a: string; }' but required in type 'B'.\n" +
				"src/b.ts(1,1): error TS1005: ';' expected.\n",
			tools:  []string{"tsc"},
			titles: []string{"TS2322: Type '{ a: string; }' is not assignable to type 'B'.", "TS1005: ';' expected."},
			want: []Annotation{
				{Path: "src/a.ts", StartLine: 3, EndLine: 3, StartColumn: 7, EndColumn: 7, Level: LevelFailure, Title: "TS2322", Message: "Type '{ a: string; }' is not assignable to type 'B'.\n  Property 'b' is missing in type '{ a: string; }' but required in type 'B'."},
				{Path: "src/b.ts", StartLine: 1, EndLine: 1, StartColumn: 1, EndColumn: 1, Level: LevelFailure, Title: "TS1005", Message: "';' expected."},
			},
		},
		{
			name:   "tsc path outside the root",
			output: "/elsewhere/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"tsc"},
			titles: []string{"TS2322: Type 'string' is not assignable to type 'number'."},
		},
		{
			name:   "eslint unix",
			output: "/workspace/src/a.js:3:7: 'x' is defined but never used. [Error/no-unused-vars]\n/workspace/src/b.js:1:1: Unexpected console statement. [Warning/no-console]\n\n2 problems\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"eslint"},
			titles: []string{"'x' is defined but never used.", "Unexpected console statement."},
			want: []Annotation{
				{Path: "src/a.js", StartLine: 3, EndLine: 3, StartColumn: 7, EndColumn: 7, Level: LevelFailure, Title: "no-unused-vars", Message: "'x' is defined but never used."},
				{Path: "src/b.js", StartLine: 1, EndLine: 1, StartColumn: 1, EndColumn: 1, Level: LevelWarning, Title: "no-console", Message: "Unexpected console statement."},
			},
		},
		{
			name:   "eslint compact",
			output: "/workspace/src/a.js: line 3, col 7, Error - 'x' is defined but never used. (no-unused-vars)\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"eslint"},
			titles: []string{"'x' is defined but never used."},
			want:   []Annotation{{Path: "src/a.js", StartLine: 3, EndLine: 3, StartColumn: 7, EndColumn: 7, Level: LevelFailure, Title: "no-unused-vars", Message: "'x' is defined but never used."}},
		},
		{
			name:   "eslint stylish parse error without a rule, Exists rejects the file",
			output: "/workspace/src/gone.js\n  1:5  error  Parsing error: Unexpected token\n\n/workspace/src/a.js\n  2:1  warning  Unexpected var  no-var\n",
			opts:   Options{Root: "/workspace", Exists: func(p string) bool { return p == "src/a.js" }},
			tools:  []string{"eslint"},
			titles: []string{"/workspace/src/gone.js: 1 problem", "src/a.js: 1 problem"},
			want:   []Annotation{{Path: "src/a.js", StartLine: 2, EndLine: 2, StartColumn: 1, EndColumn: 1, Level: LevelWarning, Title: "no-var", Message: "Unexpected var"}},
		},
		{
			name: "vitest frame with a function name and an absolute path",
			output: "⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯\n\n FAIL  src/a.test.ts > math > adds\nAssertionError: expected 1 to be 2\n" +
				" ❯ helper /workspace/src/helper.ts:3:9\n ❯ /workspace/src/a.test.ts:5:3\n\n⎯⎯⎯[1/1]⎯\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"vitest"},
			titles: []string{"math > adds"},
			want:   []Annotation{{Path: "src/helper.ts", StartLine: 3, EndLine: 3, StartColumn: 9, EndColumn: 9, Level: LevelFailure, Title: "math > adds", Message: "AssertionError: expected 1 to be 2"}},
		},
		{
			name: "jest frames in node_modules before the test's",
			output: " FAIL  src/a.test.js\n  ● suite › works\n\n    TypeError: boom\n\n" +
				"      at fn (node_modules/lib/index.js:1:1)\n      at Object.<anonymous> (/workspace/src/a.test.js:5:10)\n\nTest Suites: 1 failed, 1 total\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"jest"},
			titles: []string{"suite › works"},
			want:   []Annotation{{Path: "src/a.test.js", StartLine: 5, EndLine: 5, StartColumn: 10, EndColumn: 10, Level: LevelFailure, Title: "suite › works", Message: "TypeError: boom"}},
		},
		{
			name: "tap: a suite's subtestsFailed, a todo, a plain not ok",
			output: "TAP version 13\n# Subtest: suite\n    # Subtest: inner\n    not ok 1 - inner\n      ---\n      location: '/workspace/t.js:3:3'\n      error: 'it''s not'\n      stack: |-\n        TestContext.<anonymous> (file:///workspace/my%20dir/t.js:4:5)\n      ...\n" +
				"not ok 1 - suite\n  ---\n  failureType: 'subtestsFailed'\n  error: '1 subtest failed'\n  ...\nnot ok 2 - later # TODO not yet\nnot ok 3 - plain\n1..3\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"tap"},
			titles: []string{"inner", "plain"},
			want:   []Annotation{{Path: "my dir/t.js", StartLine: 4, EndLine: 4, StartColumn: 5, EndColumn: 5, Level: LevelFailure, Title: "inner", Message: "it's not"}},
		},
		{
			name:   "tap location when the stack has no repo frame",
			output: "not ok 1 - x\n  ---\n  location: '/workspace/t.js:3:3'\n  error: |-\n    bad\n  stack: |-\n    node:internal/x:1:1\n  ...\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"tap"},
			titles: []string{"x"},
			want:   []Annotation{{Path: "t.js", StartLine: 3, EndLine: 3, StartColumn: 3, EndColumn: 3, Level: LevelFailure, Title: "x", Message: "bad"}},
		},
		{
			name: "node:test suite with a failing test",
			output: "▶ cart\n  ✖ counts (1.2ms)\n    AssertionError [ERR_ASSERTION]: nope\n        at TestContext.<anonymous> (file:///workspace/test/a.test.js:6:10)\n" +
				"✖ cart (3ms)\nℹ tests 1\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"node:test"},
			titles: []string{"counts"},
			want:   []Annotation{{Path: "test/a.test.js", StartLine: 6, EndLine: 6, StartColumn: 10, EndColumn: 10, Level: LevelFailure, Title: "counts", Message: "AssertionError [ERR_ASSERTION]: nope"}},
		},
		{
			name:   "uvu with a suite name",
			output: "  FAIL  cart  \"counts\"\n    Expected 1 to be 2\n    at Object.handler (/workspace/tests/cart.js:5:10)\n\n  Total:     1\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"uvu"},
			titles: []string{"cart › counts"},
			want:   []Annotation{{Path: "tests/cart.js", StartLine: 5, EndLine: 5, StartColumn: 10, EndColumn: 10, Level: LevelFailure, Title: "cart › counts", Message: "Expected 1 to be 2"}},
		},
		{
			name:   "mocha numbering must follow on",
			output: "  1 passing\n  1 failing\n\n  1) works:\n     Error: boom\n      at Context.<anonymous> (test/a.js:2:9)\n\n  3) not a block\n",
			tools:  []string{"mocha"},
			titles: []string{"works"},
			want:   []Annotation{{Path: "test/a.js", StartLine: 2, EndLine: 2, StartColumn: 9, EndColumn: 9, Level: LevelFailure, Title: "works", Message: "Error: boom"}},
		},
		{
			name:   "frames above the root, in node_modules and absolute elsewhere make no annotation",
			output: "  ● t\n\n    Error: x\n      at a (../outside.js:1:1)\n      at b (/workspace/node_modules/x/y.js:1:1)\n      at c (/usr/lib/z.js:1:1)\n",
			opts:   Options{Root: "/workspace"},
			tools:  []string{"jest"},
			titles: []string{"t"},
		},
		{
			name:   "generic fallback",
			output: "> build\n> node build.js\n\nstarting\nError: Cannot find module './missing'\n    at Module._resolveFilename (node:internal/modules/cjs/loader:1145:15)\n",
			tools:  []string{"generic"},
			titles: []string{"Error: Cannot find module './missing'"},
		},
		{
			name:   "nothing at all",
			output: "all good\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Parse(tt.output, tt.opts)
			if diff := cmp.Diff(tt.tools, res.Tools); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			var titles []string
			for _, f := range res.Failures {
				titles = append(titles, f.Title)
			}
			if diff := cmp.Diff(tt.titles, titles); diff != "" {
				t.Errorf("failure titles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, res.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRepoPath(t *testing.T) {
	tests := []struct {
		in, root, want string
		ok             bool
	}{
		{"src/a.ts", "", "src/a.ts", true},
		{"./src/../src/a.ts", "", "src/a.ts", true},
		{"/workspace/src/a.ts", "/workspace", "src/a.ts", true},
		{"/workspace/src/a.ts", "/workspace/", "src/a.ts", true},
		{"file:///workspace/src/a%20b.ts", "/workspace", "src/a b.ts", true},
		{"file://src/a.ts", "/workspace", "src/a.ts", true},
		{`src\win\a.ts`, "", "src/win/a.ts", true},
		{"/workspacex/a.ts", "/workspace", "", false},
		{"/workspace", "/workspace", "", false},
		{"/other/a.ts", "/workspace", "", false},
		{"/workspace/a.ts", "", "", false},
		{"../a.ts", "", "", false},
		{"..", "", "", false},
		{"/workspace/../etc/passwd", "/workspace", "", false},
		{"node_modules/x/a.js", "", "", false},
		{"/workspace/pkg/node_modules/x.js", "/workspace", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := repoPath(tt.in, Options{Root: tt.root})
			if got != tt.want || ok != tt.ok {
				t.Errorf("repoPath(%q, %q) = %q, %v; want %q, %v", tt.in, tt.root, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// tscErrors prints n tsc errors, one a line, at lines 1..n of src/a.ts.
func tscErrors(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "src/a.ts(%d,1): error TS2322: error number %d.\n", i, i)
	}
	return b.String()
}

func TestLimits(t *testing.T) {
	t.Run("DefaultMaxFailures", func(t *testing.T) {
		res := Parse(tscErrors(DefaultMaxFailures), Options{})
		if len(res.Failures) != DefaultMaxFailures || res.Omitted != 0 {
			t.Errorf("at the limit: %d failures, %d omitted", len(res.Failures), res.Omitted)
		}
		res = Parse(tscErrors(DefaultMaxFailures+1), Options{})
		if len(res.Failures) != DefaultMaxFailures || res.Omitted != 1 {
			t.Errorf("over the limit: %d failures, %d omitted", len(res.Failures), res.Omitted)
		}
		if len(res.Annotations) != DefaultMaxFailures+1 {
			t.Errorf("%d annotations, want one for each failure, omitted or not", len(res.Annotations))
		}
	})
	t.Run("MaxFailures", func(t *testing.T) {
		res := Parse(tscErrors(4), Options{MaxFailures: 3})
		if len(res.Failures) != 3 || res.Omitted != 1 {
			t.Errorf("%d failures, %d omitted; want 3, 1", len(res.Failures), res.Omitted)
		}
	})
	t.Run("DefaultMaxAnnotations", func(t *testing.T) {
		if n := len(Parse(tscErrors(DefaultMaxAnnotations), Options{}).Annotations); n != DefaultMaxAnnotations {
			t.Errorf("at the limit: %d annotations", n)
		}
		if n := len(Parse(tscErrors(DefaultMaxAnnotations+1), Options{}).Annotations); n != DefaultMaxAnnotations {
			t.Errorf("over the limit: %d annotations", n)
		}
		if n := len(Parse(tscErrors(5), Options{MaxAnnotations: 4}).Annotations); n != 4 {
			t.Errorf("MaxAnnotations 4: %d annotations", n)
		}
	})
	t.Run("MaxLineBytes", func(t *testing.T) {
		head := "src/a.ts(1,1): error TS2322: "
		at := head + strings.Repeat("x", MaxLineBytes-len(head))
		if n := len(Parse(at, Options{}).Annotations); n != 1 {
			t.Errorf("a line of MaxLineBytes: %d annotations, want 1", n)
		}
		if n := len(Parse(at+"x", Options{}).Annotations); n != 0 {
			t.Errorf("a line over MaxLineBytes: %d annotations, want 0", n)
		}
	})
	t.Run("MaxFailureLines", func(t *testing.T) {
		block := func(n int) string {
			var b strings.Builder
			b.WriteString("  ● t\n")
			for i := 2; i <= n; i++ {
				fmt.Fprintf(&b, "    line %d\n", i)
			}
			return b.String()
		}
		text := Parse(block(MaxFailureLines), Options{}).Failures[0].Text
		if n := strings.Count(text, "\n") + 1; n != MaxFailureLines || strings.Contains(text, "more line") {
			t.Errorf("at the limit: %d lines:\n%s", n, text)
		}
		text = Parse(block(MaxFailureLines+1), Options{}).Failures[0].Text
		lines := strings.Split(text, "\n")
		if len(lines) != MaxFailureLines+1 || lines[len(lines)-1] != "… 1 more line" {
			t.Errorf("over the limit: %d lines ending %q", len(lines), lines[len(lines)-1])
		}
	})
	t.Run("MaxTitleBytes", func(t *testing.T) {
		at := strings.Repeat("é", MaxTitleBytes/2)
		if got := oneLine(at); got != at {
			t.Errorf("a title of MaxTitleBytes was cut to %q", got)
		}
		got := oneLine(at + "x")
		if len(got) > MaxTitleBytes || !strings.HasSuffix(got, "…") {
			t.Errorf("a title over MaxTitleBytes: %d bytes %q", len(got), got)
		}
	})
	t.Run("MaxMessageLines", func(t *testing.T) {
		lines := make([]string, MaxMessageLines)
		for i := range lines {
			lines[i] = fmt.Sprint("l", i)
		}
		if got := message(lines); strings.Contains(got, "…") {
			t.Errorf("at the limit: %q", got)
		}
		if got := message(append(lines, "more")); !strings.HasSuffix(got, "\n…") || strings.Contains(got, "more") {
			t.Errorf("over the limit: %q", got)
		}
	})
	t.Run("MaxMessageBytes", func(t *testing.T) {
		at := strings.Repeat("x", MaxMessageBytes)
		if got := message([]string{at}); got != at {
			t.Errorf("a message of MaxMessageBytes was cut")
		}
		if got := message([]string{at + "x"}); len(got) > MaxMessageBytes || !strings.HasSuffix(got, "…") {
			t.Errorf("a message over MaxMessageBytes: %d bytes", len(got))
		}
	})
	t.Run("TailLines", func(t *testing.T) {
		var b strings.Builder
		for i := 1; i <= TailLines+1; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		got := Excerpt(b.String(), Result{}, 1<<20)
		if strings.Contains(got, "line 1\n") || !strings.HasPrefix(got, "line 2\n") || !strings.HasSuffix(got, fmt.Sprintf("line %d\n", TailLines+1)) {
			t.Errorf("want the last %d lines, got:\n%s", TailLines, got)
		}
	})
	t.Run("GenericMaxBlocks and context", func(t *testing.T) {
		var b strings.Builder
		for i := 1; i <= GenericMaxBlocks+1; i++ {
			for j := 0; j < GenericContextBefore+GenericContextAfter+2; j++ {
				fmt.Fprintf(&b, "block %d filler %d\n", i, j)
			}
			fmt.Fprintf(&b, "ERROR number %d\n", i)
		}
		res := Parse(b.String(), Options{})
		if len(res.Failures) != GenericMaxBlocks {
			t.Fatalf("%d generic failures, want %d", len(res.Failures), GenericMaxBlocks)
		}
		for i, f := range res.Failures {
			lines := strings.Split(f.Text, "\n")
			want := fmt.Sprint("ERROR number ", i+1)
			if len(lines) != GenericContextBefore+1+GenericContextAfter || lines[GenericContextBefore] != want {
				t.Errorf("block %d: %q, want %d lines of context before %q and %d after", i, lines, GenericContextBefore, want, GenericContextAfter)
			}
		}
	})
}
