package excerpt

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// readRaw reads a captured output of testdata/raw.
func readRaw(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "raw", name+".txt"))
	if err != nil {
		t.Fatalf("%v (go test ./excerpt -update writes it)", err)
	}
	return string(b)
}

// checkExcerpt checks what every excerpt must be.
func checkExcerpt(t *testing.T, ex string, budget int) {
	t.Helper()
	if len(ex) > max(budget, 0) {
		t.Errorf("budget %d: excerpt is %d bytes", budget, len(ex))
	}
	if !utf8.ValidString(ex) {
		t.Errorf("budget %d: excerpt is not UTF-8", budget)
	}
	if strings.ContainsRune(ex, 0x1b) {
		t.Errorf("budget %d: excerpt has ESC", budget)
	}
}

func TestExcerptBudgets(t *testing.T) {
	for _, name := range []string{"jest", "mocha", "node-test", "tsc-pretty", "uvu"} {
		t.Run(name, func(t *testing.T) {
			output := readRaw(t, name)
			res := Parse(output, Options{Root: rawRoot})
			whole := Excerpt(output, res, 1<<20) + tailHeader + "\n"
			stripped := StripANSI(output)
			for budget := -1; budget <= len(whole)+10; budget++ {
				ex := Excerpt(output, res, budget)
				checkExcerpt(t, ex, budget)
				if budget <= 0 && ex != "" {
					t.Errorf("budget %d: %q", budget, ex)
				}
				// Cut on line boundaries: every line is a line of the whole
				// excerpt, or the one the first failure or the tail were cut in.
				for _, l := range strings.Split(strings.TrimSuffix(ex, "\n"), "\n") {
					if !strings.Contains(whole, l) && !strings.HasSuffix(l, "…") && !strings.HasPrefix(l, "…") &&
						!strings.Contains(stripped, strings.TrimPrefix(l, "…")) {
						t.Fatalf("budget %d: line %q is in no excerpt", budget, l)
					}
				}
			}
		})
	}
}

func TestExcerptShape(t *testing.T) {
	output := readRaw(t, "jest")
	res := Parse(output, Options{Root: rawRoot})
	if len(res.Failures) != 2 {
		t.Fatalf("%d failures", len(res.Failures))
	}
	t.Run("both failures and the tail", func(t *testing.T) {
		ex := Excerpt(output, res, 1<<20)
		first := strings.Index(ex, "● adds 1 + 2 to equal 3")
		second := strings.Index(ex, "● returns an object")
		tail := strings.Index(ex, tailHeader)
		if first != 0 || second < first || tail < second || strings.Contains(ex, "more failure") {
			t.Errorf("out of order (%d, %d, %d):\n%s", first, second, tail, ex)
		}
		if !strings.HasSuffix(ex, "Ran all test suites.\n") {
			t.Errorf("the tail does not end the excerpt:\n%s", ex)
		}
	})
	t.Run("the second failure cut", func(t *testing.T) {
		budget := len(res.Failures[0].Text) + 40
		ex := Excerpt(output, res, budget)
		if !strings.HasPrefix(ex, res.Failures[0].Text+"\n") || !strings.Contains(ex, "… and 1 more failure\n") ||
			strings.Contains(ex, "● returns an object") {
			t.Errorf("budget %d:\n%s", budget, ex)
		}
	})
	t.Run("omitted failures are counted", func(t *testing.T) {
		r := res
		r.Omitted = 3
		if ex := Excerpt(output, r, 1<<20); !strings.Contains(ex, "… and 3 more failures\n") {
			t.Errorf("\n%s", ex)
		}
	})
	t.Run("the first failure cut on a line boundary", func(t *testing.T) {
		ex := Excerpt(output, res, 100)
		if !strings.HasPrefix(ex, "● adds 1 + 2 to equal 3\n") || !strings.HasSuffix(ex, "… and 1 more failure\n") {
			t.Errorf("\n%s", ex)
		}
	})
	t.Run("generic fallback with an empty result", func(t *testing.T) {
		out := "\x1b[31mstarting\x1b[0m\nok 1\nTypeError: x is not a function\n    at f (/workspace/a.js:1:1)\n" +
			"    at Module._compile (node:internal/modules/cjs/loader:1:1)\n    at g (/workspace/node_modules/y/z.js:1:1)\nline\nline\n" +
			strings.Repeat("filler\n", 10) + "the end\n"
		ex := Excerpt(out, Result{}, 1<<20)
		want := "starting\nok 1\nTypeError: x is not a function\n    at f (/workspace/a.js:1:1)\n    … 2 frames in node_modules/node internals hidden\n\n" + tailHeader + "\n"
		if !strings.HasPrefix(ex, want) || !strings.HasSuffix(ex, "filler\nthe end\n") {
			t.Errorf("got\n%s\nwant it to begin\n%s", ex, want)
		}
	})
	t.Run("the tail alone keeps the end of an overlong last line", func(t *testing.T) {
		out := "first\n" + strings.Repeat("é", 100) + "END\n"
		ex := Excerpt(out, Result{}, 20)
		checkExcerpt(t, ex, 20)
		if !strings.HasPrefix(ex, "…") || !strings.HasSuffix(ex, "éEND\n") {
			t.Errorf("%q", ex)
		}
	})
}

