package excerpt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// realToolTimeout bounds one real tool's run on its fixture.
const realToolTimeout = 2 * time.Minute

// jstoolsPackages are the packages scripts/test installs into jstools.
var jstoolsPackages = []string{"typescript", "eslint", "@eslint/js", "jest", "vite", "vitest", "mocha", "ava", "uvu"}

// jstoolsModules returns the node_modules directory scripts/test installs
// the real JS tools into, "$XDG_CACHE_HOME/gilf-test/jstools/node_modules"
// (XDG_CACHE_HOME defaulting to $HOME/.cache, as in scripts/test). It fails
// the test when a tool is missing.
func jstoolsModules(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache")
	}
	dir := filepath.Join(cache, "gilf-test", "jstools", "node_modules")
	for _, p := range jstoolsPackages {
		if _, err := os.Stat(filepath.Join(dir, p, "package.json")); err != nil {
			t.Fatalf("%s is missing from %s: run scripts/test --install-only", p, dir)
		}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// A realTool is one real tool run on its fixture project.
type realTool struct {
	name    string   // the golden's and the raw file's name
	project string   // the fixture under testdata/projects
	argv    []string // run with node, in the project's copy
	check   func(t *testing.T, res Result, excerpt string)
}

var realTools = []realTool{
	{"tsc", "tsc", []string{"node_modules/typescript/bin/tsc", "-p", "."}, checkTSC},
	{"tsc-pretty", "tsc", []string{"node_modules/typescript/bin/tsc", "-p", ".", "--pretty"}, checkTSC},
	{"eslint", "eslint", []string{"node_modules/eslint/bin/eslint.js", "."}, func(t *testing.T, res Result, _ string) {
		wantAnnotation(t, res, 0, "src/cart.js", 2, "no-unused-vars")
		wantAnnotation(t, res, 1, "src/cart.js", 6, "no-undef")
	}},
	{"jest", "jest", []string{"node_modules/jest/bin/jest.js", "--ci"}, func(t *testing.T, res Result, ex string) {
		if !strings.HasPrefix(ex, "● adds 1 + 2 to equal 3\n") {
			t.Errorf("the excerpt does not begin with the failing test's title:\n%s", ex)
		}
		wantContains(t, ex, "Expected: 3", "Received: -1", "at Object.toBe (sum.test.js:4:21)")
		wantAnnotation(t, res, 0, "sum.test.js", 4, "adds 1 + 2 to equal 3")
		wantAnnotation(t, res, 1, "sum.test.js", 8, "returns an object")
	}},
	{"vitest", "vitest", []string{"node_modules/vitest/vitest.mjs", "run"}, func(t *testing.T, res Result, ex string) {
		if !strings.HasPrefix(strings.TrimSpace(ex), "FAIL  sum.test.js > adds 1 + 2 to equal 3\n") {
			t.Errorf("the excerpt does not begin with the failing test:\n%s", ex)
		}
		wantContains(t, ex, "AssertionError: expected -1 to be 3", "- Expected", "+ Received")
		wantAnnotation(t, res, 0, "sum.test.js", 5, "adds 1 + 2 to equal 3")
	}},
	{"mocha", "mocha", []string{"node_modules/mocha/bin/mocha.js"}, func(t *testing.T, res Result, ex string) {
		wantContains(t, ex, "1) cart", "AssertionError [ERR_ASSERTION]", "1 frame in node_modules/node internals hidden")
		wantAnnotation(t, res, 0, "test/cart.test.js", 5, "cart counts items")
		wantAnnotation(t, res, 1, "test/cart.test.js", 11, "cart has a total")
	}},
	{"node-test", "nodetest", []string{"--test", "--test-reporter=spec"}, func(t *testing.T, res Result, ex string) {
		if len(res.Failures) != 2 {
			t.Errorf("%d failures, want 2 (node:test prints each twice)", len(res.Failures))
		}
		wantContains(t, ex, "✖ counts items", "2 !== 3", "frames in node_modules/node internals hidden")
		wantAnnotation(t, res, 0, "test/cart.test.js", 5, "counts items")
		wantAnnotation(t, res, 1, "test/cart.test.js", 13, "has a total")
	}},
	{"tap", "tap", []string{"--test", "--test-reporter=tap"}, func(t *testing.T, res Result, ex string) {
		wantContains(t, ex, "not ok 1 - counts items", "expected: 3", "frames in node_modules/node internals hidden")
		wantAnnotation(t, res, 0, "test/cart.test.js", 5, "counts items")
		wantAnnotation(t, res, 1, "test/cart.test.js", 13, "has a total")
	}},
	{"ava", "ava", []string{"node_modules/ava/entrypoints/cli.mjs", "--concurrency", "1", "--serial"}, func(t *testing.T, res Result, ex string) {
		// AVA's summary lines carry the message after the title
		// ("✘ [fail]: cart › has a total Value is not `true`"); every
		// failure is found, with its title alone, and the excerpt starts
		// at a title, never mid-stack.
		var titles []string
		for _, f := range res.Failures {
			titles = append(titles, f.Title)
		}
		slices.Sort(titles)
		want := []string{"cart › applies a discount", "cart › checks out", "cart › counts items", "cart › has a total",
			"cart › throws while adding", "order › ships the order"}
		if !slices.Equal(titles, want) || res.Omitted != 0 {
			t.Errorf("failures %q (%d omitted), want %q", titles, res.Omitted, want)
		}
		if !slices.Contains(want, strings.SplitN(ex, "\n", 2)[0]) {
			t.Errorf("the excerpt does not start at a failure's title:\n%s", ex)
		}
		wantContains(t, ex, "Difference")
		for _, a := range res.Annotations {
			if a.Title == "cart › counts items" && (a.Path != "cart.test.js" || a.StartLine != 4) {
				t.Errorf("counts items annotated at %s:%d, want cart.test.js:4", a.Path, a.StartLine)
			}
		}
	}},
	{"uvu", "uvu", []string{"node_modules/uvu/bin.js", "tests"}, func(t *testing.T, res Result, ex string) {
		wantContains(t, ex, `FAIL  "counts items"`, "frames in node_modules/node internals hidden")
		if i := strings.Index(ex, "── last lines"); strings.Contains(ex[:max(i, 0)], "node_modules/uvu") {
			t.Errorf("uvu's own frames are not collapsed:\n%s", ex)
		}
		wantAnnotation(t, res, 0, "tests/cart.js", 5, "counts items")
	}},
}

func checkTSC(t *testing.T, res Result, _ string) {
	wantAnnotation(t, res, 0, "src/total.ts", 6, "TS2322")
	wantAnnotation(t, res, 1, "src/user.ts", 5, "TS2353")
	if a := res.Annotations[0]; a.StartColumn != 9 || a.Level != LevelFailure {
		t.Errorf("annotation 0 at column %d, level %s; want 9, failure", a.StartColumn, a.Level)
	}
}

func wantAnnotation(t *testing.T, res Result, i int, path string, line int, title string) {
	t.Helper()
	if i >= len(res.Annotations) {
		t.Fatalf("%d annotations, want one at %s:%d", len(res.Annotations), path, line)
	}
	a := res.Annotations[i]
	if a.Path != path || a.StartLine != line || a.Title != title {
		t.Errorf("annotation %d = %s:%d %q, want %s:%d %q", i, a.Path, a.StartLine, a.Title, path, line, title)
	}
}

func wantContains(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("missing %q in:\n%s", sub, s)
		}
	}
}

