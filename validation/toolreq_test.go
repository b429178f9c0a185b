package validation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/internal/shared"
)

func TestPlanToolRequest(t *testing.T) {
	const sha512 = "sha512.1c67b3b359b2d408119ba1ed289f34b8fc3c6873412bec6fd264fbdc82489e510fcbecb9ce9d22dae7f3b76269d8441046014bdca53b9979cd7a561ad631b800"
	const sha224 = "sha224.88b7a7244bbd9040380c417f7eb556d85c67640b651f113cb4c72113"
	berry := func(v int) CheckoutFacts { return CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: v} }
	tests := []struct {
		name     string
		field    string
		files    []string
		facts    CheckoutFacts
		want     ToolRequest
		wantPM   PackageManager // when it differs from want.Manager's default reading
		wantNote string
	}{
		// The packageManager field.
		{name: "exact pnpm", field: "pnpm@10.14.0", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "6.0"},
			want: ToolRequest{Manager: PNPM, Version: "10.14.0", Source: SourcePackageManagerField}},
		{name: "sha512 hash", field: "pnpm@10.33.4+" + sha512,
			want: ToolRequest{Manager: PNPM, Version: "10.33.4", Hash: sha512, Source: SourcePackageManagerField}},
		{name: "sha224 hash on yarn", field: "yarn@4.14.1+" + sha224, files: []string{LockfileYarn, YarnBerryConfigFile},
			want: ToolRequest{Manager: YarnBerry, Version: "4.14.1", Hash: sha224, Source: SourcePackageManagerField}},
		{name: "sha1 and sha256 are accepted", field: "npm@11.6.4+sha1." + strings.Repeat("a", 40),
			want: ToolRequest{Manager: NPM, Version: "11.6.4", Hash: "sha1." + strings.Repeat("a", 40), Source: SourcePackageManagerField}},
		{name: "md5 hash is dropped", field: "pnpm@9.15.9+md5.abc",
			want: ToolRequest{Manager: PNPM, Version: "9.15.9", Source: SourcePackageManagerField}, wantNote: "not sha1, sha224, sha256 or sha512"},
		{name: "non-hex hash is dropped", field: "pnpm@9.15.9+sha256." + strings.Repeat("z", 64),
			want: ToolRequest{Manager: PNPM, Version: "9.15.9", Source: SourcePackageManagerField}, wantNote: "hash"},
		{name: "short hash is dropped", field: "pnpm@9.15.9+sha512.abcdef",
			want: ToolRequest{Manager: PNPM, Version: "9.15.9", Source: SourcePackageManagerField}, wantNote: "hash"},
		{name: "major only", field: "pnpm@9", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "6.0"},
			want: ToolRequest{Manager: PNPM, Version: "9", Source: SourcePackageManagerField}},
		{name: "caret before the name", field: "^pnpm@9",
			want: ToolRequest{Manager: PNPM, Version: "9", Source: SourcePackageManagerField}},
		{name: "prerelease is exact", field: "yarn@4.0.0-rc.53",
			want: ToolRequest{Manager: YarnBerry, Version: "4.0.0-rc.53", Source: SourcePackageManagerField}},
		{name: "a range: the lockfile decides", field: "pnpm@^9.1.0", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "9.0"},
			want: ToolRequest{Manager: PNPM, Version: "9", Source: "pnpm-lock.yaml lockfileVersion 9.0"}, wantNote: "not an exact version or a major"},
		{name: "garbage: the lockfile decides", field: "pnpm@latest", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "5.4"},
			want: ToolRequest{Manager: PNPM, Version: "7", Source: "pnpm-lock.yaml lockfileVersion 5.4"}, wantNote: "not an exact version"},
		{name: "major.minor is not exact", field: "pnpm@9.1",
			want: ToolRequest{Manager: PNPM, Source: SourceDefault}, wantNote: "not an exact version or a major"},
		{name: "hash without an exact version", field: "pnpm@9+" + sha512,
			want: ToolRequest{Manager: PNPM, Version: "9", Source: SourcePackageManagerField}, wantNote: "no exact version"},
		{name: "no version", field: "bun", files: []string{LockfileBun},
			want: ToolRequest{Manager: Bun, Version: "1", Source: LockfileBun}, wantNote: "names no version"},
		{name: "v prefix is not corepack's", field: "pnpm@v9.0.0",
			want: ToolRequest{Manager: PNPM, Source: SourceDefault}, wantNote: "not an exact version"},

		// pnpm-lock.yaml lockfileVersion.
		{name: "pnpm 9.0", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "9.0"},
			want: ToolRequest{Manager: PNPM, Version: "9", Source: "pnpm-lock.yaml lockfileVersion 9.0"}},
		{name: "pnpm 6.0", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "6.0"},
			want: ToolRequest{Manager: PNPM, Version: "8", Source: "pnpm-lock.yaml lockfileVersion 6.0"}},
		{name: "pnpm 6.1", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "6.1"},
			want: ToolRequest{Manager: PNPM, Version: "8", Source: "pnpm-lock.yaml lockfileVersion 6.1"}},
		{name: "pnpm 5.4", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "5.4"},
			want: ToolRequest{Manager: PNPM, Version: "7", Source: "pnpm-lock.yaml lockfileVersion 5.4"}},
		{name: "pnpm 5.3", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "5.3"},
			want: ToolRequest{Manager: PNPM, Version: "6", Source: "pnpm-lock.yaml lockfileVersion 5.3"}},
		{name: "pnpm 5.1", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "5.1"},
			want: ToolRequest{Manager: PNPM, Version: "5", Source: "pnpm-lock.yaml lockfileVersion 5.1"}},
		{name: "pnpm 5", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "5"},
			want: ToolRequest{Manager: PNPM, Version: "5", Source: "pnpm-lock.yaml lockfileVersion 5"}},
		{name: "pnpm unknown version", files: []string{LockfilePNPM}, facts: CheckoutFacts{PNPMLockfileVersion: "7.0"},
			want: ToolRequest{Manager: PNPM, Source: SourceDefault}, wantNote: `lockfileVersion "7.0", which gilf does not know`},
		{name: "pnpm missing version", files: []string{LockfilePNPM},
			want: ToolRequest{Manager: PNPM, Source: SourceDefault}, wantNote: "no lockfileVersion"},
		{name: "pnpm field, no lockfile", field: "pnpm",
			want: ToolRequest{Manager: PNPM, Source: SourceDefault}, wantNote: "names no version"},

		// yarn.lock.
		{name: "v1 lockfile", files: []string{LockfileYarn}, facts: CheckoutFacts{YarnLock: YarnLockV1},
			want: ToolRequest{Manager: Yarn, Version: "1", Source: "yarn.lock v1"}},
		{name: "yarn.lock not read", files: []string{LockfileYarn},
			want: ToolRequest{Manager: Yarn, Version: "1", Source: LockfileYarn}},
		{name: "v1 lockfile with .yarnrc.yml stays berry (today's rule)", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: CheckoutFacts{YarnLock: YarnLockV1},
			want: ToolRequest{Manager: YarnBerry, Source: SourceDefault}, wantNote: "Yarn classic (v1) lockfile but Yarn 2+ is used"},
		{name: "berry lockfile without .yarnrc.yml is berry", files: []string{LockfileYarn}, facts: berry(8),
			want: ToolRequest{Manager: YarnBerry, Version: "4.13.0", Source: "yarn.lock __metadata version 8"}},
		{name: "berry 4", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: berry(4),
			want: ToolRequest{Manager: YarnBerry, Version: "2", Source: "yarn.lock __metadata version 4"}},
		{name: "berry 5", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: berry(5),
			want: ToolRequest{Manager: YarnBerry, Version: "3.1.1", Source: "yarn.lock __metadata version 5"}},
		{name: "berry 6", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: berry(6),
			want: ToolRequest{Manager: YarnBerry, Version: "3", Source: "yarn.lock __metadata version 6"}},
		{name: "berry 9", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: berry(9),
			want: ToolRequest{Manager: YarnBerry, Version: "4.14.1", Source: "yarn.lock __metadata version 9"}},
		{name: "berry 10", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: berry(10),
			want: ToolRequest{Manager: YarnBerry, Version: "4", Source: "yarn.lock __metadata version 10"}},
		{name: "berry 7 (release candidates)", files: []string{LockfileYarn}, facts: berry(7),
			want: ToolRequest{Manager: YarnBerry, Source: SourceDefault}, wantNote: "__metadata version 7, which gilf does not know"},
		{name: "berry without a version", files: []string{LockfileYarn}, facts: berry(0),
			want: ToolRequest{Manager: YarnBerry, Source: SourceDefault}, wantNote: "no __metadata version"},
		{name: "yarn field without a version, berry lockfile", field: "yarn", files: []string{LockfileYarn}, facts: berry(6),
			want: ToolRequest{Manager: YarnBerry, Version: "3", Source: "yarn.lock __metadata version 6"}, wantNote: "yarn.lock is a Yarn 2+ lockfile"},
		{name: "yarn 1 field wins over a berry lockfile", field: "yarn@1.22.22", files: []string{LockfileYarn}, facts: berry(8),
			want: ToolRequest{Manager: Yarn, Version: "1.22.22", Source: SourcePackageManagerField}},

		// yarnPath.
		{name: "yarnPath gives the version", files: []string{LockfileYarn, YarnBerryConfigFile},
			facts: CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: 8, YarnPath: ".yarn/releases/yarn-4.4.1.cjs"},
			want:  ToolRequest{Manager: YarnBerry, Version: "4.4.1", Release: ".yarn/releases/yarn-4.4.1.cjs", Source: SourceYarnPath}},
		{name: "yarnPath is cleaned", files: []string{LockfileYarn, YarnBerryConfigFile},
			facts: CheckoutFacts{YarnPath: "./.yarn//releases/../releases/yarn-3.6.4.js"},
			want:  ToolRequest{Manager: YarnBerry, Version: "3.6.4", Release: ".yarn/releases/yarn-3.6.4.js", Source: SourceYarnPath}},
		{name: "exact field version wins over yarnPath's", field: "yarn@4.5.0", files: []string{LockfileYarn, YarnBerryConfigFile},
			facts: CheckoutFacts{YarnPath: ".yarn/releases/yarn-4.4.1.cjs"},
			want:  ToolRequest{Manager: YarnBerry, Version: "4.5.0", Release: ".yarn/releases/yarn-4.4.1.cjs", Source: SourcePackageManagerField}},
		{name: "major field version yields to yarnPath's", field: "yarn@4", files: []string{LockfileYarn, YarnBerryConfigFile},
			facts: CheckoutFacts{YarnPath: ".yarn/releases/yarn-4.4.1.cjs"},
			want:  ToolRequest{Manager: YarnBerry, Version: "4.4.1", Release: ".yarn/releases/yarn-4.4.1.cjs", Source: SourceYarnPath}},
		{name: "yarnPath without a version keeps the lockfile's", files: []string{LockfileYarn, YarnBerryConfigFile},
			facts: CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: 4, YarnPath: ".yarn/releases/yarn-berry.cjs"},
			want:  ToolRequest{Manager: YarnBerry, Version: "2", Release: ".yarn/releases/yarn-berry.cjs", Source: "yarn.lock __metadata version 4"}},
		{name: "yarnPath turns Yarn classic into berry", field: "yarn@1.22.22", files: []string{LockfileYarn, YarnBerryConfigFile},
			facts:  CheckoutFacts{YarnLock: YarnLockV1, YarnPath: ".yarn/releases/yarn-4.4.1.cjs"},
			want:   ToolRequest{Manager: YarnBerry, Version: "1.22.22", Release: ".yarn/releases/yarn-4.4.1.cjs", Source: SourcePackageManagerField},
			wantPM: YarnBerry},
		{name: "a committed classic release stays classic", field: "yarn@1.22.22", files: []string{LockfileYarn, YarnBerryConfigFile},
			facts: CheckoutFacts{YarnLock: YarnLockV1, YarnPath: ".yarn/releases/yarn-1.22.19.js"},
			want:  ToolRequest{Manager: Yarn, Version: "1.22.22", Release: ".yarn/releases/yarn-1.22.19.js", Source: SourcePackageManagerField}},
		{name: "yarnPath is ignored for pnpm", field: "pnpm@9.15.9", files: []string{YarnBerryConfigFile},
			facts: CheckoutFacts{YarnPath: ".yarn/releases/yarn-4.4.1.cjs"},
			want:  ToolRequest{Manager: PNPM, Version: "9.15.9", Source: SourcePackageManagerField}},
		{name: "absolute yarnPath", files: []string{LockfileYarn}, facts: CheckoutFacts{YarnLock: YarnLockV1, YarnPath: "/usr/bin/yarn"},
			want: ToolRequest{Manager: Yarn, Version: "1", Source: "yarn.lock v1"}, wantNote: "is not a relative path"},
		{name: "escaping yarnPath", files: []string{LockfileYarn}, facts: CheckoutFacts{YarnLock: YarnLockV1, YarnPath: ".yarn/../../yarn-4.4.1.cjs"},
			want: ToolRequest{Manager: Yarn, Version: "1", Source: "yarn.lock v1"}, wantNote: "leaves the checkout"},
		{name: "dot yarnPath", files: []string{LockfileYarn}, facts: CheckoutFacts{YarnLock: YarnLockV1, YarnPath: "./"},
			want: ToolRequest{Manager: Yarn, Version: "1", Source: "yarn.lock v1"}, wantNote: "leaves the checkout"},
		{name: "NUL in yarnPath", files: []string{LockfileYarn}, facts: CheckoutFacts{YarnLock: YarnLockV1, YarnPath: "a\x00b.cjs"},
			want: ToolRequest{Manager: Yarn, Version: "1", Source: "yarn.lock v1"}, wantNote: "control character"},
		{name: "env in yarnPath", files: []string{LockfileYarn}, facts: CheckoutFacts{YarnLock: YarnLockV1, YarnPath: "${HOME}/yarn.cjs"},
			want: ToolRequest{Manager: Yarn, Version: "1", Source: "yarn.lock v1"}, wantNote: "environment variable"},
		{name: "yarnPath at the limit", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: 8, YarnPath: strings.Repeat("a", MaxYarnPathBytes-len("/yarn-4.4.1.cjs")) + "/yarn-4.4.1.cjs"},
			want: ToolRequest{Manager: YarnBerry, Version: "4.4.1", Release: strings.Repeat("a", MaxYarnPathBytes-len("/yarn-4.4.1.cjs")) + "/yarn-4.4.1.cjs", Source: SourceYarnPath}},
		{name: "yarnPath over the limit", files: []string{LockfileYarn, YarnBerryConfigFile}, facts: CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: 8, YarnPath: strings.Repeat("a", MaxYarnPathBytes+1-len("/yarn-4.4.1.cjs")) + "/yarn-4.4.1.cjs"},
			want: ToolRequest{Manager: YarnBerry, Version: "4.13.0", Source: "yarn.lock __metadata version 8"}, wantNote: "longer than 255 bytes"},

		// bun and npm.
		{name: "bun.lock", files: []string{LockfileBun}, want: ToolRequest{Manager: Bun, Version: "1", Source: LockfileBun}},
		{name: "bun.lockb", files: []string{LockfileBunBinary}, want: ToolRequest{Manager: Bun, Version: "1", Source: LockfileBunBinary}},
		{name: "bun field", field: "bun@1.2.20", files: []string{LockfileBun}, want: ToolRequest{Manager: Bun, Version: "1.2.20", Source: SourcePackageManagerField}},
		{name: "npm lockfile", files: []string{LockfileNPM}, want: ToolRequest{Manager: NPM, Source: SourceDefault}},
		{name: "npm field", field: "npm@11.6.4", files: []string{LockfileNPM}, want: ToolRequest{Manager: NPM, Version: "11.6.4", Source: SourcePackageManagerField}},
		{name: "nothing", want: ToolRequest{Manager: NPM, Source: SourceDefault}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := `{"scripts":{"test":"vitest"}}`
			if tc.field != "" {
				data = `{"packageManager":` + strconvQuote(tc.field) + `,"scripts":{"test":"vitest"}}`
			}
			p := PlanFromCheckout([]byte(data), tc.files, tc.facts, PlanOptions{})
			if diff := cmp.Diff(tc.want, p.Tool); diff != "" {
				t.Errorf("tool (-want +got):\n%s\nnotes: %q", diff, p.Notes)
			}
			if p.PackageManager != p.Tool.Manager {
				t.Errorf("plan manager %s, tool manager %s", p.PackageManager, p.Tool.Manager)
			}
			if tc.wantPM != "" && p.PackageManagerSource != SourceYarnPath {
				t.Errorf("PackageManagerSource = %q, want %q", p.PackageManagerSource, SourceYarnPath)
			}
			if tc.wantNote != "" && !hasNote(p, tc.wantNote) {
				t.Errorf("no note containing %q in %q", tc.wantNote, p.Notes)
			}
			if tc.wantNote == "" {
				for _, n := range p.Notes {
					if !strings.Contains(n, "the install is not frozen") {
						t.Errorf("unexpected note %q", n)
					}
				}
			}
			// A gap plan carries the same request.
			gap := PlanFromCheckout([]byte(strings.Replace(data, `"test":"vitest"`, `"start":"x"`, 1)), tc.files, tc.facts, PlanOptions{})
			if gap.Gap == nil || !cmp.Equal(gap.Tool, p.Tool) {
				t.Errorf("gap plan tool %+v, want %+v", gap.Tool, p.Tool)
			}
		})
	}
}

