package local

import (
	"crypto/sha512"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/registrytest"
	"github.com/gilf-review/gilf/validation"
)

// A lockfile installed twice through the verifying cache: the second
// run's npm finds every tarball the cache verified in its own cache,
// seeded before it starts, fetches none of them through the proxy, and
// the record counts them as served from the cache. The sandbox gets a
// copy: overwriting it leaves the shared cache's bytes as they were.
func TestInstallSeededFromCache(t *testing.T) {
	r, rule, cache := registryAndCache(t)
	src := registryRepo(t, r.URL, nil)
	lock := npmLockfile(t, src, r.URL)
	sums := lockfileSums(lock)
	if len(sums) == 0 {
		t.Fatalf("the lockfile names no sha512:\n%s", lock)
	}
	install := validation.Step{Name: validation.StepInstall, Argv: validation.InstallArgv(validation.NPM, true), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute}
	// The step after the install overwrites every seeded tarball it
	// can find in its own npm cache.
	tamper := shStep("tamper", `n=0; for f in $(find "$HOME/.npm/_cacache/content-v2/sha512" -type f); do chmod u+w "$f" && echo tampered > "$f" && n=$((n+1)); done; echo "overwrote $n"`, time.Minute)
	recs, outs := seededTwice(t, validation.NPM, rule, cache, src, len(sums), install, tamper)
	if requests := proxyRequests(recs[1]); requests >= len(sums) {
		t.Errorf("second run: %d requests through the proxy for %d seeded tarballs", requests, len(sums))
	}
	if !strings.Contains(outs[1], "overwrote "+strconv.Itoa(len(sums))) {
		t.Errorf("second run's npm cache: %q, want the %d seeded tarballs there", outs[1], len(sums))
	}
	// What the sandbox overwrote was its own copy.
	wantCacheIntact(t, cache, sums)

	// The bound: exactly the bytes of all of them seeds all; a byte
	// less seeds one fewer.
	total := cachedBytes(t, cache, sums)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "package-lock.json"), lock, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		max  int64
		want int
	}{{total, len(sums)}, {total - 1, len(sums) - 1}} {
		n, size, err := seedNpmCache(cache, ws, t.TempDir(), os.Getuid(), os.Getgid(), c.max)
		if err != nil || n != c.want || size > c.max {
			t.Errorf("seed at most %d bytes: %d tarballs, %d bytes, %v; want %d tarballs", c.max, n, size, err, c.want)
		}
	}
}

