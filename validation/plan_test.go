package validation

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPlanFromManifestSteps(t *testing.T) {
	const all = `{"scripts":{"build":"tsc","lint":"eslint .","typecheck":"tsc --noEmit","test":"vitest run","start":"node ."}}`
	tests := []struct {
		name  string
		data  string
		files []string
		opts  PlanOptions
		want  Plan
	}{
		{
			name:  "npm with a lockfile: npm ci, scripts in fixed order",
			data:  all,
			files: []string{"package-lock.json"},
			want: Plan{
				PackageManager: NPM, PackageManagerSource: "package-lock.json", Lockfile: "package-lock.json",
				Tool: ToolRequest{Manager: NPM, Source: SourceDefault},
				Steps: []Step{
					{Name: "install", Argv: []string{"npm", "ci", "--no-audit", "--no-fund"}, Network: NetworkRegistry, Timeout: DefaultInstallTimeout},
					{Name: "test", Argv: []string{"npm", "run", "test"}, Script: "vitest run", Network: NetworkNone, Timeout: DefaultStepTimeout},
					{Name: "typecheck", Argv: []string{"npm", "run", "typecheck"}, Script: "tsc --noEmit", Network: NetworkNone, Timeout: DefaultStepTimeout},
					{Name: "lint", Argv: []string{"npm", "run", "lint"}, Script: "eslint .", Network: NetworkNone, Timeout: DefaultStepTimeout},
					{Name: "build", Argv: []string{"npm", "run", "build"}, Script: "tsc", Network: NetworkNone, Timeout: DefaultStepTimeout},
				},
			},
		},
		{
			name: "npm without a lockfile: npm install",
			data: `{"scripts":{"test":"node --test"}}`,
			opts: PlanOptions{StepTimeout: time.Minute, InstallTimeout: 2 * time.Minute},
			want: Plan{
				PackageManager: NPM, PackageManagerSource: SourceDefault,
				Tool: ToolRequest{Manager: NPM, Source: SourceDefault},
				Steps: []Step{
					{Name: "install", Argv: []string{"npm", "install", "--no-audit", "--no-fund"}, Network: NetworkRegistry, Timeout: 2 * time.Minute},
					{Name: "test", Argv: []string{"npm", "run", "test"}, Script: "node --test", Network: NetworkNone, Timeout: time.Minute},
				},
				Notes: []string{"no npm lockfile: the install is not frozen and may resolve different versions"},
			},
		},
		{
			name:  "yarn berry frozen",
			data:  `{"packageManager":"yarn@4.4.1","scripts":{"lint":"eslint ."}}`,
			files: []string{"yarn.lock", ".yarnrc.yml"},
			want: Plan{
				PackageManager: YarnBerry, PackageManagerSource: SourcePackageManagerField, Lockfile: "yarn.lock",
				Tool: ToolRequest{Manager: YarnBerry, Version: "4.4.1", Source: SourcePackageManagerField},
				Steps: []Step{
					{Name: "install", Argv: []string{"yarn", "install", "--immutable"}, Network: NetworkRegistry, Timeout: DefaultInstallTimeout},
					{Name: "lint", Argv: []string{"yarn", "run", "lint"}, Script: "eslint .", Network: NetworkNone, Timeout: DefaultStepTimeout},
				},
			},
		},
		{
			name:  "only inconclusive scripts: no install",
			data:  `{"scripts":{"test":"echo \"Error: no test specified\" && exit 1","build":"true","postinstall":"node evil.js"}}`,
			files: []string{"package-lock.json"},
			want: Plan{
				PackageManager: NPM, PackageManagerSource: "package-lock.json", Lockfile: "package-lock.json",
				Tool: ToolRequest{Manager: NPM, Source: SourceDefault},
				Steps: []Step{
					{Name: "test", Argv: []string{"npm", "run", "test"}, Script: `echo "Error: no test specified" && exit 1`, Network: NetworkNone, Timeout: DefaultStepTimeout, Inconclusive: reasonNPMDefaultTest},
					{Name: "build", Argv: []string{"npm", "run", "build"}, Script: "true", Network: NetworkNone, Timeout: DefaultStepTimeout, Inconclusive: "the script can only succeed: it runs nothing but true"},
				},
			},
		},
		{
			name:  "inconclusive scripts stay in place beside runnable ones",
			data:  `{"scripts":{"test":"exit 0","lint":"eslint ."}}`,
			files: []string{"pnpm-lock.yaml"},
			want: Plan{
				PackageManager: PNPM, PackageManagerSource: "pnpm-lock.yaml", Lockfile: "pnpm-lock.yaml",
				// PlanFromManifest reads no file, so pnpm-lock.yaml's
				// lockfileVersion is unknown: the newest pnpm, with a note.
				Tool: ToolRequest{Manager: PNPM, Source: SourceDefault},
				Steps: []Step{
					{Name: "install", Argv: []string{"pnpm", "install", "--frozen-lockfile"}, Network: NetworkRegistry, Timeout: DefaultInstallTimeout},
					{Name: "test", Argv: []string{"pnpm", "run", "test"}, Script: "exit 0", Network: NetworkNone, Timeout: DefaultStepTimeout, Inconclusive: "the script can only succeed: it runs nothing but exit 0"},
					{Name: "lint", Argv: []string{"pnpm", "run", "lint"}, Script: "eslint .", Network: NetworkNone, Timeout: DefaultStepTimeout},
				},
				Notes: []string{"pnpm-lock.yaml has no lockfileVersion gilf read: the newest pnpm is used"},
			},
		},
		{
			name:  "hooks are notes, never steps",
			data:  `{"scripts":{"pretest":"npm run prepare","test":"tap","posttest":"rm -rf x","prebuild":"x","preinstall":"npx only-allow pnpm","postinstall":"node setup.js","prepare":"husky"}}`,
			files: []string{"package-lock.json"},
			want: Plan{
				PackageManager: NPM, PackageManagerSource: "package-lock.json", Lockfile: "package-lock.json",
				Tool: ToolRequest{Manager: NPM, Source: SourceDefault},
				Steps: []Step{
					{Name: "install", Argv: []string{"npm", "ci", "--no-audit", "--no-fund"}, Network: NetworkRegistry, Timeout: DefaultInstallTimeout},
					{Name: "test", Argv: []string{"npm", "run", "test"}, Script: "tap", Network: NetworkNone, Timeout: DefaultStepTimeout},
				},
				Notes: []string{
					"lifecycle hook scripts.pretest runs before test, inside the same step",
					"lifecycle hook scripts.posttest runs after test, inside the same step",
					"lifecycle hook scripts.preinstall runs during the install step, with the registry proxy as its only network",
					"lifecycle hook scripts.postinstall runs during the install step, with the registry proxy as its only network",
					"lifecycle hook scripts.prepare runs during the install step, with the registry proxy as its only network",
				},
			},
		},
		{
			name:  "ignore scripts and no network",
			data:  `{"scripts":{"test":"tap","postinstall":"node setup.js"}}`,
			files: []string{"package-lock.json"},
			opts:  PlanOptions{InstallNetwork: NetworkNone, InstallIgnoreScripts: true},
			want: Plan{
				PackageManager: NPM, PackageManagerSource: "package-lock.json", Lockfile: "package-lock.json",
				Tool: ToolRequest{Manager: NPM, Source: SourceDefault},
				Steps: []Step{
					{Name: "install", Argv: []string{"npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"}, Network: NetworkNone, Timeout: DefaultInstallTimeout},
					{Name: "test", Argv: []string{"npm", "run", "test"}, Script: "tap", Network: NetworkNone, Timeout: DefaultStepTimeout},
				},
				Notes: []string{
					"lifecycle scripts are skipped during the install step (--ignore-scripts)",
					"the install step runs with no network: dependencies must be vendored in the checkout",
				},
			},
		},
		{
			name: "yarn berry skips builds",
			data: `{"packageManager":"yarn@4.1.0","scripts":{"test":"vitest"}}`,
			opts: PlanOptions{InstallIgnoreScripts: true},
			want: Plan{
				PackageManager: YarnBerry, PackageManagerSource: SourcePackageManagerField,
				Tool: ToolRequest{Manager: YarnBerry, Version: "4.1.0", Source: SourcePackageManagerField},
				Steps: []Step{
					{Name: "install", Argv: []string{"yarn", "install", "--mode=skip-build"}, Network: NetworkRegistry, Timeout: DefaultInstallTimeout},
					{Name: "test", Argv: []string{"yarn", "run", "test"}, Script: "vitest", Network: NetworkNone, Timeout: DefaultStepTimeout},
				},
				Notes: []string{
					"lifecycle scripts are skipped during the install step (--mode=skip-build)",
					"no yarn-berry lockfile: the install is not frozen and may resolve different versions",
				},
			},
		},
		{
			name: "yarn berry does not run pre/post hooks",
			data: `{"packageManager":"yarn@4.1.0","scripts":{"pretest":"x","test":"vitest"}}`,
			want: Plan{
				PackageManager: YarnBerry, PackageManagerSource: SourcePackageManagerField,
				Tool: ToolRequest{Manager: YarnBerry, Version: "4.1.0", Source: SourcePackageManagerField},
				Steps: []Step{
					{Name: "install", Argv: []string{"yarn", "install"}, Network: NetworkRegistry, Timeout: DefaultInstallTimeout},
					{Name: "test", Argv: []string{"yarn", "run", "test"}, Script: "vitest", Network: NetworkNone, Timeout: DefaultStepTimeout},
				},
				Notes: []string{
					"lifecycle hook scripts.pretest is present; Yarn 2+ does not run it before test",
					"no yarn-berry lockfile: the install is not frozen and may resolve different versions",
				},
			},
		},
		{
			name:  "gap keeps the detected manager",
			data:  `{"name":"x"}`,
			files: []string{"bun.lock"},
			want: Plan{
				PackageManager: Bun, PackageManagerSource: "bun.lock", Lockfile: "bun.lock",
				Tool: ToolRequest{Manager: Bun, Version: "1", Source: "bun.lock"},
				Gap:  &Gap{Reason: GapNoScripts, Msg: "package.json has no non-empty test, typecheck, lint or build script"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanFromManifest([]byte(tc.data), tc.files, tc.opts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanOptionsDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   PlanOptions
		want PlanOptions
	}{
		{name: "zero", in: PlanOptions{}, want: PlanOptions{MaxManifestBytes: DefaultMaxManifestBytes, MaxManifestDepth: DefaultMaxManifestDepth, StepTimeout: DefaultStepTimeout, InstallTimeout: DefaultInstallTimeout, InstallNetwork: NetworkRegistry}},
		{name: "negative", in: PlanOptions{MaxManifestBytes: -1, MaxManifestDepth: -1, StepTimeout: -1, InstallTimeout: -1}, want: PlanOptions{MaxManifestBytes: DefaultMaxManifestBytes, MaxManifestDepth: DefaultMaxManifestDepth, StepTimeout: DefaultStepTimeout, InstallTimeout: DefaultInstallTimeout, InstallNetwork: NetworkRegistry}},
		{name: "set", in: PlanOptions{MaxManifestBytes: 10, MaxManifestDepth: 2, StepTimeout: time.Second, InstallTimeout: time.Hour, InstallNetwork: NetworkNone, InstallIgnoreScripts: true}, want: PlanOptions{MaxManifestBytes: 10, MaxManifestDepth: 2, StepTimeout: time.Second, InstallTimeout: time.Hour, InstallNetwork: NetworkNone, InstallIgnoreScripts: true}},
		// The plan never widens a network it does not know.
		{name: "unknown network", in: PlanOptions{InstallNetwork: NetworkHost}, want: PlanOptions{MaxManifestBytes: DefaultMaxManifestBytes, MaxManifestDepth: DefaultMaxManifestDepth, StepTimeout: DefaultStepTimeout, InstallTimeout: DefaultInstallTimeout, InstallNetwork: NetworkNone}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.in.withDefaults()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// writeFiles lays out a checkout: name → content.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildPlanReadsTheCheckout(t *testing.T) {
	dir := t.TempDir()
	manifest := `{"packageManager":"pnpm@10.12.1","scripts":{"test":"vitest run","lint":"biome check"}}`
	writeFiles(t, dir, map[string]string{
		"package.json":        manifest,
		"pnpm-lock.yaml":      "lockfileVersion: '9.0'\n",
		"pnpm-workspace.yaml": "packages: []\n",
	})
	got := BuildPlan(dir, PlanOptions{})
	want := PlanFromManifest([]byte(manifest), []string{"pnpm-lock.yaml"}, PlanOptions{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BuildPlan differs from PlanFromManifest (-want +got):\n%s", diff)
	}
	if got.Lockfile != "pnpm-lock.yaml" || len(got.Steps) != 3 || got.Steps[0].Argv[2] != "--frozen-lockfile" {
		t.Errorf("plan %+v", got)
	}
}

func TestBuildPlanHostileCheckouts(t *testing.T) {
	const valid = `{"scripts":{"test":"vitest"}}`
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		want    GapReason
		wantMsg string
		// forbid is text that must appear nowhere in the plan.
		forbid string
	}{
		{
			name:  "no package.json",
			setup: func(t *testing.T, dir string) {},
			want:  GapNoManifest, wantMsg: "no package.json",
		},
		{
			name: "only package.yaml",
			setup: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"package.yaml": "name: foo\n"})
			},
			want: GapNoManifest, wantMsg: "package.yaml is there",
		},
		{
			name: "Package.json is not package.json",
			setup: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"Package.json": valid})
			},
			want: GapNoManifest,
		},
		{
			name: "symlink to /etc/passwd",
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink("/etc/passwd", filepath.Join(dir, "package.json")); err != nil {
					t.Fatal(err)
				}
			},
			want: GapManifestSymlink, wantMsg: "symlink", forbid: "root:",
		},
		{
			name: "symlink to a valid manifest inside the checkout",
			setup: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"real.json": valid})
				if err := os.Symlink("real.json", filepath.Join(dir, "package.json")); err != nil {
					t.Fatal(err)
				}
			},
			want: GapManifestSymlink,
		},
		{
			name: "dangling symlink",
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink("nowhere.json", filepath.Join(dir, "package.json")); err != nil {
					t.Fatal(err)
				}
			},
			want: GapManifestSymlink,
		},
		{
			name: "directory named package.json",
			setup: func(t *testing.T, dir string) {
				if err := os.Mkdir(filepath.Join(dir, "package.json"), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFiles(t, filepath.Join(dir, "package.json"), map[string]string{"package.json": valid})
			},
			want: GapManifestNotRegular, wantMsg: "a directory",
		},
		{
			name: "FIFO named package.json",
			setup: func(t *testing.T, dir string) {
				if err := syscall.Mkfifo(filepath.Join(dir, "package.json"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: GapManifestNotRegular, wantMsg: "named pipe",
		},
		{
			name: "exactly the cap",
			setup: func(t *testing.T, dir string) {
				data := append([]byte(valid), bytes.Repeat([]byte(" "), DefaultMaxManifestBytes-len(valid))...)
				writeFiles(t, dir, map[string]string{"package.json": string(data)})
			},
			want: "",
		},
		{
			name: "one byte over the cap",
			setup: func(t *testing.T, dir string) {
				data := append([]byte(valid), bytes.Repeat([]byte(" "), DefaultMaxManifestBytes+1-len(valid))...)
				writeFiles(t, dir, map[string]string{"package.json": string(data)})
			},
			want: GapManifestTooLarge, wantMsg: "1048577 bytes",
		},
		{
			name: "a 50 MB sparse manifest is refused by size, not read",
			setup: func(t *testing.T, dir string) {
				f, err := os.Create(filepath.Join(dir, "package.json"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := f.Truncate(50 << 20); err != nil {
					t.Fatal(err)
				}
			},
			want: GapManifestTooLarge,
		},
		{
			name: "invalid JSON",
			setup: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"package.json": `{"name": "foo" "version": "1.0.0"}`})
			},
			want: GapManifestUnparseable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			done := make(chan Plan, 1)
			go func() { done <- BuildPlan(dir, PlanOptions{}) }()
			var p Plan
			select {
			case p = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("BuildPlan blocked")
			}
			got := GapReason("")
			if p.Gap != nil {
				got = p.Gap.Reason
			}
			if got != tc.want {
				t.Fatalf("gap = %+v, want reason %q", p.Gap, tc.want)
			}
			if tc.want == "" && len(p.Steps) == 0 {
				t.Errorf("no steps in %+v", p)
			}
			if tc.want != "" && len(p.Steps) != 0 {
				t.Errorf("a gap plan has steps: %+v", p.Steps)
			}
			if tc.wantMsg != "" && !strings.Contains(p.Gap.Msg, tc.wantMsg) {
				t.Errorf("gap message %q does not contain %q", p.Gap.Msg, tc.wantMsg)
			}
			all := strings.Join(p.Notes, "\n")
			if p.Gap != nil {
				all += p.Gap.Msg
			}
			if strings.Contains(all, dir) {
				t.Errorf("plan names the worker's path %s: %q", dir, all)
			}
			if tc.forbid != "" && strings.Contains(all, tc.forbid) {
				t.Errorf("plan contains %q", tc.forbid)
			}
		})
	}
}

