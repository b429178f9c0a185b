package local

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/toolchain"
	"github.com/gilf-review/gilf/validation"
)

// pnpmWarmVersion is the pnpm the warm-disk tests run: a pnpm 10 (store
// v10) the package's registry publishes (internal/registrytest/tools.txt).
const pnpmWarmVersion = "10.14.0"

// pnpmTool prepares pnpmWarmVersion from the package's registry, as a
// worker does; it returns the toolchain and the path of its pnpm.
func pnpmTool(t *testing.T) (*toolchain.Cache, string) {
	return warmTool(t, validation.PNPM, pnpmWarmVersion)
}

// warmTool prepares version of pm from the package's registry; it
// returns the toolchain and the path of its binary.
func warmTool(t *testing.T, pm validation.PackageManager, version string) (*toolchain.Cache, string) {
	t.Helper()
	tools, err := toolchain.New(toolchain.Options{Dir: filepath.Join(t.TempDir(), "toolchains"), Registry: registry(t).URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tl, err := tools.Prepare(ctx, validation.ToolRequest{Manager: pm, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	return tools, filepath.Join(tl.Dir, "bin", validation.ToolBinary(pm))
}

// registryTarball is p's tarball from the registry at url (an unscoped
// name), checked against the lockfile's integrity.
func registryTarball(t *testing.T, url string, p lockedPackage) []byte {
	t.Helper()
	name, version, _ := strings.Cut(p.id, "@")
	resp, err := http.Get(fmt.Sprintf("%s/%s/-/%s-%s.tgz", strings.TrimSuffix(url, "/"), name, name, version))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v %s", p.id, err, resp.Status)
	}
	if sum := sha512.Sum512(b); !bytes.Equal(sum[:], p.sum) {
		t.Fatalf("%s: the registry's tarball is not the lockfile's", p.id)
	}
	return b
}

// barePnpm runs pnpm bare in dir (its .npmrc names the registry).
func barePnpm(t *testing.T, pnpm, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(pnpm, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + filepath.Dir(pnpm) + ":" + DefaultPath, "HOME=" + t.TempDir(), "CI=true", "LANG=C.UTF-8", "npm_config_manage_package_manager_versions=false"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pnpm %q: %v\n%s", args, err, out)
	}
}

// The store gilf writes is the store pnpm writes: for the real tree of the
// package's registry, installed by a real pnpm 10, the same index files
// (name, version, requiresBuild, each file's integrity, mode and size;
// only the time it was checked differs) and the same content files.
func TestPnpmStoreAsPnpmWritesIt(t *testing.T) {
	r := registry(t)
	_, pnpm := pnpmTool(t)
	src := registryRepo(t, r.URL, nil)
	store := t.TempDir()
	barePnpm(t, pnpm, src, "install", "--store-dir", store)
	pkgs := lockedTree(t, filepath.Join(src, "pnpm-lock.yaml"), pnpmLockPackages)
	mine := t.TempDir()
	w, err := newPnpmStore(mine)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		b := registryTarball(t, r.URL, p)
		if err := w.add(bytes.NewReader(b), p.sum, filepath.Join(w.root, pnpmIndexName(p.sum, p.id))); err != nil {
			t.Fatalf("%s: %v", p.id, err)
		}
	}
	theirs := filepath.Join(store, pnpmStoreLayout)
	for _, sub := range []string{"index", "files"} {
		want, got := storeNames(t, filepath.Join(theirs, sub)), storeNames(t, filepath.Join(w.root, sub))
		if !slices.Equal(got, want) {
			t.Errorf("%s: gilf wrote %d entries, pnpm %d; first differences: %v", sub, len(got), len(want), firstDiff(got, want))
		}
	}
	differ := 0
	for _, name := range storeNames(t, filepath.Join(theirs, "index")) {
		want, got := indexWithoutTimes(t, filepath.Join(theirs, "index", name)), indexWithoutTimes(t, filepath.Join(w.root, "index", name))
		if got != want {
			if differ++; differ <= 2 {
				t.Errorf("index %s:\ngilf %s\npnpm %s", name, got, want)
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d index files differ", differ, len(pkgs))
	}
}

// lockedTree are the packages the lockfile at p locks, read by parse:
// the registry's whole tree.
func lockedTree(t *testing.T, p string, parse func([]byte) []lockedPackage) []lockedPackage {
	t.Helper()
	lock, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := parse(lock)
	if len(pkgs) < 70 {
		t.Fatalf("%d packages read from %s, want the registry's tree:\n%s", len(pkgs), filepath.Base(p), lock)
	}
	return pkgs
}

// storeNames are the files under dir (relative, sorted).
func storeNames(t *testing.T, dir string) []string {
	t.Helper()
	return listTree(t, dir, func(_, rel string, de os.DirEntry) (string, error) {
		if de.IsDir() {
			return "", nil
		}
		return rel, nil
	})
}

// firstDiff lists a few names in one list and not the other.
func firstDiff(a, b []string) []string {
	var d []string
	for _, x := range a {
		if !slices.Contains(b, x) && len(d) < 5 {
			d = append(d, "+"+x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) && len(d) < 10 {
			d = append(d, "-"+x)
		}
	}
	return d
}

// indexWithoutTimes is an index file's JSON, keys sorted, its checkedAt
// times dropped.
func indexWithoutTimes(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var x map[string]any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	files, _ := x["files"].(map[string]any)
	for _, f := range files {
		delete(f.(map[string]any), "checkedAt")
	}
	out, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// A lockfile installed twice: the first run makes the warm image of its
// lockfile from the verifying cache, after its install passed; the second
// run's disk is a copy of it, and its pnpm links every package from the
// store it finds (no request through the proxy, each file hard-linked).
// What a step writes into its store stays in its run: the image is
// unchanged byte for byte, and a third run finds the package intact.
func TestInstallWarmDisk(t *testing.T) {
	for _, tc := range []struct {
		pm       validation.PackageManager
		version  string
		lockfile string
		packages func([]byte) []lockedPackage
		// links are a package file's links: pnpm and bun hard-link
		// from their store, Yarn copies.
		links int
		repo  func(t *testing.T, url string) (*toolchain.Cache, string)
	}{
		{validation.PNPM, pnpmWarmVersion, "pnpm-lock.yaml", pnpmLockPackages, 2, func(t *testing.T, url string) (*toolchain.Cache, string) {
			tools, pnpm := pnpmTool(t)
			src := registryRepo(t, url, nil)
			barePnpm(t, pnpm, src, "install", "--lockfile-only")
			return tools, src
		}},
		{validation.Bun, bunWarmVersion, "bun.lock", bunLockPackages, 2, func(t *testing.T, url string) (*toolchain.Cache, string) {
			tools, bun := warmTool(t, validation.Bun, bunWarmVersion)
			return tools, bunRepo(t, bun, url)
		}},
		{validation.Yarn, yarnWarmVersion, validation.LockfileYarn, yarnLockPackages, 1, func(t *testing.T, url string) (*toolchain.Cache, string) {
			tools, _ := warmTool(t, validation.Yarn, yarnWarmVersion)
			src := registryRepo(t, url, nil)
			yarnLockfile(t, src)
			return tools, src
		}},
	} {
		t.Run(string(tc.pm), func(t *testing.T) {
			r, rule, cache := registryAndCache(t)
			tools, src := tc.repo(t, r.URL)
			lock, err := os.ReadFile(filepath.Join(src, tc.lockfile))
			if err != nil {
				t.Fatal(err)
			}
			warmTwice(t, tools, rule, cache, src, len(tc.packages(lock)), tc.links, validation.Plan{PackageManager: tc.pm, Tool: validation.ToolRequest{Manager: tc.pm, Version: tc.version}})
		})
	}
}

// warmTwice runs plan's manager's install and a check of what it
// installed three times from src, and checks the warm disk of its n
// packages, whose files the manager installs with links links.
func warmTwice(t *testing.T, tools *toolchain.Cache, rule egress.Rule, cache *egress.Cache, src string, n, links int, plan validation.Plan) {
	t.Helper()
	warm := t.TempDir()
	plan.Steps = []validation.Step{
		{Name: validation.StepInstall, Argv: validation.InstallArgv(plan.PackageManager, true), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute},
		shStep("check", `node -e "require('express'); console.log('dependency loaded')" &&
echo "uid $(id -u)" && echo "links $(stat -L -c %h node_modules/express/package.json)" &&
f=node_modules/express/index.js && grep -c tampered $f; chmod u+w $f && echo tampered >> $f`, time.Minute),
	}
	run := func(i int) executors.Result {
		e := newToolExec(t, Options{Tools: tools, Egress: EgressOptions{AllowHosts: []egress.Rule{rule}, Cache: cache}, Warm: WarmOptions{Dir: warm}})
		res, err := e.Run(t.Context(), executors.Request{Dir: copyRepo(t, src), Plan: plan})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		wantStatus(t, res.Steps[0], validation.StatusPassed)
		wantStatus(t, res.Steps[1], validation.StatusPassed)
		if !strings.Contains(res.Steps[1].Output.Head, "dependency loaded") {
			t.Fatalf("run %d: %s", i, res.Steps[1].Output.Head)
		}
		return res
	}
	want := fmt.Sprintf("links %d\n0\n", links)
	first := run(0)
	if out := first.Steps[1].Output.Head; !strings.Contains(out, want) {
		t.Errorf("first run: %q, want %q", out, want)
	}
	if !slices.ContainsFunc(first.Phases, func(p validation.Phase) bool { return p.Name == "warm-disk" }) {
		t.Errorf("first run's phases %+v: no warm-disk", first.Phases)
	}
	imgs, _ := filepath.Glob(filepath.Join(warm, "*"+warmImageExt))
	if len(imgs) != 1 {
		t.Fatalf("warm images %v, want one", imgs)
	}
	// A uid of the pool owns the image's store; the next runs, alone,
	// take it: they change no owner.
	out, err := exec.Command("debugfs", "-R", "stat /"+warmStoreDir, imgs[0]).CombinedOutput()
	m := regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)\s`).FindSubmatch(out)
	if err != nil || m == nil || string(m[1]) == "0" {
		t.Fatalf("the image's store: %v\n%s", err, out)
	}
	owner := "uid " + string(m[1]) + "\n"
	before := fileSHA256(t, imgs[0])
	for i := 1; i <= 2; i++ {
		res := run(i)
		if slices.ContainsFunc(res.Phases, func(p validation.Phase) bool { return p.Name == "warm-disk" }) {
			t.Errorf("run %d made a warm image again", i)
		}
		if got := proxyRequests(res.Steps[0].Egress); got != 0 {
			t.Errorf("run %d: %d requests through the proxy, want none: every package from the warm store", i, got)
		}
		if c := res.Steps[0].Egress.Cache; c == nil || c.Hits < n {
			t.Errorf("run %d: cache record %+v, want the %d packages of the store", i, c, n)
		}
		out := res.Steps[1].Output.Head
		if !strings.Contains(out, owner) {
			t.Errorf("run %d: %q, want the run to have the store's owner, %q", i, out, owner)
		}
		if !strings.Contains(out, want) {
			t.Errorf("run %d: %q, want %q: the package from the store, untampered", i, out, want)
		}
	}
	if after := fileSHA256(t, imgs[0]); after != before {
		t.Errorf("the warm image changed under the runs")
	}
}

// fileSHA256 is the sha256 of the file at p, hex.
func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestPnpmLockPackages(t *testing.T) {
	sum := bytes.Repeat([]byte{7}, 64)
	sri := "sha512-" + b64(sum)
	lock := `lockfileVersion: '9.0'

settings:
  autoInstallPeers: true

importers:

  .:
    dependencies:
      a:
        specifier: 1.0.0
        version: 1.0.0

packages:

  a@1.0.0:
    resolution: {integrity: ` + sri + `}
    engines: {node: '>= 0.6'}

  '@scope/b@2.0.0':
    resolution: {integrity: ` + sri + `}

  c@https://example.com/c.tgz:
    resolution: {tarball: https://example.com/c.tgz}
    version: 1.0.0

  d@1.0.0:
    resolution: {integrity: ` + sri + `, tarball: https://example.com/d.tgz}

  e@1.0.0:
    resolution: {integrity: sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA=}

snapshots:

  f@1.0.0:
    resolution: {integrity: ` + sri + `}
`
	got := pnpmLockPackages([]byte(lock))
	var ids []string
	for _, p := range got {
		if !bytes.Equal(p.sum, sum) {
			t.Errorf("%s: sum %x", p.id, p.sum)
		}
		ids = append(ids, p.id)
	}
	if want := []string{"a@1.0.0", "@scope/b@2.0.0"}; !slices.Equal(ids, want) {
		t.Errorf("packages %q, want %q", ids, want)
	}
	for _, v := range []string{"'6.0'", "'5.4'", "'10.0'"} {
		if got := pnpmLockPackages([]byte(strings.Replace(lock, "'9.0'", v, 1))); got != nil {
			t.Errorf("lockfileVersion %s: %d packages, want none", v, len(got))
		}
	}
	if name := pnpmIndexName(sum, "@scope/b@2.0.0"); !strings.HasSuffix(name, "-@scope+b@2.0.0.json") || !strings.HasPrefix(name, filepath.Join("index", "07")+"/") {
		t.Errorf("index name %s", name)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestPnpmEntryName(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"package/index.js", "index.js", true},
		{"package/lib/a.js", "lib/a.js", true},
		{"other/lib/a.js", "lib/a.js", true},
		{"package.json", "package.json", true},
		{`package\lib.js`, "lib.js", true},
		{"package/./lib//a.js", "lib/a.js", true},
		{"package/../../etc/passwd", "etc/passwd", true},
		{"package/a/..", "", false},
		{"package/", "", false},
		{"package/a/.", "", false},
	} {
		got, ok := pnpmEntryName(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("pnpmEntryName(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// tarEntry is one entry of a test tarball.
type tarEntry struct {
	name string
	typ  byte
	mode int64
	body string
}

// testTarball is a gzip tarball of entries.
func testTarball(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	tw := tar.NewWriter(z)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.typ == tar.TypeSymlink || e.typ == tar.TypeLink {
			h.Linkname = "/etc/passwd"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := errors.Join(tw.Close(), z.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A tarball's entries become files of the store named by their digest:
// a path that would leave the package is dropped, a link is never
// followed (a symlink is left out, a hard link is an empty file as pnpm
// reads it), an executable is -exec; a device makes the package one pnpm
// would refuse, left out whole.
func TestPnpmStoreHostileTarball(t *testing.T) {
	w, err := newPnpmStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tgz := testTarball(t,
		tarEntry{"package/package.json", tar.TypeReg, 0o644, `{"name":"x","version":"1.0.0","scripts":{"postinstall":"node x"}}`},
		tarEntry{"package/bin/x", tar.TypeReg, 0o755, "#!/bin/sh\n"},
		tarEntry{"package/a/..", tar.TypeReg, 0o644, "escape"},
		tarEntry{"package/link", tar.TypeSymlink, 0o777, ""},
		tarEntry{"package/hard", tar.TypeLink, 0o644, ""},
	)
	sum := sha512.Sum512(tgz)
	idx := filepath.Join(w.root, pnpmIndexName(sum[:], "x@1.0.0"))
	if err := w.add(bytes.NewReader(tgz), sum[:], idx); err != nil {
		t.Fatal(err)
	}
	var x pnpmIndex
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range x.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"bin/x", "hard", "package.json"}; !slices.Equal(names, want) || !x.RequiresBuild || string(x.Name) != `"x"` {
		t.Errorf("index %s: files %q, want %q, requiresBuild", b, names, want)
	}
	exec := sha512.Sum512([]byte("#!/bin/sh\n"))
	if st, err := os.Stat(filepath.Join(w.root, "files", fmt.Sprintf("%x", exec[:1]), fmt.Sprintf("%x", exec[1:])+"-exec")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("the executable's store file: %v %v", st, err)
	}
	dev := testTarball(t, tarEntry{"package/package.json", tar.TypeReg, 0o644, `{}`}, tarEntry{"package/dev", tar.TypeChar, 0o644, ""})
	var bad *badTarballError
	if err := w.add(bytes.NewReader(dev), sum[:], idx+".dev"); !errors.As(err, &bad) {
		t.Errorf("a device entry: %v, want a tarball pnpm refuses", err)
	}
	if _, err := os.Lstat(idx + ".dev"); err == nil {
		t.Errorf("an index was written for a refused tarball")
	}
}

// The budget of a warm store: exactly the bytes (and files) of a package
// takes it; one byte (or one file) less leaves it out.
func TestPnpmStoreBudget(t *testing.T) {
	body := `{"name":"y","version":"1.0.0"}`
	tgz := testTarball(t, tarEntry{"package/package.json", tar.TypeReg, 0o644, body}, tarEntry{"package/index.js", tar.TypeReg, 0o644, "module.exports = 1\n"})
	size := int64(len(body) + len("module.exports = 1\n"))
	sum := sha512.Sum512(tgz)
	for _, c := range []struct {
		bytes int64
		files int
		want  error
	}{{size, 2, nil}, {size - 1, 2, errWarmFull}, {size, 1, errWarmFull}} {
		w, err := newPnpmStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		w.bytes, w.files = c.bytes, c.files
		err = w.add(bytes.NewReader(tgz), sum[:], filepath.Join(w.root, pnpmIndexName(sum[:], "y@1.0.0")))
		if !errors.Is(err, c.want) {
			t.Errorf("budget %d bytes, %d files: %v, want %v", c.bytes, c.files, err, c.want)
		}
	}
	if MaxWarmStoreBytes != 2<<30 || MaxWarmStoreFiles != 400_000 {
		t.Errorf("the defaults moved: %d bytes, %d files", MaxWarmStoreBytes, MaxWarmStoreFiles)
	}
}

// The images are bounded: past MaxBytes the least recently used go
// first; a temporary file a dead process left goes once it is old.
// A warm store its image gave the sandbox's uid is moved as it is; one
// another uid owns is made the sandbox's, every file of it.
func TestSeedWarmStoreOwner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		storeUID int
		wantFile int
	}{{"the sandbox's", 1001, 1002}, {"another's", 1003, 1001}} {
		t.Run(tc.name, func(t *testing.T) {
			base, ws := t.TempDir(), t.TempDir()
			store := filepath.Join(base, warmStoreDir)
			file := filepath.Join(store, "pkg", "index.js")
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(os.WriteFile(file, []byte("x"), 0o644), os.Lchown(file, 1002, 1002), os.Lchown(store, tc.storeUID, tc.storeUID)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := seedWarmStore(base, ws, pnpmSandboxStore, 1001, 1001); err != nil {
				t.Fatal(err)
			}
			st, err := os.Lstat(filepath.Join(ws, pnpmSandboxStore, "pkg", "index.js"))
			if err != nil {
				t.Fatal(err)
			}
			if !ownedBy(st, tc.wantFile, tc.wantFile) {
				t.Errorf("the store's file is %d's, want %d's", st.Sys().(*syscall.Stat_t).Uid, tc.wantFile)
			}
		})
	}
}

func TestEvictWarm(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	var paths []string
	for i, name := range []string{"a", "b", "c"} {
		p := filepath.Join(dir, name+warmImageExt)
		if err := os.WriteFile(p, bytes.Repeat([]byte{1}, 64<<10), 0o600); err != nil {
			t.Fatal(err)
		}
		used := now.Add(time.Duration(i-3) * time.Hour) // a oldest
		if err := os.Chtimes(p, used, used); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	stale := filepath.Join(dir, ".tmp-img-1")
	if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := now.Add(-2 * warmTmpStale)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	var one int64 = 64 << 10
	if err := evictWarm(dir, 2*one); err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if gone := err != nil; gone != (i == 0) {
			t.Errorf("%s: gone %v", filepath.Base(p), gone)
		}
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("a stale temporary image was kept")
	}
	if err := evictWarm(dir, 2*one); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("at the bound: %d images left, want 2", len(ents))
	}
}

// A warm image is copied with its holes (a disk of a few megabytes of
// data stays a few megabytes), byte for byte, by the kernel or through a
// buffer (file systems the kernel will not copy between).
func TestCopySparse(t *testing.T) {
	const size, block = 64 << 20, 4096
	dir := t.TempDir()
	src := filepath.Join(dir, "src.img")
	if err := sparseFile(src, size); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	offs := []int64{0, 30 << 20, size - block}
	for i, off := range offs {
		if _, err := f.WriteAt(bytes.Repeat([]byte{byte(i + 1)}, block), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	want := fileSHA256(t, src)
	dst := filepath.Join(dir, "dst.img")
	if err := copySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 1<<20 {
		t.Errorf("copy: %d bytes, %d allocated; want the size, holes kept", st.Size, st.Blocks*512)
	}
	if got := fileSHA256(t, dst); got != want {
		t.Errorf("copy differs")
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	buf := filepath.Join(dir, "buf.img")
	out, err := os.OpenFile(buf, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(copyRangeBuffered(in, out, offs[1], block), out.Close()); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, block)
	g, err := os.Open(buf)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.ReadAt(got, offs[1]); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{2}, block)) {
		t.Errorf("buffered copy: %v, wrong bytes", err)
	}
}
