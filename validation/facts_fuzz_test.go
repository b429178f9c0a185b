package validation

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheckoutFacts: whatever the bytes of pnpm-lock.yaml, yarn.lock,
// .yarnrc.yml, .nvmrc or an engines.node range, the parsers never panic,
// stay within their bounds, and the plan built from the facts is the same
// every time, with a capped node Range and a release inside the checkout.
func FuzzCheckoutFacts(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "lockfiles"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("testdata", "lockfiles", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
	}
	for _, s := range []string{
		"yarnPath: .yarn/releases/yarn-4.4.1.cjs\n", "yarnPath: '../../etc/passwd'\n", "yarnPath: \"a\\\"b\"\n",
		"lockfileVersion: '9.0'", "__metadata:\n  version: 99999999999\n", "---\n---\n'':\n  \"\n",
		">=18", "^18 || ^20 || >=22", "18 - 20", "lts/*", "v20.11.1", "1.x.3 - ~^", "||||", ">= <= ~> ^",
		"\xEF\xBB\xBF20\n", "~1.2.3-beta.2", "9007199254740991.0.0",
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, truncated bool) {
		if len(data) > MaxYarnrcBytes {
			return
		}
		pnpm := parsePNPMLockfileVersion(data, truncated)
		if len(pnpm) > 16 || strings.Trim(pnpm, "0123456789.") != "" {
			t.Fatalf("lockfileVersion %q", pnpm)
		}
		kind, meta := parseYarnLockHead(data, truncated)
		if meta < 0 || (kind != YarnLockBerry && meta != 0) {
			t.Fatalf("yarn.lock %q %d", kind, meta)
		}
		yarnPath := parseYarnrcYarnPath(data)
		if release, note := cleanYarnPath(yarnPath); note == "" && yarnPath != "" {
			if len(release) > MaxYarnPathBytes || path.IsAbs(release) || release == ".." || strings.HasPrefix(release, "../") || strings.ContainsRune(release, 0) {
				t.Fatalf("release %q from %q", release, yarnPath)
			}
		}
		node, _ := parseNodeVersionFile(data)
		s := string(data)
		if r, err := parseRange(s); err == nil {
			for _, v := range []string{"0.0.0", "20.20.2", "1.2.3-rc.1", "9007199254740991.0.0"} {
				sv, _ := parseSemver(v)
				r.satisfies(sv)
			}
		}
		_ = NodeNote(&NodeRequirement{Range: s, Source: SourceEnginesNode}, "v20.20.2")

		facts := CheckoutFacts{PNPMLockfileVersion: pnpm, YarnLock: kind, YarnLockMetadataVersion: meta, YarnPath: yarnPath,
			NodeVersionFile: newNodeRequirement(node, NodeVersionFileNVM)}
		files := []string{LockfilePNPM, LockfileYarn, YarnBerryConfigFile}
		manifest := []byte(`{"packageManager":"yarn","engines":{"node":` + strconvQuote(s) + `},"scripts":{"test":"x"}}`)
		for _, fs := range [][]string{files, files[1:], files[:1]} {
			p := PlanFromCheckout(manifest, fs, facts, PlanOptions{})
			if p.Node != nil && len(p.Node.Range) > MaxNodeRangeBytes {
				t.Fatalf("node range is %d bytes", len(p.Node.Range))
			}
			if p.Tool.Release != "" && (path.IsAbs(p.Tool.Release) || strings.HasPrefix(p.Tool.Release, "../") || len(p.Tool.Release) > MaxYarnPathBytes) {
				t.Fatalf("release %q", p.Tool.Release)
			}
			if p.Tool.Manager != p.PackageManager {
				t.Fatalf("tool %s, plan %s", p.Tool.Manager, p.PackageManager)
			}
			if q := PlanFromCheckout(manifest, fs, facts, PlanOptions{}); q.Tool != p.Tool {
				t.Fatalf("not deterministic: %+v %+v", p.Tool, q.Tool)
			}
		}
	})
}