// hostile are inputs an attacker controls: the output of a PR's scripts.
func hostile() map[string]string {
	rnd := make([]byte, 1<<20)
	x := uint32(2463534242)
	for i := range rnd {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		rnd[i] = byte(x)
	}
	return map[string]string{
		"1 MB of random bytes":       string(rnd),
		"a 1 MB line":                strings.Repeat("error TS2322 (1,1): ● ✖ not ok ", 1<<15),
		"no newline, 1 MB of frames": strings.Repeat("at x (node_modules/a.js:1:1) ", 1<<15),
		"1 MB of newlines":           strings.Repeat("\n", 1<<20),
		"1 MB of jest titles":        strings.Repeat("  ● t\n", 1<<18),
		"1 MB of tap not ok":         strings.Repeat("not ok 1 - x\n  ---\n", 1<<16),
		"an unterminated tap yaml":   "not ok 1 - x\n  ---\n" + strings.Repeat("  error: |-\n    x\n", 1<<16),
		"1 MB of errors":             strings.Repeat("error\n", 1<<17),
		"1 MB of stylish lines":      "/workspace/a.js\n" + strings.Repeat("  1:1  error  x  r\n", 1<<16),
		"mocha items":                "  1 failing\n" + strings.Repeat("  1) a\n  2) b\n", 1<<16),
		"1 MB of ESC and CR":         strings.Repeat("\x1b[31m\r\x1b]8;;", 1<<16),
		"invalid UTF-8":              strings.Repeat("\xff\xc3(\xe2\x82 FAIL \"x\"\n", 1<<15),
		"ava titles":                 strings.Repeat("✘ [fail]: t\nt\na.js:1\n", 1<<15),
		"ava titles and blank lines": "✘ [fail]: t\n" + strings.Repeat("t\n\n\n", 1<<17),
		"vitest FAIL lines":          "⎯ Failed Tests 1 ⎯\n" + strings.Repeat(" FAIL  a > b\n ❯ a.js:1:1\n", 1<<15),
		"node:test nesting":          strings.Repeat("✖ a\n  x\n", 1<<16) + strings.Repeat(" ", 1<<12) + "✖ b\n",
		"tsc pretty blocks":          strings.Repeat("a.ts:1:1 - error TS1: x\n\n1 x\n  ~\n", 1<<15),
	}
}

