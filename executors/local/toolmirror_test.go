package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// fakeToolchain is a verified toolchain of one pnpm version per
// directory: bin/pnpm prints its version.
func fakeToolchain(t *testing.T, root string) ToolProvider {
	t.Helper()
	return toolFunc(func(_ context.Context, tr validation.ToolRequest) (validation.Tool, error) {
		dir := filepath.Join(root, tr.Version)
		if _, err := os.Stat(dir); err != nil {
			for name, body := range map[string]string{
				"bin/pnpm":      "#!/bin/sh\necho pnpm-" + tr.Version + "\n",
				"package.json":  `{"name":"pnpm","version":"` + tr.Version + `"}`,
				"dist/pnpm.cjs": strings.Repeat("// code\n", 100),
			} {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return validation.Tool{}, err
				}
				mode := os.FileMode(0o644)
				if strings.HasPrefix(name, "bin/") {
					mode = 0o755
				}
				if err := os.WriteFile(p, []byte(body), mode); err != nil {
					return validation.Tool{}, err
				}
			}
		}
		return validation.Tool{Manager: validation.PNPM, Version: tr.Version, Dir: dir, Integrity: "sha512-test"}, nil
	})
}

// runTool runs `pnpm` (the mirror's) at version in a sandbox and returns
// what it printed.
func runTool(t *testing.T, e *Executor, version string) string {
	t.Helper()
	tr := validation.ToolRequest{Manager: validation.PNPM, Version: version}
	res, err := e.Run(context.Background(), executors.Request{Dir: repo(t, map[string]string{"package.json": "{}"}), Plan: validation.Plan{
		PackageManager: validation.PNPM, Tool: tr,
		Steps: []validation.Step{{Name: "test", Argv: []string{"pnpm"}, Network: validation.NetworkNone}},
	}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return strings.TrimSpace(res.Steps[0].Output.Head)
}

// A mirror is reused only once it matches the verified toolchain: one
// changed behind gilf's back (by another process, or left half-made) is
// made again; mirrors past MaxToolMirrors are swept, least recently used
// first.
func TestToolMirrorCheckedAndBounded(t *testing.T) {
	toolRoot := t.TempDir()
	opts := Options{WorkRoot: workRoot(t), Tools: fakeToolchain(t, toolRoot)}
	mirrors := filepath.Join(opts.WorkRoot, toolsDirName)
	e := newExec(t, opts)
	if got := runTool(t, e, "9.1.0"); got != "pnpm-9.1.0" {
		t.Fatalf("first run printed %q", got)
	}
	// Another process's mirror, changed: a file replaced, one added.
	m := filepath.Join(mirrors, "pnpm", "9.1.0")
	if err := os.Remove(filepath.Join(m, "bin", "pnpm")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m, "bin", "pnpm"), []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := runTool(t, newExec(t, opts), "9.1.0"); got != "pnpm-9.1.0" {
		t.Errorf("a changed mirror was reused: %q", got)
	}
	if err := os.WriteFile(filepath.Join(m, "dist", "extra.js"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runTool(t, e, "9.1.0"); got != "pnpm-9.1.0" {
		t.Errorf("second run printed %q", got)
	}
	if _, err := os.Stat(filepath.Join(m, "dist", "extra.js")); err == nil {
		t.Error("a mirror with an extra file was reused")
	}
	// The bound: MaxToolMirrors+2 versions, one after another.
	for i := range MaxToolMirrors + 2 {
		v := fmt.Sprintf("9.2.%d", i)
		if got := runTool(t, e, v); got != "pnpm-"+v {
			t.Fatalf("%s printed %q", v, got)
		}
	}
	des, err := os.ReadDir(filepath.Join(mirrors, "pnpm"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, de := range des {
		if de.IsDir() {
			kept = append(kept, de.Name())
		}
	}
	if len(kept) != MaxToolMirrors {
		t.Errorf("kept %v, want %d mirrors", kept, MaxToolMirrors)
	}
	for _, old := range []string{"9.1.0", "9.2.0"} {
		if _, err := os.Stat(filepath.Join(mirrors, "pnpm", old)); err == nil {
			t.Errorf("%s, used longest ago, was kept", old)
		}
	}
	// The executors' own check wants an empty work root.
	if err := os.RemoveAll(mirrors); err != nil {
		t.Fatal(err)
	}
}

// A mirror a run holds is never swept.
func TestToolMirrorHeldIsKept(t *testing.T) {
	root := t.TempDir()
	var held []func()
	for i := range MaxToolMirrors + 3 {
		dir := filepath.Join(root, "pnpm", fmt.Sprintf("1.0.%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		release, err := holdMirror(dir)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	removed, err := sweepMirrors(root, "")
	if err != nil || len(removed) != 0 {
		t.Fatalf("swept %v (%v) while every mirror was held", removed, err)
	}
	for _, release := range held {
		release()
	}
	removed, err = sweepMirrors(root, "")
	if err != nil || len(removed) != 4 {
		t.Errorf("swept %v (%v), want the 4 past the bound", removed, err)
	}
}
