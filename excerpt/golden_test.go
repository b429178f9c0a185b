package excerpt

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden and raw files under testdata")

// goldenBudget is the budget the goldens render Excerpt with.
const goldenBudget = 3000

// rawRoot is the Root the raw captured outputs are written for: the temp
// copy's path becomes it.
const rawRoot = "/workspace"

// rawJSTools stands for the jstools directory in the captured outputs.
const rawJSTools = "/cache/jstools/node_modules"

// volatile matches what changes from run to run in rendered text: timings
// and clock times.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`duration_ms:? [\d.]+`), "duration_ms <n>"},
	{regexp.MustCompile(`Start at +\S+`), "Start at <time>"},
	{regexp.MustCompile(`\b\d+(?:\.\d+)? ?m?s\b`), "<n>ms"},
}

// normalize makes rendered text stable across runs.
func normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// render writes a Result and its excerpt as the text of a golden file.
func render(output string, res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "== tools: %s\n", strings.Join(res.Tools, " "))
	fmt.Fprintf(&b, "== failures (%d, %d omitted)\n", len(res.Failures), res.Omitted)
	for i, f := range res.Failures {
		fmt.Fprintf(&b, "%d. [%s] %q at %s:%d\n", i+1, f.Tool, f.Title, f.Path, f.Line)
	}
	fmt.Fprintf(&b, "== annotations (%d)\n", len(res.Annotations))
	for _, a := range res.Annotations {
		fmt.Fprintf(&b, "%s %s:%d-%d:%d-%d %q\n", a.Level, a.Path, a.StartLine, a.EndLine, a.StartColumn, a.EndColumn, a.Title)
		for l := range strings.SplitSeq(a.Message, "\n") {
			fmt.Fprintf(&b, "    | %s\n", l)
		}
	}
	fmt.Fprintf(&b, "== excerpt (budget %d)\n", goldenBudget)
	b.WriteString(Excerpt(output, res, goldenBudget))
	return normalize(b.String())
}

// checkGolden compares got with testdata/golden/name.txt, or rewrites it
// with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test ./excerpt -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test ./excerpt -update rewrites it):\n%s", file, diff)
	}
}

// existsIn is an Options.Exists for a checkout at dir.
func existsIn(dir string) func(string) bool {
	return func(p string) bool {
		_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
		return err == nil
	}
}

// TestRaw parses the outputs captured from the real tools, without the
// tools, and compares with the same goldens as TestRealTools.
func TestRaw(t *testing.T) {
	for _, tool := range realTools {
		t.Run(tool.name, func(t *testing.T) {
			if *update {
				t.Log("TestRealTools rewrites the raw files")
				return
			}
			raw, err := os.ReadFile(filepath.Join("testdata", "raw", tool.name+".txt"))
			if err != nil {
				t.Fatalf("%v (go test ./excerpt -update writes it)", err)
			}
			output := string(raw)
			res := Parse(output, Options{Root: rawRoot, Exists: existsIn(filepath.Join("testdata", "projects", tool.project))})
			tool.check(t, res, Excerpt(output, res, goldenBudget))
			checkGolden(t, tool.name, render(output, res))
		})
	}
}