// TestCorpusToolRequest checks the ToolRequest of every real
// packageManager value in the shared corpus (index.tsv's column), and of
// the rows without one.
func TestCorpusToolRequest(t *testing.T) {
	want := map[string]ToolRequest{
		"vitejs__vite.json":          {Manager: PNPM, Version: "10.34.5", Source: SourcePackageManagerField},
		"vuejs__core.json":           {Manager: PNPM, Version: "11.19.0", Source: SourcePackageManagerField},
		"sveltejs__svelte.json":      {Manager: PNPM, Version: "10.33.4", Hash: "sha512.1c67b3b359b2d408119ba1ed289f34b8fc3c6873412bec6fd264fbdc82489e510fcbecb9ce9d22dae7f3b76269d8441046014bdca53b9979cd7a561ad631b800", Source: SourcePackageManagerField},
		"pmndrs__zustand.json":       {Manager: PNPM, Version: "11.3.0", Hash: "sha512.2c403d6594527287672b1f7056343a1f7c3634036a67ffabfcc2b3d7595d843768f8787148d1b57cf7956c90606bbd192857c363af19e96d2d0ec9ec5741d215", Source: SourcePackageManagerField},
		"colinhacks__zod.json":       {Manager: PNPM, Version: "10.12.1", Source: SourcePackageManagerField},
		"egoist__tsup.json":          {Manager: PNPM, Version: "10.22.0", Source: SourcePackageManagerField},
		"unjs__ufo.json":             {Manager: PNPM, Version: "10.28.0", Source: SourcePackageManagerField},
		"shadcn-ui__ui.json":         {Manager: PNPM, Version: "10.33.4", Source: SourcePackageManagerField},
		"t3-oss__create-t3-app.json": {Manager: PNPM, Version: "10.8.0", Source: SourcePackageManagerField},
		// Over the 1 MB cap: a gap, so the field is never read; the lockfile
		// is not read by PlanFromManifest either.
		"gitkraken__vscode-gitlens.json":                              {Manager: PNPM, Source: SourceDefault},
		"reduxjs__redux.json":                                         {Manager: YarnBerry, Version: "4.4.1", Source: SourcePackageManagerField},
		"nodejs__corepack.json":                                       {Manager: YarnBerry, Version: "4.14.1", Hash: "sha224.88b7a7244bbd9040380c417f7eb556d85c67640b651f113cb4c72113", Source: SourcePackageManagerField},
		"honojs__hono.json":                                           {Manager: Bun, Version: "1.2.20", Source: SourcePackageManagerField},
		"elysiajs__elysia.json":                                       {Manager: Bun, Version: "1", Source: LockfileBun},
		"expressjs__express.json":                                     {Manager: NPM, Source: SourceDefault},
		"eslint__eslint.json":                                         {Manager: NPM, Source: SourceDefault},
		"isaacs__rimraf.json":                                         {Manager: NPM, Source: SourceDefault},
		"cloudflare__sandbox-sdk.json":                                {Manager: NPM, Version: "11.6.4", Source: SourcePackageManagerField},
		"TooTallNate__util-deprecate.json":                            {Manager: NPM, Source: SourceDefault},
		"jonasschmedtmann__complete-javascript-course__17-final.json": {Manager: NPM, Source: SourceDefault},
		"SandeepVashishtha__Eventra@2a10080b.json":                    {Manager: NPM, Source: SourceDefault},
	}
	rows := readCorpusIndex(t)
	if len(rows) != len(want) {
		t.Errorf("index.tsv has %d rows, the test expects %d", len(rows), len(want))
	}
	for _, row := range rows {
		t.Run(row.file, func(t *testing.T) {
			data, err := os.ReadFile(shared.Data(t, "package-json", row.file))
			if err != nil {
				t.Fatal(err)
			}
			got := PlanFromManifest(data, row.files, PlanOptions{}).Tool
			if diff := cmp.Diff(want[row.file], got); diff != "" {
				t.Errorf("tool (-want +got):\n%s", diff)
			}
			// The field as index.tsv lists it reads the same.
			if row.packageManager != "-" && row.file != "gitkraken__vscode-gitlens.json" {
				d, tool := detect(row.packageManager, row.files, CheckoutFacts{})
				if d.Manager != got.Manager || tool.Version != got.Version || tool.Hash != got.Hash {
					t.Errorf("index.tsv's %q reads as %+v, the file as %+v", row.packageManager, tool, got)
				}
			}
		})
	}
}