// TestRealTools runs each real tool on its fixture, parses what it printed
// and compares with the goldens; -update rewrites the goldens and the raw
// captured outputs TestRaw parses.
func TestRealTools(t *testing.T) {
	modules := jstoolsModules(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range realTools {
		t.Run(tool.name, func(t *testing.T) {
			t.Parallel()
			root := copyProject(t, filepath.Join("testdata", "projects", tool.project), modules)
			output := runTool(t, root, node, tool.argv)
			if !strings.Contains(output, "\x1b") && tool.name != "tsc" && tool.name != "tap" {
				t.Errorf("%s printed no colour, so ANSI stripping is not exercised:\n%s", tool.name, output)
			}
			res := Parse(output, Options{Root: root, Exists: existsIn(root)})
			ex := Excerpt(output, res, goldenBudget)
			if strings.Contains(ex, "\x1b") || len(ex) > goldenBudget {
				t.Errorf("the excerpt has ESC or is over budget (%d bytes)", len(ex))
			}
			for _, a := range res.Annotations {
				if strings.Contains(a.Message+a.Title, "\x1b") {
					t.Errorf("annotation %+v has ESC", a)
				}
			}
			tool.check(t, res, ex)
			canon := func(s string) string {
				return strings.ReplaceAll(strings.ReplaceAll(s, root, rawRoot), modules, rawJSTools)
			}
			if *update {
				raw := filepath.Join("testdata", "raw", tool.name+".txt")
				if err := os.MkdirAll(filepath.Dir(raw), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(raw, []byte(canon(output)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			checkGolden(t, tool.name, canon(render(output, res)))
		})
	}
}

// copyProject copies the fixture at src to a temp dir and links each
// package of the jstools node_modules into its own node_modules, so that
// what the tools write there stays in the copy. It returns the copy's path
// with symlinks resolved, as the tools print it.
func copyProject(t *testing.T, src, modules string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "repo")
	if err := os.CopyFS(root, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(modules)
	if err != nil {
		t.Fatal(err)
	}
	nm := filepath.Join(root, "node_modules")
	if err := os.Mkdir(nm, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := os.Symlink(filepath.Join(modules, e.Name()), filepath.Join(nm, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// runTool runs node with argv in root, offline, and returns what it
// printed; the tool must fail, as its fixture does.
func runTool(t *testing.T, root, node string, argv []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), realToolTimeout)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, node, argv...)
	cmd.Dir = root
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + home,
		"FORCE_COLOR=1",
		"CI=true",
		"NO_UPDATE_NOTIFIER=1",
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v timed out after %v:\n%s", argv, realToolTimeout, out.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("%v: %v, want it to fail:\n%s", argv, err, out.String())
	}
	return out.String()
}