func TestBuildPlanMissingCheckout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	p := BuildPlan(dir, PlanOptions{})
	if p.Gap == nil || p.Gap.Reason != GapManifestUnreadable {
		t.Fatalf("gap = %+v, want %s", p.Gap, GapManifestUnreadable)
	}
	if strings.Contains(p.Gap.Msg, dir) {
		t.Errorf("gap message names the worker's path: %q", p.Gap.Msg)
	}
}

func TestBuildPlanLockfiles(t *testing.T) {
	const manifest = `{"scripts":{"test":"vitest"}}`
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		want     Detection
		wantNote string
	}{
		{
			name: "regular lockfile",
			setup: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"yarn.lock": "# yarn lockfile v1\n"})
			},
			want: Detection{Manager: Yarn, Source: "yarn.lock", Lockfile: "yarn.lock"},
		},
		{
			name: "yarn.lock with .yarnrc.yml",
			setup: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"yarn.lock": "__metadata:\n", ".yarnrc.yml": "nodeLinker: node-modules\n"})
			},
			want: Detection{Manager: YarnBerry, Source: SourceYarnBerryLockfile, Lockfile: "yarn.lock"},
		},
		{
			name: "empty lockfile still counts",
			setup: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"package-lock.json": ""})
			},
			want: Detection{Manager: NPM, Source: "package-lock.json", Lockfile: "package-lock.json"},
		},
		{
			name: "symlinked lockfile counts, with a note, and is not followed",
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink("/etc/passwd", filepath.Join(dir, "pnpm-lock.yaml")); err != nil {
					t.Fatal(err)
				}
			},
			want:     Detection{Manager: PNPM, Source: "pnpm-lock.yaml", Lockfile: "pnpm-lock.yaml"},
			wantNote: "pnpm-lock.yaml is a symlink",
		},
		{
			name: "a directory named like a lockfile does not count",
			setup: func(t *testing.T, dir string) {
				if err := os.Mkdir(filepath.Join(dir, "bun.lock"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want:     Detection{Manager: NPM, Source: SourceDefault},
			wantNote: "bun.lock is a directory",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"package.json": manifest})
			tc.setup(t, dir)
			p := BuildPlan(dir, PlanOptions{})
			got := Detection{Manager: p.PackageManager, Source: p.PackageManagerSource, Lockfile: p.Lockfile}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("detection (-want +got):\n%s", diff)
			}
			if tc.wantNote != "" && !hasNote(p, tc.wantNote) {
				t.Errorf("no note containing %q in %q", tc.wantNote, p.Notes)
			}
			if hasNote(p, "root:") {
				t.Errorf("a note quotes the symlink target's content: %q", p.Notes)
			}
		})
	}
}

func TestBuildPlanGapKeepsLockfileDetection(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"bun.lockb": "\x00bin"})
	p := BuildPlan(dir, PlanOptions{})
	if p.Gap == nil || p.Gap.Reason != GapNoManifest {
		t.Fatalf("gap = %+v", p.Gap)
	}
	if p.PackageManager != Bun || p.Lockfile != "bun.lockb" {
		t.Errorf("manager %s lockfile %q, want bun and bun.lockb", p.PackageManager, p.Lockfile)
	}
}