// TestBuildPlanRealLockfiles builds plans from checkouts holding the real
// lockfiles of testdata/lockfiles.
func TestBuildPlanRealLockfiles(t *testing.T) {
	tests := []struct {
		lockfile string
		yarnrc   bool
		want     ToolRequest
	}{
		{lockfile: "pnpm-9.15.9.pnpm-lock.yaml", want: ToolRequest{Manager: PNPM, Version: "9", Source: "pnpm-lock.yaml lockfileVersion 9.0"}},
		{lockfile: "pnpm-8.15.9.pnpm-lock.yaml", want: ToolRequest{Manager: PNPM, Version: "8", Source: "pnpm-lock.yaml lockfileVersion 6.0"}},
		{lockfile: "pnpm-7.33.7.pnpm-lock.yaml", want: ToolRequest{Manager: PNPM, Version: "7", Source: "pnpm-lock.yaml lockfileVersion 5.4"}},
		{lockfile: "yarn-1.22.22.yarn.lock", want: ToolRequest{Manager: Yarn, Version: "1", Source: "yarn.lock v1"}},
		{lockfile: "yarn-2.4.2.yarn.lock", want: ToolRequest{Manager: YarnBerry, Version: "2", Source: "yarn.lock __metadata version 4"}},
		{lockfile: "yarn-3.0.2.yarn.lock", yarnrc: true, want: ToolRequest{Manager: YarnBerry, Version: "2", Source: "yarn.lock __metadata version 4"}},
		{lockfile: "yarn-3.1.1.yarn.lock", want: ToolRequest{Manager: YarnBerry, Version: "3.1.1", Source: "yarn.lock __metadata version 5"}},
		{lockfile: "yarn-3.2.0.yarn.lock", want: ToolRequest{Manager: YarnBerry, Version: "3", Source: "yarn.lock __metadata version 6"}},
		{lockfile: "yarn-3.8.7.yarn.lock", yarnrc: true, want: ToolRequest{Manager: YarnBerry, Version: "3", Source: "yarn.lock __metadata version 6"}},
		{lockfile: "yarn-4.0.0.yarn.lock", want: ToolRequest{Manager: YarnBerry, Version: "4.13.0", Source: "yarn.lock __metadata version 8"}},
		{lockfile: "yarn-4.13.0.yarn.lock", want: ToolRequest{Manager: YarnBerry, Version: "4.13.0", Source: "yarn.lock __metadata version 8"}},
		{lockfile: "yarn-4.14.1.yarn.lock", want: ToolRequest{Manager: YarnBerry, Version: "4.14.1", Source: "yarn.lock __metadata version 9"}},
		{lockfile: "yarn-4.18.1.yarn.lock", yarnrc: true, want: ToolRequest{Manager: YarnBerry, Version: "4", Source: "yarn.lock __metadata version 10"}},
	}
	for _, tc := range tests {
		t.Run(tc.lockfile, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "lockfiles", tc.lockfile))
			if err != nil {
				t.Fatal(err)
			}
			name := LockfileYarn
			if strings.HasSuffix(tc.lockfile, LockfilePNPM) {
				name = LockfilePNPM
			}
			dir := t.TempDir()
			files := map[string]string{"package.json": `{"scripts":{"test":"vitest"}}`, name: string(data)}
			if tc.yarnrc {
				files[YarnBerryConfigFile] = "nodeLinker: node-modules\n"
			}
			writeFiles(t, dir, files)
			p := BuildPlan(dir, PlanOptions{})
			if diff := cmp.Diff(tc.want, p.Tool); diff != "" {
				t.Errorf("tool (-want +got):\n%s\nnotes: %q", diff, p.Notes)
			}
			if len(p.Notes) != 0 {
				t.Errorf("notes %q", p.Notes)
			}
		})
	}
}

func strconvQuote(s string) string {
	b := []byte{'"'}
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, []byte("\\u00")...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

func TestYarn2SkipsBuildsItsOwnWay(t *testing.T) {
	data := []byte(`{"scripts":{"test":"vitest"}}`)
	files := []string{LockfileYarn, YarnBerryConfigFile}
	for _, tc := range []struct {
		facts CheckoutFacts
		want  string
	}{
		{facts: CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: 4}, want: "--skip-builds"},
		{facts: CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: 4, YarnPath: ".yarn/releases/yarn-2.4.3.cjs"}, want: "--skip-builds"},
		{facts: CheckoutFacts{YarnLock: YarnLockBerry, YarnLockMetadataVersion: 6}, want: "--mode=skip-build"},
	} {
		p := PlanFromCheckout(data, files, tc.facts, PlanOptions{InstallIgnoreScripts: true})
		if argv := p.Steps[0].Argv; argv[len(argv)-1] != tc.want {
			t.Errorf("%+v: install %q, want %s", tc.facts, argv, tc.want)
		}
	}
}
