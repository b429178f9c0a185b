package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/validation"
)

// BenchmarkInstallCacheRealRepo measures the install step of a real
// repository's real lockfile (shared data: typicode/steno, npm ci, 391
// packages) from the npm registry, gilf against the same npm run bare on
// the worker, alternated in each iteration:
//
//   - bare-cold: npm ci with an empty npm cache;
//   - gilf-first: the install step through gilf's terminating proxy with an
//     empty verifying cache (and so an empty npm cache in the sandbox);
//   - bare-warm: npm ci again, its cache filled by bare-cold;
//   - gilf-second: the install step again, the proxy's cache filled by
//     gilf-first (and the sandbox's npm cache seeded from it).
//
// With -v it logs each gilf install's requests through the proxy, its
// cache hits, misses and bytes served, and the run's phases.
//
// Metrics are medians: each install's ms/op, the ratios first/cold
// (target ≤ 1.15) and second/warm (target ≤ 1.10), and gilf's fixed cost
// (the run's wall time minus its steps', target ≤ 250 ms). It needs the
// npm registry (the one network this workplace allows installs).
//
//	go test ./executors/local -run '^$' -bench InstallCacheRealRepo -benchtime 3x
func BenchmarkInstallCacheRealRepo(b *testing.B) {
	src := extractRepo(b, shared.Data(b, "repos", "steno.tar.gz"))
	npm, err := exec.LookPath("npm")
	if err != nil {
		b.Fatal(err)
	}
	rule, err := egress.RuleFromURL(DefaultRegistry)
	if err != nil {
		b.Fatal(err)
	}
	ca, err := egress.LoadOrCreateCA(filepath.Join(b.TempDir(), "ca"))
	if err != nil {
		b.Fatal(err)
	}
	argv := validation.InstallArgv(validation.NPM, true)
	bare := func(cache string) time.Duration {
		dir := copyRepo(b, src)
		cmd := exec.Command(npm, argv[1:]...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + DefaultPath, "HOME=" + b.TempDir(), "npm_config_cache=" + cache, "CI=true", "LANG=C.UTF-8"}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bare npm ci: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	gilf := func(e *Executor) (install, fixed time.Duration) {
		dir := copyRepo(b, src)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		res, err := e.Run(ctx, executors.Request{Dir: dir, Plan: validation.Plan{PackageManager: validation.NPM, Steps: []validation.Step{
			{Name: validation.StepInstall, Argv: argv, Network: validation.NetworkRegistry, Timeout: 10 * time.Minute},
		}}})
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
		if eg := st.Egress; eg != nil {
			reqs := 0
			for _, h := range eg.Allowed {
				reqs += h.Connections
			}
			if eg.Cache != nil {
				b.Logf("gilf install %v: requests %d, cache hits %d misses %d served %d B; phases %+v", st.Duration, reqs, eg.Cache.Hits, eg.Cache.Misses, eg.Cache.BytesServed, res.Phases)
			}
		}
		return st.Duration, wall - st.Duration
	}
	var cold, first, warm, second, fixed []time.Duration
	b.ResetTimer()
	for range b.N {
		cache, err := egress.OpenCache(egress.CacheConfig{Dir: filepath.Join(b.TempDir(), "cache")})
		if err != nil {
			b.Fatal(err)
		}
		e, err := New(discardLogger(), Options{WorkRoot: benchWorkRoot(b), Egress: EgressOptions{AllowHosts: []egress.Rule{rule}, CA: ca, Cache: cache}})
		if err != nil {
			b.Fatal(err)
		}
		npmCache := b.TempDir()
		cold = append(cold, bare(npmCache))
		in, fx := gilf(e)
		first, fixed = append(first, in), append(fixed, fx)
		warm = append(warm, bare(npmCache))
		in, fx = gilf(e)
		second, fixed = append(second, in), append(fixed, fx)
		b.Logf("bare cold %v, gilf first %v, bare warm %v, gilf second %v", cold[len(cold)-1], first[len(first)-1], warm[len(warm)-1], in)
	}
	b.StopTimer()
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
