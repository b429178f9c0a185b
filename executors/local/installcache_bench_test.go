package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/toolchain"
	"github.com/gilf-review/gilf/validation"
)

// Bench-only knobs of BenchmarkInstallCacheRealRepo, read by the test
// alone (never gilf's configuration, so no GILF_ prefix).
const (
	// benchRepoEnv names a repository directory (a real checkout with
	// its lockfile) to install instead of shared data's steno.
	benchRepoEnv = "BENCH_INSTALL_REPO"
	// benchPMEnv is the package manager that repository must be planned
	// with (npm, pnpm, yarn, yarn-berry, bun): a check that gilf detects
	// what the measurement is about.
	benchPMEnv = "BENCH_INSTALL_PM"
)

// BenchmarkInstallCacheRealRepo measures the install step of a real
// repository's real lockfile from the npm registry, gilf against the same
// package manager (the very binary and version gilf runs in the sandbox)
// run bare on the worker, alternated in each iteration:
//
//   - bare-cold: the install with an empty package-manager cache;
//   - gilf-first: the install step through gilf's terminating proxy with an
//     empty verifying cache (and so an empty package-manager cache in the
//     sandbox);
//   - bare-warm: the install again, node_modules removed, its cache filled
//     by bare-cold;
//   - gilf-second: the install step again, the proxy's cache filled by
//     gilf-first (and the sandbox's package-manager cache seeded from it
//     where gilf seeds one).
//
// The repository is shared data's typicode/steno (npm ci, 391 packages)
// unless BENCH_INSTALL_REPO names a checkout's directory; its plan is
// gilf's own (validation.BuildPlan: the manager, the version it pins, the
// install argv), checked against BENCH_INSTALL_PM when that is set. A
// manager other than npm is prepared by the toolchain cache from the npm
// registry, as a worker with GILF_TOOLCHAIN_DIR does; a Yarn release
// committed in the checkout (yarnPath) runs as gilf runs it, with node.
//
//	BENCH_INSTALL_REPO=/tmp/defu BENCH_INSTALL_PM=pnpm go test ./executors/local -run '^$' -bench InstallCacheRealRepo -benchtime 2x -v
//
// With -v it logs each gilf install's requests through the proxy, its
// cache hits, misses and bytes served, and the run's phases.
//
// Metrics are medians: each install's ms/op, the ratios first/cold
// (target ≤ 1.15) and second/warm (target ≤ 1.10), and gilf's fixed cost
// (the run's wall time minus its steps', target ≤ 250 ms); gilf-first-cpu
// is the CPU gilf's own process spends on the first install (its proxy
// and cache: what it takes from the package manager on a small worker);
// "packages" is
// the count of packages the lockfile locks. It needs the npm registry
// (the one network this workplace allows installs).
//
//	go test ./executors/local -run '^$' -bench InstallCacheRealRepo -benchtime 3x
func BenchmarkInstallCacheRealRepo(b *testing.B) {
	src := os.Getenv(benchRepoEnv)
	if src == "" {
		src = extractRepo(b, shared.Data(b, "repos", "steno.tar.gz"))
	}
	plan := validation.BuildPlan(src, validation.PlanOptions{})
	pm := plan.PackageManager
	if want := os.Getenv(benchPMEnv); want != "" && string(pm) != want {
		b.Fatalf("%s is planned with %q (%s), not %s=%s", src, pm, plan.PackageManagerSource, benchPMEnv, want)
	}
	var install validation.Step
	for _, s := range plan.Steps {
		if s.Name == validation.StepInstall {
			install = s
		}
	}
	if install.Argv == nil || install.Inconclusive != "" {
		b.Fatalf("%s: no install step in the plan: %+v", src, plan)
	}
	install.Timeout = 10 * time.Minute
	tools, err := toolchain.New(toolchain.Options{Dir: filepath.Join(b.TempDir(), "toolchains"), Registry: DefaultRegistry})
	if err != nil {
		b.Fatal(err)
	}
	bareArgv, toolVersion := benchBareCommand(b, tools, src, plan)
	b.Logf("%s: %s %s (%s), %d packages; install %q", src, pm, toolVersion, plan.Tool.Source, lockedPackages(src, pm), install.Argv)
	// The registries a worker allows by default (npm's, and Yarn
	// classic's, which its lockfiles name).
	var rules []egress.Rule
	for _, u := range []string{DefaultRegistry, "https://registry.yarnpkg.com/"} {
		rule, err := egress.RuleFromURL(u)
		if err != nil {
			b.Fatal(err)
		}
		rules = append(rules, rule)
	}
	ca, err := egress.LoadOrCreateCA(filepath.Join(b.TempDir(), "ca"))
	if err != nil {
		b.Fatal(err)
	}
	bare := func(cache string) time.Duration {
		dir := copyRepo(b, src)
		cmd := exec.Command(bareArgv[0], bareArgv[1:]...)
		cmd.Dir = dir
		cmd.Env = append([]string{"PATH=" + filepath.Dir(bareArgv[0]) + ":" + DefaultPath, "HOME=" + b.TempDir(), "CI=true", "LANG=C.UTF-8"}, bareCacheEnv(pm, cache)...)
		// The worker's own trust (a host whose roots node does not
		// bundle), as a bare install on it has.
		for _, k := range []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"} {
			if v := os.Getenv(k); v != "" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bare %q: %v\n%s", bareArgv, err, out)
		}
		return time.Since(start)
	}
	gilf := func(e *Executor) (inst, fixed time.Duration) {
		dir := copyRepo(b, src)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		res, err := e.Run(ctx, executors.Request{Dir: dir, Plan: validation.Plan{PackageManager: pm, Tool: plan.Tool, Steps: []validation.Step{install}}})
		wall := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		st := res.Steps[0]
		if st.Status != validation.StatusPassed {
			b.Fatalf("gilf install: %s\n%s\n%s", st.Status, st.Output.Head, st.Output.Tail)
		}
		if eg := st.Egress; eg.Throttled != 0 || len(eg.Denied) != 0 {
			b.Fatalf("a normal install met a limit: throttled %d, denied %+v", eg.Throttled, eg.Denied)
		}
		// The install step as its phase times it: the step's process and
		// what gilf does before it starts (its proxy, the seeding of the
		// package manager's cache).
		inst = st.Duration
		for _, p := range res.Phases {
			if p.Name == "step:"+validation.StepInstall {
				inst = time.Duration(p.Ms) * time.Millisecond
			}
		}
		if eg := st.Egress; eg != nil {
			reqs := 0
			for _, h := range eg.Allowed {
				reqs += h.Connections
			}
			if eg.Cache != nil {
				b.Logf("gilf install %v (its process %v): requests %d, cache hits %d misses %d served %d B; phases %+v", inst, st.Duration, reqs, eg.Cache.Hits, eg.Cache.Misses, eg.Cache.BytesServed, res.Phases)
			}
		}
		return inst, wall - inst
	}
	var cold, first, warm, second, fixed, firstCPU []time.Duration
	b.ResetTimer()
	for range b.N {
		cache, err := egress.OpenCache(egress.CacheConfig{Dir: filepath.Join(b.TempDir(), "cache")})
		if err != nil {
			b.Fatal(err)
		}
		e, err := New(discardLogger(), Options{WorkRoot: benchWorkRoot(b), Tools: tools, Egress: EgressOptions{AllowHosts: rules, CA: ca, Cache: cache}, Warm: WarmOptions{Dir: filepath.Join(b.TempDir(), "warm")}})
		if err != nil {
			b.Fatal(err)
		}
		pmCache := b.TempDir()
		cold = append(cold, bare(pmCache))
		cpu := selfCPU()
		in, fx := gilf(e)
		firstCPU = append(firstCPU, selfCPU()-cpu)
		first, fixed = append(first, in), append(fixed, fx)
		warm = append(warm, bare(pmCache))
		in, fx = gilf(e)
		second, fixed = append(second, in), append(fixed, fx)
		b.Logf("bare cold %v, gilf first %v (gilf's own CPU %v), bare warm %v, gilf second %v; load %s", cold[len(cold)-1], first[len(first)-1], firstCPU[len(firstCPU)-1], warm[len(warm)-1], in, loadAverage())
	}
	b.StopTimer()
	b.ReportMetric(float64(lockedPackages(src, pm)), "packages")
	b.ReportMetric(msOf(median(cold)), "bare-cold-ms/op")
	b.ReportMetric(msOf(median(first)), "gilf-first-ms/op")
	b.ReportMetric(msOf(median(warm)), "bare-warm-ms/op")
	b.ReportMetric(msOf(median(second)), "gilf-second-ms/op")
	b.ReportMetric(float64(median(first))/float64(median(cold)), "first/cold")
	b.ReportMetric(float64(median(second))/float64(median(warm)), "second/warm")
	// The same ratios of each iteration's neighbours, median: on a
	// shared host the load drifts less within an iteration than across
	// the run.
	b.ReportMetric(medianRatio(first, cold), "first/cold-paired")
	b.ReportMetric(medianRatio(second, warm), "second/warm-paired")
	b.ReportMetric(msOf(median(fixed)), "gilf-fixed-ms/op")
	b.ReportMetric(msOf(median(firstCPU)), "gilf-first-cpu-ms/op")
}

