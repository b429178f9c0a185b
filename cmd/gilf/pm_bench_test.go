package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/toolchain"
	"github.com/gilf-review/gilf/validation"
)

// BenchmarkPackageManagerOverhead measures, for each package manager,
// gilf's wall time for a plan (the local executor as gilf serve wires it:
// the toolchain cache, the registry proxy, the CA bundle, the disk, the
// git work tree, one sandbox per step) against the same install and
// scripts run bare on the host with the same package manager binary, in
// the same run, each from a fresh copy of the repository and an empty
// HOME (so both install from the registry with cold caches). It reports
// gilf/bare as "x-bare"; the target is at most 1.15.
//
//	go test ./cmd/gilf -run '^$' -bench PackageManagerOverhead -benchtime 3x
func BenchmarkPackageManagerOverhead(b *testing.B) {
	w := world(b)
	rule, err := egress.RuleFromURL(w.reg.URL)
	if err != nil {
		b.Fatal(err)
	}
	tc, err := toolchain.New(toolchain.Options{Dir: w.cache, Registry: w.reg.URL})
	if err != nil {
		b.Fatal(err)
	}
	opts := local.Options{
		Tools: tc,
		// The bridge is gilf's own hidden subcommand: the binary
		// testMain built, as gilf serve runs it.
		Egress: local.EgressOptions{AllowHosts: []egress.Rule{rule}, Registries: map[string]string{"registry": w.reg.URL}, BridgeBinary: gilfBin},
		Env:    local.DefaultEnv(),
	}
	for _, p := range SystemCABundles() {
		if _, err := os.Stat(p); err == nil {
			opts.CAFile = p
			break
		}
	}
	e, err := local.New(nil, opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Tier(context.Background()); err != nil {
		b.Fatal(err)
	}
	for _, tc := range pmCases(b, w) {
		b.Run(strings.Join(strings.Fields(tc.name)[:2], "-"), func(b *testing.B) {
			src := pmRepo(b, tc.field, tc.ua, tc.extra)
			tc.lock(b, src, registryEnv(w.reg.URL, b.TempDir()))
			plan := validation.BuildPlan(src, validation.PlanOptions{})
			tool := w.tools[pmKey(validation.ToolRequest{Manager: plan.Tool.Manager, Version: plan.Tool.Version})].Dir
			var gilfTime, bareTime time.Duration
			for b.Loop() {
				b.StopTimer()
				dir := copyRepo(b, src)
				b.StartTimer()
				start := time.Now()
				res, err := e.Run(context.Background(), executors.Request{Plan: plan, Dir: src, Root: src})
				gilfTime += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				for _, s := range res.Steps {
					if s.Status != validation.StatusPassed {
						b.Fatalf("gilf: step %s %s: %s", s.Name, s.Status, s.Output.Head)
					}
				}
				start = time.Now()
				runBare(b, dir, tool, registryEnv(w.reg.URL, b.TempDir()), plan)
				bareTime += time.Since(start)
			}
			b.ReportMetric(float64(gilfTime)/float64(bareTime), "x-bare")
		})
	}
}

// runBare runs the plan's steps on the host, as they are, with the
// prepared package manager first on PATH (or the committed release).
func runBare(b *testing.B, dir, tool string, env []string, plan validation.Plan) {
	b.Helper()
	path := os.Getenv("PATH")
	if tool != "" {
		path = filepath.Join(tool, "bin") + ":" + path
	}
	if plan.Tool.Release != "" {
		shim := filepath.Join(b.TempDir(), "bin")
		if err := os.MkdirAll(shim, 0o755); err != nil {
			b.Fatal(err)
		}
		script := "#!/bin/sh\nexec node " + filepath.Join(dir, plan.Tool.Release) + ` "$@"` + "\n"
		if err := os.WriteFile(filepath.Join(shim, "yarn"), []byte(script), 0o755); err != nil {
			b.Fatal(err)
		}
		path = shim + ":" + os.Getenv("PATH")
	}
	env = append(env, "PATH="+path)
	for _, s := range plan.Steps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		// exec.Command would look the program up in this process's
		// PATH, not the step's.
		prog := s.Argv[0]
		for _, d := range filepath.SplitList(path) {
			if st, err := os.Stat(filepath.Join(d, prog)); err == nil && st.Mode()&0o111 != 0 {
				prog = filepath.Join(d, prog)
				break
			}
		}
		cmd := exec.CommandContext(ctx, prog, s.Argv[1:]...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			b.Fatalf("bare %q: %v\n%s", s.Argv, err, out)
		}
	}
}

// copyRepo copies src into a fresh directory (cp -a keeps links and
// modes) and makes it a git work tree, as gilf does inside its sandbox
// (the lint script calls git). Not timed: the bare side gets it free.
func copyRepo(b *testing.B, src string) string {
	b.Helper()
	dst := filepath.Join(b.TempDir(), "repo")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		b.Fatalf("copy: %v\n%s", err, out)
	}
	git := exec.Command("/bin/sh", "-c", "git init -q . && git add -A -f . && git -c user.name=b -c user.email=b@invalid commit -q -m bench")
	git.Dir = dst
	if out, err := git.CombinedOutput(); err != nil {
		b.Fatalf("git: %v\n%s", err, out)
	}
	return dst
}