// Seeding reads no lockfile through a link or past its bound, and never
// writes through a HOME/.npm that is already there.
func TestSeedNpmCacheRefuses(t *testing.T) {
	cache, err := egress.OpenCache(egress.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512([]byte("x"))
	lock := []byte(`{"packages":{"node_modules/x":{"integrity":"sha512-` + base64.StdEncoding.EncodeToString(sum[:]) + `"}}}`)
	uid, gid := os.Getuid(), os.Getgid()

	// .npm already there, as a link to elsewhere: nothing made there.
	ws, home, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "package-lock.json"), lock, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(home, ".npm")); err != nil {
		t.Fatal(err)
	}
	if n, _, err := seedNpmCache(cache, ws, home, uid, gid, MaxSeedBytes); n != 0 || err != nil {
		t.Errorf("existing .npm: %d seeded, %v", n, err)
	}
	if des, _ := os.ReadDir(elsewhere); len(des) != 0 {
		t.Errorf("seeding wrote through the link: %v", des)
	}

	// The lockfile a link: not read.
	ws2 := t.TempDir()
	if err := os.Symlink(filepath.Join(ws, "package-lock.json"), filepath.Join(ws2, "package-lock.json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := seedNpmCache(cache, ws2, t.TempDir(), uid, gid, MaxSeedBytes); err == nil {
		t.Error("a linked lockfile was read")
	}

	// MaxSeedLockfileBytes: at the bound read, past it refused.
	big := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(big, make([]byte, MaxSeedLockfileBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readCapped(big, MaxSeedLockfileBytes); err != nil {
		t.Errorf("a lockfile of MaxSeedLockfileBytes: %v", err)
	}
	if _, err := readCapped(big, MaxSeedLockfileBytes-1); err == nil {
		t.Error("a lockfile over the bound was read")
	}

	// A FIFO in the lockfile's place: refused, not waited on.
	ws3 := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(ws3, "package-lock.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := seedNpmCache(cache, ws3, t.TempDir(), uid, gid, MaxSeedBytes); err == nil {
		t.Error("a FIFO lockfile was read")
	}

	// A digest the cache does not hold seeds nothing.
	if n, _, err := seedNpmCache(cache, ws, t.TempDir(), uid, gid, MaxSeedBytes); n != 0 || err != nil {
		t.Errorf("empty cache: %d seeded, %v", n, err)
	}
}

// seededTwice runs install and then tamper (a step that overwrites the
// seeded copies it finds and says "overwrote N") twice, each in a run of
// its own with pm's plan, through cache. The first run must miss each of
// the n tarballs, the second hit them all, seeded. It returns each run's
// install record and tamper's output.
func seededTwice(t *testing.T, pm validation.PackageManager, rule egress.Rule, cache *egress.Cache, src string, n int, install, tamper validation.Step) ([]*validation.Egress, []string) {
	t.Helper()
	var recs []*validation.Egress
	var outs []string
	for i := range 2 {
		e := newExec(t, Options{Egress: EgressOptions{AllowHosts: []egress.Rule{rule}, Cache: cache}})
		res, err := e.Run(t.Context(), executors.Request{Dir: copyRepo(t, src), Plan: validation.Plan{PackageManager: pm, Steps: []validation.Step{install, tamper}}})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, res.Steps[0], validation.StatusPassed)
		wantStatus(t, res.Steps[1], validation.StatusPassed)
		if res.Steps[0].Egress == nil || res.Steps[0].Egress.Cache == nil {
			t.Fatalf("run %d: no cache record: %+v", i, res.Steps[0].Egress)
		}
		recs = append(recs, res.Steps[0].Egress)
		outs = append(outs, res.Steps[1].Output.Head)
	}
	first, second := recs[0].Cache, recs[1].Cache
	if first.Misses < n || first.Hits != 0 {
		t.Errorf("first run %+v: want a miss for each of the %d tarballs", first, n)
	}
	if second.Misses != 0 || second.Hits < n {
		t.Errorf("second run %+v: want the %d tarballs seeded, nothing fetched", second, n)
	}
	return recs, outs
}

// proxyRequests counts the requests an install step made through its
// proxy.
func proxyRequests(rec *validation.Egress) int {
	n := 0
	for _, h := range rec.Allowed {
		n += h.Connections
	}
	return n
}

// wantCacheIntact checks the cache still holds each of sums, with bytes
// of that digest.
func wantCacheIntact(t *testing.T, cache *egress.Cache, sums [][]byte) {
	t.Helper()
	for _, sum := range sums {
		f, _, ok := cache.OpenTarball(sum)
		if !ok {
			t.Fatalf("the cache lost %x", sum[:8])
		}
		h := sha512.New()
		_, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Sum(nil); string(got) != string(sum) {
			t.Errorf("the cache's tarball %x now has digest %x", sum[:8], got[:8])
		}
	}
}

// cachedBytes is the size of the cache's tarballs of sums, together.
func cachedBytes(t *testing.T, cache *egress.Cache, sums [][]byte) int64 {
	t.Helper()
	total := int64(0)
	for _, sum := range sums {
		f, size, ok := cache.OpenTarball(sum)
		if !ok {
			t.Fatalf("the cache lacks %x", sum[:8])
		}
		f.Close()
		total += size
	}
	return total
}

// registryAndCache is the package's registry, its allow-list rule and
// a new, empty verifying cache.
func registryAndCache(t *testing.T) (*registrytest.Registry, egress.Rule, *egress.Cache) {
	t.Helper()
	r := registry(t)
	rule, err := egress.RuleFromURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := egress.OpenCache(egress.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	return r, rule, cache
}

// npmLockfile makes the lockfile of the repository in src with the
// worker's npm, bare, against the loopback registry at url.
func npmLockfile(t *testing.T, src, url string) []byte {
	t.Helper()
	dir := copyRepo(t, src)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(npm, "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund", "--registry", url)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + DefaultPath, "HOME=" + t.TempDir(), "npm_config_cache=" + t.TempDir(), "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install --package-lock-only: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "package-lock.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}