// benchBareCommand is the install argv of plan run bare on the worker
// with the binary gilf runs in the sandbox: the worker's npm, the
// toolchain's build of the pinned version, or node on the committed Yarn
// release. It returns the argv (an absolute command) and the version.
func benchBareCommand(b *testing.B, tools *toolchain.Cache, dir string, plan validation.Plan) ([]string, string) {
	b.Helper()
	var install []string
	for _, s := range plan.Steps {
		if s.Name == validation.StepInstall {
			install = s.Argv
		}
	}
	tr := plan.Tool
	tr.Manager = plan.PackageManager
	switch {
	case tr.Release != "":
		node, err := exec.LookPath("node")
		if err != nil {
			b.Fatal(err)
		}
		return append([]string{node, filepath.Join(dir, tr.Release)}, install[1:]...), tr.Version + " (committed release)"
	case tr.Manager == validation.NPM:
		npm, err := exec.LookPath("npm")
		if err != nil {
			b.Fatal(err)
		}
		v, _ := hostToolVersion("npm", DefaultPath)
		return append([]string{npm}, install[1:]...), v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t, err := tools.Prepare(ctx, tr)
	if err != nil {
		b.Fatalf("prepare %s: %v", tr.Manager, err)
	}
	return append([]string{filepath.Join(t.Dir, "bin", validation.ToolBinary(tr.Manager))}, install[1:]...), t.Version
}

// bareCacheEnv points a bare package manager's own cache (and whatever
// else it keeps between installs) at dir: empty for a cold install,
// filled by it for a warm one.
func bareCacheEnv(pm validation.PackageManager, dir string) []string {
	switch pm {
	case validation.PNPM:
		return []string{"npm_config_store_dir=" + filepath.Join(dir, "store"), "npm_config_cache_dir=" + filepath.Join(dir, "cache"),
			"npm_config_state_dir=" + filepath.Join(dir, "state"), "npm_config_manage_package_manager_versions=false"}
	case validation.Yarn:
		return []string{"YARN_CACHE_FOLDER=" + dir}
	case validation.YarnBerry:
		return []string{"YARN_CACHE_FOLDER=" + filepath.Join(dir, "cache"), "YARN_GLOBAL_FOLDER=" + filepath.Join(dir, "global"),
			"YARN_ENABLE_GLOBAL_CACHE=false", "YARN_ENABLE_TELEMETRY=0"}
	case validation.Bun:
		return []string{"BUN_INSTALL_CACHE_DIR=" + dir}
	}
	return []string{"npm_config_cache=" + dir}
}

// lockedPackages counts the packages dir's lockfile locks from a
// registry: the distinct sha512 integrities it names, or for Yarn 2+
// (whose lockfile keeps checksums of its own) its npm resolutions.
func lockedPackages(dir string, pm validation.PackageManager) int {
	for _, name := range []string{"bun.lock", "pnpm-lock.yaml", "yarn.lock", "npm-shrinkwrap.json", "package-lock.json"} {
		lock, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if pm == validation.YarnBerry {
			return len(berryResolution.FindAll(lock, -1))
		}
		return len(lockfileSums(lock))
	}
	return 0
}

// berryResolution is a Yarn 2+ lockfile's resolution of a registry
// package.
var berryResolution = regexp.MustCompile(`(?m)^  resolution: "[^"]+@npm:`)

// selfCPU is the CPU time this process has used: gilf's side of a run
// (its proxy and verifying cache; the sandbox's processes are not
// counted), which the load of a shared host does not inflate as it does
// wall time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the host's 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// BenchmarkRunFixedCost is gilf's fixed cost on a repository with no
// dependencies (shared data: util-deprecate): the run's wall time minus
// its steps' time, median (target ≤ 250 ms). Each phase's median is a
// metric too.
//
//	go test ./executors/local -run '^$' -bench RunFixedCost -benchtime 10x
func BenchmarkRunFixedCost(b *testing.B) {
	src := extractRepo(b, shared.Data(b, "repos", "util-deprecate.tar.gz"))
	e, err := New(discardLogger(), Options{WorkRoot: benchWorkRoot(b)})
	if err != nil {
		b.Fatal(err)
	}
	var fixed []time.Duration
	phases := map[string][]time.Duration{}
	b.ResetTimer()
	for range b.N {
		dir := copyRepo(b, src)
		start := time.Now()
		res, err := e.Run(context.Background(), executors.Request{Dir: dir, Plan: validation.Plan{PackageManager: validation.NPM, Steps: []validation.Step{
			{Name: validation.StepInstall, Argv: validation.InstallArgv(validation.NPM, false), Network: validation.NetworkRegistry, Timeout: time.Minute},
		}}})
		wall := time.Since(start)
		if err != nil || res.Steps[0].Status != validation.StatusPassed {
			b.Fatalf("run: %v %+v", err, res.Steps)
		}
		fixed = append(fixed, wall-res.Steps[0].Duration)
		for _, p := range res.Phases {
			phases[p.Name] = append(phases[p.Name], time.Duration(p.Ms)*time.Millisecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(msOf(median(fixed)), "fixed-ms/op")
	for name, v := range phases {
		b.ReportMetric(msOf(median(v)), name+"-ms/op")
	}
}

// medianRatio is the median of a[i]/b[i], as median takes it.
func medianRatio(a, b []time.Duration) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// msOf is d in milliseconds, for a metric.
func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// extractRepo unpacks a repository tarball (one top directory) and
// returns that directory.
func extractRepo(b *testing.B, tarball string) string {
	b.Helper()
	dir := b.TempDir()
	if out, err := exec.Command("tar", "-xzf", tarball, "-C", dir).CombinedOutput(); err != nil {
		b.Fatalf("tar: %v\n%s", err, out)
	}
	des, err := os.ReadDir(dir)
	if err != nil || len(des) != 1 {
		b.Fatalf("%s: want one top directory (%v)", tarball, err)
	}
	return filepath.Join(dir, des[0].Name())
}

// copyRepo copies src into a fresh directory.
func copyRepo(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "repo")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		tb.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

// benchWorkRoot is a work root the sandbox uid can traverse.
func benchWorkRoot(b *testing.B) string {
	b.Helper()
	d := b.TempDir()
	for p := d; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			b.Fatal(err)
		}
	}
	return d
}
