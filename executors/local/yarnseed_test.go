package local

import (
	"crypto/sha512"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// A yarn.lock installed twice by Yarn classic through the verifying
// cache: the second run's yarn finds every tarball the cache verified in
// the offline mirror seeded before it starts, fetches none of them
// through the proxy, and the record counts them as served from the
// cache. What the sandbox does to its mirror leaves the cache as it was;
// a mirror or ~/.yarnrc already in HOME is never written through.
func TestInstallSeededYarnMirror(t *testing.T) {
	r, rule, cache := registryAndCache(t)
	src := registryRepo(t, r.URL, nil)
	lock := yarnLockfile(t, src)
	tarballs := yarnLockTarballs(lock)
	if len(tarballs) == 0 {
		t.Fatalf("the lockfile names no tarball with a sha512:\n%s", lock)
	}
	install := validation.Step{Name: validation.StepInstall, Argv: validation.InstallArgv(validation.Yarn, true), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute}
	tamper := shStep("tamper", `n=0; for f in "$HOME/`+yarnMirrorDir+`"/*.tgz; do [ -f "$f" ] && chmod u+w "$f" && echo tampered > "$f" && n=$((n+1)); done; echo "overwrote $n"`, time.Minute)
	sums := make([][]byte, len(tarballs))
	for i, tb := range tarballs {
		sums[i] = tb.sum
	}
	recs, outs := seededTwice(t, validation.Yarn, rule, cache, src, len(tarballs), install, tamper)
	if requests := proxyRequests(recs[1]); requests != 0 {
		t.Errorf("second run: %d requests through the proxy; want none, every tarball seeded (first run: %+v)", requests, recs[0].Allowed)
	}
	// The first run had no mirror (the cache held nothing to seed it
	// with); the second had every tarball there.
	if !strings.Contains(outs[0], "overwrote 0") || !strings.Contains(outs[1], "overwrote "+strconv.Itoa(len(tarballs))) {
		t.Errorf("the sandbox's mirror: first run %q, second %q; want 0, then the %d seeded tarballs", outs[0], outs[1], len(tarballs))
	}
	wantCacheIntact(t, cache, sums)

	// The bound: exactly the bytes of all of them seeds all; a byte less
	// seeds one fewer.
	total := cachedBytes(t, cache, sums)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, validation.LockfileYarn), lock, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		max  int64
		want int
	}{{total, len(tarballs)}, {total - 1, len(tarballs) - 1}} {
		home := t.TempDir()
		n, size, err := seedYarnMirror(cache, ws, home, os.Getuid(), os.Getgid(), c.max)
		if err != nil || n != c.want || size > c.max {
			t.Errorf("seed at most %d bytes: %d tarballs, %d bytes, %v; want %d tarballs", c.max, n, size, err, c.want)
		}
		rc, err := os.ReadFile(filepath.Join(home, yarnUserRC))
		if err != nil || string(rc) != `yarn-offline-mirror "`+SandboxHome+"/"+yarnMirrorDir+"\"\n" {
			t.Errorf("~/.yarnrc: %q, %v", rc, err)
		}
	}
	// The mirror, or ~/.yarnrc, already there as a link elsewhere:
	// nothing made there.
	for _, name := range []string{yarnMirrorDir, yarnUserRC} {
		home, elsewhere := t.TempDir(), t.TempDir()
		if err := os.Symlink(filepath.Join(elsewhere, "t"), filepath.Join(home, name)); err != nil {
			t.Fatal(err)
		}
		if n, _, err := seedYarnMirror(cache, ws, home, os.Getuid(), os.Getgid(), MaxSeedBytes); n != 0 || err != nil {
			t.Errorf("existing %s: %d seeded, %v", name, n, err)
		}
		if des, _ := os.ReadDir(elsewhere); len(des) != 0 {
			t.Errorf("existing %s: seeding wrote through the link: %v", name, des)
		}
	}

	// The manager decides which cache is seeded: none but Yarn classic
	// reads this mirror (nor npm's cache, which has no lockfile here).
	for _, c := range []struct {
		pm   validation.PackageManager
		want int
	}{{validation.Yarn, len(tarballs)}, {validation.YarnBerry, 0}, {validation.PNPM, 0}, {validation.Bun, 0}, {validation.NPM, 0}} {
		home := t.TempDir()
		if n, _, err := seedInstallCache(c.pm, cache, runDirs{Workspace: ws, Home: home}, os.Getuid(), os.Getgid(), MaxSeedBytes); n != c.want || err != nil {
			t.Errorf("%s: %d seeded, %v; want %d", c.pm, n, err, c.want)
		}
	}
}

// yarnLockfile makes the yarn.lock of the repository in src with the
// worker's Yarn classic, bare, against the registry its .yarnrc names,
// writes it into src and returns it.
func yarnLockfile(t *testing.T, src string) []byte {
	t.Helper()
	dir := copyRepo(t, src)
	yarn, err := exec.LookPath("yarn")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(yarn, "install", "--ignore-scripts", "--non-interactive")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + DefaultPath, "HOME=" + t.TempDir(), "YARN_CACHE_FOLDER=" + t.TempDir(), "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("yarn install: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, validation.LockfileYarn))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, validation.LockfileYarn), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// The tarballs of a yarn.lock: each entry with a registry URL and a