// TestHostile: no hostile input makes Parse and Excerpt run away. The
// bound is on the CPU time this process spent (user and system), not the
// wall clock: the test is not parallel, so nothing else in the process
// runs meanwhile, and a loaded machine that gives it a tenth of a core
// stretches the wall clock, never the work. A quadratic parser spends
// minutes of CPU on these inputs; a linear one, a second or two under -race.
func TestHostile(t *testing.T) {
	for name, in := range hostile() {
		t.Run(name, func(t *testing.T) {
			start := processCPU(t)
			res := Parse(in, Options{Root: "/workspace"})
			ex := Excerpt(in, res, 60000)
			if d := processCPU(t) - start; d > maxHostileCPU {
				t.Errorf("took %v of CPU, more than %v", d, maxHostileCPU)
			}
			checkResult(t, res)
			checkExcerpt(t, ex, 60000)
		})
	}
}

// maxHostileCPU bounds the CPU time one hostile input may cost.
const maxHostileCPU = 20 * time.Second

// processCPU is the CPU time (user and system) this process has spent.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkResult checks the invariants of every Result.
func checkResult(t *testing.T, res Result) {
	t.Helper()
	if len(res.Failures) > DefaultMaxFailures || len(res.Annotations) > DefaultMaxAnnotations {
		t.Errorf("%d failures, %d annotations", len(res.Failures), len(res.Annotations))
	}
	for _, a := range res.Annotations {
		bad := a.Path == "" || strings.HasPrefix(a.Path, "/") || a.Path == ".." || strings.HasPrefix(a.Path, "../") ||
			strings.Contains("/"+a.Path+"/", "/node_modules/") || a.StartLine < 1 || a.EndLine < a.StartLine ||
			(a.StartLine != a.EndLine && (a.StartColumn != 0 || a.EndColumn != 0)) ||
			strings.Contains(a.Title, "\n") || len(a.Title) > MaxTitleBytes || len(a.Message) > MaxMessageBytes
		if bad || strings.ContainsRune(a.Title+a.Message+a.Path, 0x1b) || !utf8.ValidString(a.Title+a.Message+a.Path) {
			t.Errorf("bad annotation %+v", a)
		}
	}
	for _, f := range res.Failures {
		if strings.ContainsRune(f.Text+f.Title, 0x1b) || strings.Contains(f.Title, "\n") || len(f.Title) > MaxTitleBytes ||
			!utf8.ValidString(f.Text+f.Title) {
			t.Errorf("bad failure %q", f.Title)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tool := range realTools {
		b, err := os.ReadFile(filepath.Join("testdata", "raw", tool.name+".txt"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), 2000)
	}
	for _, s := range []string{"", "\x1b", "\r", "not ok 1\n  ---\n", "  ● \n", "✖ \n  x\n", "a.ts(1,1): error TS1: x"} {
		f.Add(s, 100)
	}
	f.Fuzz(func(t *testing.T, output string, budget int) {
		if len(output) > 1<<16 {
			return
		}
		budget %= 1 << 16
		res := Parse(output, Options{Root: "/workspace"})
		checkResult(t, res)
		ex := Excerpt(output, res, budget)
		if budget > 0 {
			checkExcerpt(t, ex, budget)
		} else if ex != "" {
			t.Errorf("budget %d: %q", budget, ex)
		}
		if s := StripANSI(output); strings.ContainsRune(s, 0x1b) || !utf8.ValidString(s) {
			t.Errorf("StripANSI left ESC or invalid UTF-8")
		}
	})
}

// BenchmarkParse parses 1 MB of the real tools' outputs, repeated.
func BenchmarkParse(b *testing.B) {
	var all strings.Builder
	for _, tool := range realTools {
		all.WriteString(readRaw(b, tool.name))
	}
	var in strings.Builder
	for in.Len() < 1<<20 {
		in.WriteString(all.String())
	}
	output := in.String()[:1<<20]
	b.SetBytes(int64(len(output)))
	b.ReportAllocs()
	for b.Loop() {
		res := Parse(output, Options{Root: rawRoot})
		_ = Excerpt(output, res, 60000)
	}
}
