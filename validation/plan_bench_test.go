package validation

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
)

func BenchmarkPlanFromManifest(b *testing.B) {
	for _, name := range []string{"unjs__ufo.json", "honojs__hono.json", "gitkraken__vscode-gitlens.json"} {
		data, err := os.ReadFile(shared.Data(b, "package-json", name))
		if err != nil {
			b.Fatal(err)
		}
		// gitlens is over the default cap: raise it so the parse is measured.
		opts := PlanOptions{MaxManifestBytes: 2 << 20}
		files := []string{LockfilePNPM}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if p := PlanFromManifest(data, files, opts); p.Gap != nil {
					b.Fatalf("gap %+v", p.Gap)
				}
			}
		})
	}
}

func BenchmarkBuildPlan(b *testing.B) {
	data, err := os.ReadFile(shared.Data(b, "package-json", "honojs__hono.json"))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for name, content := range map[string][]byte{"package.json": data, "bun.lock": nil} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if p := BuildPlan(dir, PlanOptions{}); p.Gap != nil {
			b.Fatalf("gap %+v", p.Gap)
		}
	}
}
