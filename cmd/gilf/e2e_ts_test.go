package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/store"
)

// tsRepo is a real TypeScript repository: typescript from the registry,
// a type error in src/add.ts at line tsErrorLine, and a node:test test
// whose assertion fails. Its package-lock.json is made by npm from the
// test registry.
func tsRepo(t *testing.T, w *pmWorldT) map[string]string {
	t.Helper()
	files := map[string]string{
		"package.json": `{
  "name": "ts-add",
  "version": "1.0.0",
  "private": true,
  "scripts": {
    "test": "node --test test/",
    "typecheck": "tsc --noEmit -p ."
  },
  "devDependencies": {
    "typescript": "5.9.3"
  }
}
`,
		"tsconfig.json": `{
  "compilerOptions": { "strict": true, "target": "es2022", "module": "commonjs", "noEmit": true },
  "include": ["src"]
}
`,
		"src/add.ts": "export function add(a: number, b: number): number {\n  return a + b;\n}\n\nexport const total: number = add(1, 2).toString();\n",
		"lib/add.js": "exports.add = (a, b) => a + b + 1;\n",
		"test/add.test.js": `const test = require('node:test');
const assert = require('node:assert');
const { add } = require('../lib/add.js');

test('add sums two numbers', () => {
  assert.strictEqual(add(1, 2), 3);
});
`,
	}
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = registryEnv(w.reg.URL, t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install --package-lock-only: %v\n%s", err, out)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	files["package-lock.json"] = string(lock)
	return files
}

// tsErrorLine is the line of src/add.ts that tsc reports.
const tsErrorLine = 5

// A real TypeScript repository with a type error and a failing test,
// through gilf serve and the local executor: the check run goes queued →
// in_progress → completed, its summary opens on the failing assertion,
// tsc's error is an annotation at src/add.ts line 5, and the review shows
// what broke before the record.
func TestServeE2ETypeScript(t *testing.T) {
	w := world(t)
	payload := openedPayload(t)
	top := payload.owner + "-" + payload.repo + "-" + payload.headSHA[:7]
	key := newAppKey(t)
	srv := fakeGitHub(t, key, payload, tarball(t, top, tsRepo(t, w)))
	dataDir := t.TempDir()
	p := startServe(t, serveEnv(t, srv, key, dataDir, append(pmEnv(w), "GILF_TOOLCHAIN_DIR=none")...))
	db := openTestStore(t, dataDir)

	code, rep := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v", code, rep)
	}
	st := waitJob(t, db, p, rep.Job, "done", func(s store.JobStatus) bool {
		return s.State != store.StateQueued && s.State != store.StateRunning
	})
	if st.State != store.StateDone {
		t.Fatalf("job ended %s (%s)", st.State, st.LastError)
	}

	// The check run's life, as GitHub saw it.
	var statuses []string
	for _, r := range srv.Requests() {
		if r.Method != "POST" && r.Method != "PATCH" || !strings.Contains(r.Path, "/check-runs") {
			continue
		}
		if s, ok := r.Body["status"].(string); ok && (len(statuses) == 0 || statuses[len(statuses)-1] != s) {
			statuses = append(statuses, s)
		}
	}
	if got := strings.Join(statuses, " → "); got != "queued → in_progress → completed" {
		t.Errorf("check run went %q, want queued → in_progress → completed", got)
	}
	checks := srv.CheckRuns()
	if len(checks) != 1 {
		t.Fatalf("%d check runs, want 1", len(checks))
	}
	run := checks[0]
	if run["conclusion"] != "failure" || run["started_at"] == nil {
		t.Errorf("check run %v: want failure with started_at", run)
	}
	out, _ := run["output"].(map[string]any)
	summary, _ := out["summary"].(string)
	if !strings.Contains(summary, "First failure") || !strings.Contains(summary, "add sums two numbers") ||
		!strings.Contains(summary, "Expected values to be strictly equal") {
		t.Errorf("summary does not open on the failing assertion:\n%s", summary)
	}
	if text, _ := out["text"].(string); !strings.Contains(text, "TS2322") {
		t.Errorf("check run text lacks tsc's error:\n%s", text)
	}
	id := int64(toFloat(run["id"]))
	var found []string
	for _, a := range srv.Annotations(id) {
		found = append(found, fmt.Sprintf("%v:%v %v", a["path"], a["start_line"], a["annotation_level"]))
	}
	if !strings.Contains(strings.Join(found, "\n"), fmt.Sprintf("src/add.ts:%d failure", tsErrorLine)) {
		t.Errorf("annotations %v lack src/add.ts:%d failure", found, tsErrorLine)
	}

	reviews := srv.Reviews()
	if len(reviews) != 1 {
		t.Fatalf("%d reviews, want 1", len(reviews))
	}
	body, _ := reviews[0]["body"].(string)
	first := strings.Index(body, "Expected values to be strictly equal")
	record := strings.Index(body, "### Validation record")
	if first < 0 || record < 0 || first > record {
		t.Errorf("the review does not show the failing assertion before the record:\n%s", body)
	}
	if strings.Contains(body, "\x1b") || strings.Contains(body, `\x1b`) {
		t.Errorf("the review shows terminal escapes")
	}
	if path := os.Getenv("GILF_TEST_KEEP_REVIEW"); path != "" {
		// For a person to render and look at (bench/render-review).
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