// sha512, by the file name Yarn looks it up by in a mirror; nothing that
// would name a file elsewhere, or a file that is not a plain name.
func TestYarnLockTarballs(t *testing.T) {
	sri := func(s string) (string, []byte) {
		sum := sha512.Sum512([]byte(s))
		return "sha512-" + base64.StdEncoding.EncodeToString(sum[:]), sum[:]
	}
	a, aSum := sri("a")
	b, bSum := sri("b")
	c, _ := sri("c")
	d, dSum := sri("d")
	lock := `# THIS IS AN AUTOGENERATED FILE. DO NOT EDIT THIS FILE DIRECTLY.
# yarn lockfile v1


"@babel/code-frame@^7.0.0", "@babel/code-frame@^7.0.1":
  version "7.0.0"
  resolved "https://registry.yarnpkg.com/@babel/code-frame/-/code-frame-7.0.0.tgz#06e2ab19bdb535385559aabb5ba59729482800f8"
  integrity ` + a + `
  dependencies:
    "@babel/highlight" "^7.0.0"

loose-envify@^1.0.0:
  version "1.4.0"
  resolved "https://registry.yarnpkg.com/loose-envify/-/loose-envify-1.4.0.tgz#71ee51fa7be4caec1a63839f7e682d8132d30caf"
  integrity ` + b + ` sha1-ce5R+nvkyuwaY4OffmgtgTLTDK8=

loose-envify@^1.1.0:
  version "1.4.0"
  resolved "https://registry.yarnpkg.com/loose-envify/-/loose-envify-1.4.0.tgz#71ee51fa7be4caec1a63839f7e682d8132d30caf"
  integrity ` + b + `

old@^1.0.0:
  version "1.0.0"
  resolved "https://registry.yarnpkg.com/old/-/old-1.0.0.tgz#71ee51fa7be4caec1a63839f7e682d8132d30caf"

dotdot@1:
  resolved "https://registry.example/x/-/.."
  integrity ` + c + `

escaped@1:
  resolved "https://registry.example/@s%2f..%2f..%2fetc/-/passwd.tgz"
  integrity ` + c + `

git@1:
  resolved "git+ssh://git@github.com/a/b.git#abc"
  integrity ` + c + `

direct@1:
  resolved "https://codeload.example/a/b/tar.gz/direct-1.tgz"
  integrity ` + d + `

twice@1:
  resolved "https://one.example/twice/-/twice-1.tgz"
  integrity ` + c + `

twice@npm:other-twice@1:
  resolved "https://other.example/twice/-/twice-1.tgz"
  integrity ` + a + `
`
	got := yarnLockTarballs([]byte(lock))
	want := []yarnTarball{
		{aSum, "@babel-code-frame-7.0.0.tgz"},
		{bSum, "loose-envify-1.4.0.tgz"},
		{dSum, "direct-1.tgz"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(yarnTarball{})); diff != "" {
		t.Errorf("tarballs (-want +got):\n%s", diff)
	}
}

// Seeding the mirror reads no yarn.lock through a link or past its bound,
// and names no mirror it has nothing for.
func TestSeedYarnMirrorRefuses(t *testing.T) {
	cache, err := egress.OpenCache(egress.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512([]byte("x"))
	lock := []byte("x@1:\n  resolved \"https://r.example/x/-/x-1.tgz\"\n  integrity sha512-" + base64.StdEncoding.EncodeToString(sum[:]) + "\n")
	uid, gid := os.Getuid(), os.Getgid()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, validation.LockfileYarn), lock, 0o600); err != nil {
		t.Fatal(err)
	}

	// The lockfile a link: not read.
	ws2 := t.TempDir()
	if err := os.Symlink(filepath.Join(ws, validation.LockfileYarn), filepath.Join(ws2, validation.LockfileYarn)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := seedYarnMirror(cache, ws2, t.TempDir(), uid, gid, MaxSeedBytes); err == nil {
		t.Error("a linked yarn.lock was read")
	}

	// MaxSeedLockfileBytes: a yarn.lock at the bound is read, one byte
	// over it is refused.
	for _, c := range []struct {
		size int
		ok   bool
	}{{MaxSeedLockfileBytes, true}, {MaxSeedLockfileBytes + 1, false}} {
		ws := t.TempDir()
		big := append(append([]byte{}, lock...), make([]byte, c.size-len(lock))...)
		for i := len(lock); i < len(big); i++ {
			big[i] = '\n'
		}
		if err := os.WriteFile(filepath.Join(ws, validation.LockfileYarn), big, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := seedYarnMirror(cache, ws, t.TempDir(), uid, gid, MaxSeedBytes)
		if (err == nil) != c.ok {
			t.Errorf("a yarn.lock of %d bytes: %v", c.size, err)
		}
	}

	// A digest the cache does not hold seeds nothing, and names no
	// mirror.
	home := t.TempDir()
	if n, _, err := seedYarnMirror(cache, ws, home, uid, gid, MaxSeedBytes); n != 0 || err != nil {
		t.Errorf("empty cache: %d seeded, %v", n, err)
	}
	if des, _ := os.ReadDir(home); len(des) != 0 {
		t.Errorf("empty cache: HOME has %v", des)
	}
}
