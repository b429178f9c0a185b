package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// BenchmarkRunFixedCostTool is what a package manager from the toolchain
// adds to a run's fixed cost (the wall time minus the step's) now that it
// is mounted from its image (toolimage.go): a pnpm-sized toolchain
// (1,354 files, 21 MB) against npm, the worker's own, in the same
// iterations; tool-extra-ms is the median of each pair's difference. The
// image is made once, before the timed runs (first-ms says what that
// costs).
//
//	go test ./executors/local -run '^$' -bench RunFixedCostTool -benchtime 10x
func BenchmarkRunFixedCostTool(b *testing.B) {
	const version = "10.14.0"
	tc := b.TempDir()
	dir := filepath.Join(tc, version)
	chunk := strings.Repeat("// pnpm's code\n", 1<<10) // 15 KiB
	for i := range 1350 {
		p := filepath.Join(dir, "dist", fmt.Sprintf("d%02d", i%40), fmt.Sprintf("f%04d.js", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(chunk), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"bin/pnpm":     "#!/bin/sh\necho pnpm-" + version + "\n",
		"package.json": `{"name":"pnpm","version":"` + version + `"}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	tools := toolFunc(func(context.Context, validation.ToolRequest) (validation.Tool, error) {
		return validation.Tool{Manager: validation.PNPM, Version: version, Dir: dir, Integrity: "sha512-bench"}, nil
	})
	e, err := New(discardLogger(), Options{WorkRoot: benchWorkRoot(b), Tools: tools})
	if err != nil {
		b.Fatal(err)
	}
	run := func(pm validation.PackageManager, argv ...string) time.Duration {
		plan := validation.Plan{PackageManager: pm, Steps: []validation.Step{{Name: validation.StepTest, Argv: argv, Timeout: time.Minute}}}
		if pm == validation.PNPM {
			plan.Tool = validation.ToolRequest{Manager: validation.PNPM, Version: version}
		}
		start := time.Now()
		res, err := e.Run(context.Background(), executors.Request{Dir: b.TempDir(), Plan: plan})
		wall := time.Since(start)
		if err != nil || res.Steps[0].Status != validation.StatusPassed {
			b.Fatalf("run: %v %+v", err, res.Steps)
		}
		return wall - res.Steps[0].Duration
	}
	first := run(validation.PNPM, "pnpm")
	var npm, pnpm, extra []time.Duration
	b.ResetTimer()
	for range b.N {
		n := run(validation.NPM, "/bin/true")
		p := run(validation.PNPM, "pnpm")
		npm, pnpm, extra = append(npm, n), append(pnpm, p), append(extra, p-n)
	}
	b.StopTimer()
	b.ReportMetric(msOf(first), "first-ms")
	b.ReportMetric(msOf(median(npm)), "npm-fixed-ms/op")
	b.ReportMetric(msOf(median(pnpm)), "pnpm-fixed-ms/op")
	b.ReportMetric(msOf(median(extra)), "tool-extra-ms/op")
}
