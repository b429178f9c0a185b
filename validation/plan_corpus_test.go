package validation

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/internal/shared"
)

// corpusRow is one row of shared/data/package-json/index.tsv.
type corpusRow struct {
	file           string
	files          []string // package-manager files found next to it
	packageManager string   // "-" when none
	present        map[string]string
	hooks          []string
	dupKeys        []string
	bytes          int64
}

func readCorpusIndex(t *testing.T) []corpusRow {
	t.Helper()
	f, err := os.Open(shared.Data(t, "package-json", "index.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var header []string
	var rows []corpusRow
	list := func(s string) []string {
		if s == "-" || s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if header == nil {
			header = cols
			continue
		}
		if len(cols) != len(header) {
			t.Fatalf("index.tsv row has %d columns, header %d: %q", len(cols), len(header), cols)
		}
		col := map[string]string{}
		for i, h := range header {
			col[h] = cols[i]
		}
		n, err := strconv.ParseInt(col["bytes"], 10, 64)
		if err != nil {
			t.Fatalf("bytes %q: %v", col["bytes"], err)
		}
		rows = append(rows, corpusRow{
			file:           col["file"],
			files:          list(col["pm_files_in_dir"]),
			packageManager: col["packageManager"],
			present:        map[string]string{"test": col["test"], "typecheck": col["typecheck"], "lint": col["lint"], "build": col["build"]},
			hooks:          list(col["hooks"]),
			dupKeys:        list(col["dup_keys"]),
			bytes:          n,
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// corpusExpect is what gilf must choose for each corpus file, written by
// hand from the row and SPEC §3.2.
type corpusExpect struct {
	pm       PackageManager
	source   string
	lockfile string
	gap      GapReason
	inconcl  []string // selected scripts that are inconclusive
}

func corpusExpectations() map[string]corpusExpect {
	field := SourcePackageManagerField
	return map[string]corpusExpect{
		"vitejs__vite.json":            {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"vuejs__core.json":             {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"sveltejs__svelte.json":        {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"pmndrs__zustand.json":         {pm: PNPM, source: field, lockfile: LockfilePNPM}, // package-lock.json too: field wins
		"colinhacks__zod.json":         {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"egoist__tsup.json":            {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"unjs__ufo.json":               {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"shadcn-ui__ui.json":           {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"t3-oss__create-t3-app.json":   {pm: PNPM, source: field, lockfile: LockfilePNPM},
		"reduxjs__redux.json":          {pm: YarnBerry, source: field, lockfile: LockfileYarn},
		"nodejs__corepack.json":        {pm: YarnBerry, source: field, lockfile: LockfileYarn},
		"honojs__hono.json":            {pm: Bun, source: field, lockfile: LockfileBun},
		"elysiajs__elysia.json":        {pm: Bun, source: LockfileBun, lockfile: LockfileBun},
		"expressjs__express.json":      {pm: NPM, source: SourceDefault},
		"eslint__eslint.json":          {pm: NPM, source: SourceDefault},
		"isaacs__rimraf.json":          {pm: NPM, source: LockfileNPM, lockfile: LockfileNPM},
		"cloudflare__sandbox-sdk.json": {pm: NPM, source: field, lockfile: LockfileNPM},
		// npm's default test script: recorded, not run; nothing else runs.
		"TooTallNate__util-deprecate.json": {pm: NPM, source: SourceDefault, inconcl: []string{"test"}},
		// Not at a repo root; no test script, only build.
		"jonasschmedtmann__complete-javascript-course__17-final.json": {pm: NPM, source: LockfileNPM, lockfile: LockfileNPM},
		// Duplicate scripts.prebuild and scripts.vercel-build: last wins.
		"SandeepVashishtha__Eventra@2a10080b.json": {pm: NPM, source: LockfileNPM, lockfile: LockfileNPM},
		// 1,083,809 bytes: over the 1 MiB cap, refused before parsing, so
		// its packageManager field is never read: lockfiles decide.
		"gitkraken__vscode-gitlens.json": {pm: PNPM, source: LockfilePNPM, lockfile: LockfilePNPM, gap: GapManifestTooLarge},
	}
}

// TestPlanCorpus builds the plan of every real package.json in the shared
// corpus from a real checkout directory (the file plus the lockfile names
// its row lists) and checks it against the row.
func TestPlanCorpus(t *testing.T) {
	rows := readCorpusIndex(t)
	expect := corpusExpectations()
	if len(rows) != len(expect) {
		t.Errorf("index.tsv has %d rows, the test expects %d", len(rows), len(expect))
	}
	for _, row := range rows {
		t.Run(row.file, func(t *testing.T) {
			want, ok := expect[row.file]
			if !ok {
				t.Fatalf("no expectation for %s", row.file)
			}
			data, err := os.ReadFile(shared.Data(t, "package-json", row.file))
			if err != nil {
				t.Fatal(err)
			}
			// index.tsv says hono is 23,613 bytes; the stored file (ASCII,
			// LF line ends) is 23,611. The row is off; the file is the data.
			rowBytes := map[string]int64{"honojs__hono.json": 23611}
			if n, ok := rowBytes[row.file]; ok {
				row.bytes = n
			}
			if int64(len(data)) != row.bytes {
				t.Errorf("file is %d bytes, the row says %d", len(data), row.bytes)
			}

			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"package.json": string(data)})
			for _, name := range row.files {
				writeFiles(t, dir, map[string]string{name: ""})
			}
			p := BuildPlan(dir, PlanOptions{})
			if diff := cmp.Diff(PlanFromManifest(data, row.files, PlanOptions{}), p); diff != "" {
				t.Errorf("BuildPlan and PlanFromManifest differ (-pure +dir):\n%s", diff)
			}

			got := corpusExpect{pm: p.PackageManager, source: p.PackageManagerSource, lockfile: p.Lockfile}
			if p.Gap != nil {
				got.gap = p.Gap.Reason
			}
			var gotSteps []string
			for _, s := range p.Steps {
				gotSteps = append(gotSteps, s.Name)
				if s.Inconclusive != "" {
					got.inconcl = append(got.inconcl, s.Name)
				}
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(corpusExpect{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}

			// The steps the row predicts: install (unless nothing runnable),
			// then every script the row marks "yes", in the fixed order.
			var wantSteps []string
			if want.gap == "" {
				for _, name := range ScriptNames {
					switch row.present[name] {
					case "yes":
						wantSteps = append(wantSteps, name)
					case "absent", "EMPTY":
					default:
						t.Fatalf("row column %s = %q", name, row.present[name])
					}
				}
				if len(want.inconcl) < len(wantSteps) {
					wantSteps = append([]string{StepInstall}, wantSteps...)
				}
			}
			if diff := cmp.Diff(wantSteps, gotSteps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}

			// The row's packageManager column is what the manifest says.
			m, gap := parseManifest(data, DefaultMaxManifestDepth)
			if gap != nil {
				t.Fatalf("parse: %+v", gap)
			}
			if rowPM := strings.TrimPrefix(row.packageManager, "-"); rowPM != m.packageManager {
				t.Errorf("packageManager %q, the row says %q", m.packageManager, row.packageManager)
			}

			if p.Gap != nil {
				return
			}
			// Every hook the row lists that touches a planned step is noted.
			for _, h := range row.hooks {
				relevant := slices.Contains(installLifecycle(), h) && slices.Contains(gotSteps, StepInstall)
				for _, s := range gotSteps {
					relevant = relevant || h == "pre"+s || h == "post"+s
				}
				if relevant && !hasNote(p, "scripts."+h+" ") {
					t.Errorf("no note for hook %s: %q", h, p.Notes)
				}
			}
			for _, k := range row.dupKeys {
				if !hasNote(p, `duplicate key "`+k+`"`) {
					t.Errorf("no note for duplicate key %s: %q", k, p.Notes)
				}
			}
		})
	}
}

// TestPlanEdgeFiles checks every file of package-json/edge (parser test
// fixtures of npm, pnpm, eslint and others; edge/sources.tsv names them).
func TestPlanEdgeFiles(t *testing.T) {
	tests := map[string]struct {
		gap     GapReason
		steps   []string
		inconcl []string
		note    string
	}{
		"eslint-plugin-package-json__valid-scripts__script-empty-and-whitespace-keys.json": {gap: GapNoScripts},
		"eslint-plugin-package-json__valid-scripts__script-empty-key.json":                 {gap: GapNoScripts},
		"eslint-plugin-package-json__valid-scripts__script-value-empty-string.json":        {gap: GapNoScripts},
		"eslint-plugin-package-json__valid-scripts__script-value-number.json":              {gap: GapNoScripts, note: "scripts.invalid is a number, not a string"},
		"eslint-plugin-package-json__valid-scripts__scripts-null.json":                     {gap: GapScriptsInvalid},
		"eslint-plugin-package-json__valid-scripts__scripts-string.json":                   {gap: GapScriptsInvalid},
		"eslint__config-file-broken-package-json.json":                                     {gap: GapManifestUnparseable},
		"eslint__ignored-paths-broken-package-json.json":                                   {gap: GapManifestUnparseable},
		"normalize-package-data__badscripts-string.json":                                   {gap: GapScriptsInvalid},
		"npm-cli__arborist-bad.json":                                                       {gap: GapManifestUnparseable},
		"npm-cli__arborist-dev-deps-npm-default-test.json":                                 {steps: []string{"test"}, inconcl: []string{"test"}},
		"npm-cli__arborist-empty-foo.json":                                                 {gap: GapManifestUnparseable},
		"npm-package-json-lint__no-duplicate-properties__dup-nested-devDependencies.json":  {gap: GapNoScripts, note: `duplicate key "eslint" in devDependencies`},
		"npm-package-json-lint__no-duplicate-properties__no-dups.json":                     {gap: GapNoScripts},
		"pnpm__commented-package.json5":                                                    {gap: GapManifestUnparseable},
		"pnpm__invalid-package-json.json":                                                  {gap: GapManifestUnparseable},
		"pnpm__package.yaml":                                                               {gap: GapManifestUnparseable},
		"read-package-json__bom.json":                                                      {gap: GapNoScripts}, // parses: the BOM is stripped
		"read-package-json__indexjs-bad.json":                                              {gap: GapManifestUnparseable},
		"vite__utf8-bom-package.json":                                                      {gap: GapNoScripts}, // parses: the BOM is stripped
	}
	entries, err := os.ReadDir(shared.Data(t, "package-json", "edge"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		if e.Name() == "sources.tsv" {
			continue
		}
		seen++
		t.Run(e.Name(), func(t *testing.T) {
			want, ok := tests[e.Name()]
			if !ok {
				t.Fatalf("no expectation for edge file %s", e.Name())
			}
			data, err := os.ReadFile(shared.Data(t, "package-json", "edge", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			p := PlanFromManifest(data, nil, PlanOptions{})
			var gap GapReason
			if p.Gap != nil {
				gap = p.Gap.Reason
			}
			var steps, inconcl []string
			for _, s := range p.Steps {
				steps = append(steps, s.Name)
				if s.Inconclusive != "" {
					inconcl = append(inconcl, s.Name)
				}
			}
			if gap != want.gap || !slices.Equal(steps, want.steps) || !slices.Equal(inconcl, want.inconcl) {
				t.Errorf("gap %q steps %v inconclusive %v; want gap %q steps %v inconclusive %v (notes %q)",
					gap, steps, inconcl, want.gap, want.steps, want.inconcl, p.Notes)
			}
			if want.note != "" && !hasNote(p, want.note) {
				t.Errorf("no note containing %q: %q", want.note, p.Notes)
			}
		})
	}
	if seen != len(tests) {
		t.Errorf("edge/ has %d files, the table %d", seen, len(tests))
	}
}

// TestPlanEdgePackageYAMLBesideNoManifest: pnpm reads package.yaml, gilf
// reads only package.json, and says so.
func TestPlanEdgePackageYAMLBesideNoManifest(t *testing.T) {
	data, err := os.ReadFile(shared.Data(t, "package-json", "edge", "pnpm__package.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := BuildPlan(dir, PlanOptions{})
	if p.Gap == nil || p.Gap.Reason != GapNoManifest || !strings.Contains(p.Gap.Msg, "package.yaml") {
		t.Errorf("gap = %+v, want no_manifest naming package.yaml", p.Gap)
	}
}
