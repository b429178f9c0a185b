package local

import (
	"archive/tar"
	"bytes"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/hex"
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
	"testing"

	"github.com/gilf-review/gilf/validation"
)

// yarnWarmVersion is the Yarn classic the warm-disk tests run, one the
// package's registry publishes (internal/registrytest/tools.txt).
const yarnWarmVersion = "1.22.22"

// bareYarn runs Yarn classic bare in dir (its .yarnrc names the
// registry), its cache in cache.
func bareYarn(t *testing.T, yarn, dir, cache string, args ...string) {
	t.Helper()
	cmd := exec.Command(yarn, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + filepath.Dir(yarn) + ":" + DefaultPath, "HOME=" + t.TempDir(), "LANG=C.UTF-8", "YARN_CACHE_FOLDER=" + cache}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("yarn %q: %v\n%s", args, err, out)
	}
}

// resolvedTarball is the tarball p's resolved URL serves, checked
// against its integrity.
func resolvedTarball(t *testing.T, p lockedPackage) []byte {
	t.Helper()
	ref, _, _ := strings.Cut(p.yarn.resolved, "#")
	resp, err := http.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v %s", ref, err, resp.Status)
	}
	if sum := sha512.Sum512(b); !bytes.Equal(sum[:], p.sum) {
		t.Fatalf("%s: not the lockfile's tarball", ref)
	}
	return b
}

// The cache gilf writes is the cache Yarn classic writes, and Yarn
// installs from it: for the real tree of the package's registry,
// installed cold by a real Yarn 1.22, the same entries holding the same
// files, bytes and modes, and the same metadata but the manifest gilf
// leaves to Yarn; then Yarn, offline, with gilf's cache alone, installs
// the node_modules its cold install made, file for file. Once with the
// lockfile as Yarn wrote it, once with its URLs' sha1 fragments removed.
func TestYarnCacheAsYarnWritesIt(t *testing.T) {
	r := registry(t)
	_, yarn := warmTool(t, validation.Yarn, yarnWarmVersion)
	made := registryRepo(t, r.URL, nil)
	bareYarn(t, yarn, made, t.TempDir(), "install", "--ignore-scripts", "--non-interactive", "--no-progress")
	lock, err := os.ReadFile(filepath.Join(made, validation.LockfileYarn))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		lock []byte
	}{
		{"sha1", lock},
		{"no sha1", regexp.MustCompile(`#[0-9a-f]{40}"`).ReplaceAll(lock, []byte(`"`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := registryRepo(t, r.URL, map[string]string{validation.LockfileYarn: string(tc.lock)})
			theirs := t.TempDir()
			bareYarn(t, yarn, src, theirs, "install", "--frozen-lockfile", "--ignore-scripts", "--non-interactive", "--no-progress")
			pkgs := lockedTree(t, filepath.Join(src, validation.LockfileYarn), yarnLockPackages)
			if sha1s := slices.ContainsFunc(pkgs, func(p lockedPackage) bool { return p.yarn.sha1 != "" }); sha1s != (tc.name == "sha1") {
				t.Fatalf("sha1s read from the lockfile: %v", sha1s)
			}
			w, err := newYarnCache(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pkgs {
				dest := filepath.Join(w.root, yarnCacheVersion, p.id, "node_modules", p.yarn.name)
				if err := w.add(bytes.NewReader(resolvedTarball(t, p)), p, dest); err != nil {
					t.Fatalf("%s: %v", p.id, err)
				}
			}
			want, got := yarnCacheFiles(t, theirs), yarnCacheFiles(t, w.root)
			if !slices.Equal(got, want) {
				t.Errorf("gilf wrote %d entries, Yarn %d; first differences: %v", len(got), len(want), firstDiff(got, want))
			}
			dir := repo(t, map[string]string{"package.json": readFile(t, src, "package.json"), ".yarnrc": readFile(t, src, ".yarnrc"),
				validation.LockfileYarn: string(tc.lock)})
			bareYarn(t, yarn, dir, w.root, "install", "--offline", "--frozen-lockfile", "--ignore-scripts", "--non-interactive", "--no-progress")
			want, got = treeFiles(t, filepath.Join(src, "node_modules")), treeFiles(t, filepath.Join(dir, "node_modules"))
			if len(want) < 100 || !slices.Equal(got, want) {
				t.Errorf("node_modules from gilf's cache: %d entries, from Yarn's cold install %d; first differences: %v", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

// readFile is the file name in dir.
func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yarnCacheFiles lists what a Yarn classic cache at dir holds that Yarn
// reads: each entry's directories and files with their modes and
// digests, its metadata without the manifest; the bin links and tarball
// copy Yarn keeps beside them (which it does not read from the cache)
// and its temporary directory aside.
func yarnCacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	return listTree(t, filepath.Join(dir, yarnCacheVersion), func(p, rel string, de os.DirEntry) (string, error) {
		switch {
		case rel == ".tmp" || de.Name() == ".bin":
			return "", filepath.SkipDir
		case de.Name() == ".yarn-tarball.tgz":
			return "", nil
		case de.Name() == yarnMetadataName:
			var meta map[string]any
			if err := json.Unmarshal([]byte(readFile(t, filepath.Dir(p), de.Name())), &meta); err != nil {
				return "", err
			}
			delete(meta, "manifest")
			b, err := json.Marshal(meta)
			return rel + " " + string(b), err
		}
		return treeLine(t, p, rel, de), nil
	})
}

// treeFiles lists every directory, file and link under dir, with modes,
// digests and link targets.
func treeFiles(t *testing.T, dir string) []string {
	t.Helper()
	return listTree(t, dir, func(p, rel string, de os.DirEntry) (string, error) { return treeLine(t, p, rel, de), nil })
}

// listTree walks dir and lists, sorted, the line line gives each entry
// under it (p its path, rel its name under dir): none for "", and none
// under a directory it skips (filepath.SkipDir).
func listTree(t *testing.T, dir string, line func(p, rel string, de os.DirEntry) (string, error)) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		l, err := line(p, rel, de)
		if l != "" {
			out = append(out, l)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// treeLine describes the entry at p, named rel.
func treeLine(t *testing.T, p, rel string, de os.DirEntry) string {
	t.Helper()
	info, err := de.Info()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case de.Type()&os.ModeSymlink != 0:
		target, _ := os.Readlink(p)
		return rel + " -> " + target
	case de.IsDir():
		return fmt.Sprintf("%s/ %v", rel, info.Mode().Perm())
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %v %x", rel, info.Mode(), sha512.Sum512(b))
}

func TestYarnLockPackages(t *testing.T) {
	body := []byte("tarball")
	s1 := sha1.Sum(body)
	sha := hex.EncodeToString(s1[:])
	sri := "sha512-" + b64(bytes.Repeat([]byte{7}, 64))
	other := "sha512-" + b64(bytes.Repeat([]byte{8}, 64))
	entry := func(key, version, url, integrity string, extra ...string) string {
		return key + ":\n  version \"" + version + "\"\n  resolved \"" + url + "\"\n  integrity " + integrity + "\n" +
			strings.Join(extra, "") + "  dependencies:\n    x \"^1.0.0\"\n\n"
	}
	lock := "# THIS IS AN AUTOGENERATED FILE.\n# yarn lockfile v1\n\n\n" +
		entry(`"@babel/code-frame@^7.0.0", "@babel/code-frame@^7.10.4"`, "7.12.13", "https://registry.yarnpkg.com/@babel/code-frame/-/code-frame-7.12.13.tgz#"+sha, sri) +
		entry("JSONStream@^1.3.5", "1.3.5", "https://registry.yarnpkg.com/JSONStream/-/JSONStream-1.3.5.tgz", sri) +
		entry("a@1, a@^1.0.0", "1.0.0-rc.1", "http://127.0.0.1:4873/a/-/a-1.0.0-rc.1.tgz#"+sha, sri) +
		// Left to Yarn: an alias, two names, a uid, a sha1 integrity, two
		// digests, a git URL, a fragment that is no sha1, a path as a name.
		entry(`"string-width-cjs@npm:string-width@^4.2.0"`, "4.2.3", "https://registry.yarnpkg.com/string-width/-/string-width-4.2.3.tgz#"+sha, sri) +
		entry("b@1, c@1", "1.0.0", "https://registry.yarnpkg.com/b/-/b-1.0.0.tgz", sri) +
		entry("d@1", "1.0.0", "https://registry.yarnpkg.com/d/-/d-1.0.0.tgz", sri, "  uid \"x\"\n") +
		entry("e@1", "1.0.0", "https://registry.yarnpkg.com/e/-/e-1.0.0.tgz", "sha1-"+b64(s1[:])) +
		entry("f@1", "1.0.0", "https://registry.yarnpkg.com/f/-/f-1.0.0.tgz", "sha1-"+b64(s1[:])+" "+sri) +
		entry("g@1", "1.0.0", "git+https://github.com/o/g.git#"+sha, sri) +
		entry("h@1", "1.0.0", "https://registry.yarnpkg.com/h/-/h-1.0.0.tgz#main", sri) +
		entry("i@1", "1.0.0", "https://registry.yarnpkg.com/i/-/i-1.0.0.tgz", sri) +
		entry("i@2", "1.0.0", "https://registry.yarnpkg.com/i/-/i-1.0.0.tgz", other) +
		entry(`"../j@1"`, "1.0.0", "https://registry.yarnpkg.com/j/-/j-1.0.0.tgz", sri)
	var got []string
	for _, p := range yarnLockPackages([]byte(lock)) {
		got = append(got, p.id+" "+p.yarn.name+" "+p.yarn.sha1)
	}
	want := []string{
		"npm-@babel-code-frame-7.12.13-" + sha + "-integrity @babel/code-frame " + sha,
		"npm-tream-1.3.5-integrity JSONStream ",
		"npm-a-1.0.0-rc.1-" + sha + "-integrity a " + sha,
	}
	if !slices.Equal(got, want) {
		t.Errorf("packages:\n%q\nwant\n%q", got, want)
	}
}

// What Yarn classic would unpack into anything but plain files and
// directories, or could not read, is left to it; the rest is unpacked
// with Yarn's modes and its bins made executable.
func TestYarnCacheTarballs(t *testing.T) {
	w, err := newYarnCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	add := func(sha string, entries ...tarEntry) (string, error) {
		tgz := testTarball(t, entries...)
		sum := sha512.Sum512(tgz)
		if sha == "right" {
			s := sha1.Sum(tgz)
			sha = hex.EncodeToString(s[:])
		}
		p := lockedPackage{id: "npm-x-1.0.0-integrity", sum: sum[:], yarn: &yarnLocked{name: "x", sha1: sha,
			resolved: "https://registry.yarnpkg.com/x/-/x-1.0.0.tgz#" + sha, integrity: "sha512-" + b64(sum[:])}}
		dest := filepath.Join(t.TempDir(), "x")
		return dest, w.add(bytes.NewReader(tgz), p, dest)
	}
	manifest := tarEntry{"package/package.json", tar.TypeReg, 0o600, `{"name":"x","bin":{"x":"./cli.js","up":"../../y","bad/name":"lib/a.js"}}`}
	dest, err := add("right", manifest,
		tarEntry{"package/", tar.TypeDir, 0o700, ""},
		tarEntry{"package/cli.js", tar.TypeReg, 0o644, "#!/usr/bin/env node\n"},
		tarEntry{"package/lib/a.js", tar.TypeReg, 0o744, "a"},
		tarEntry{"package/lib/b.js", tar.TypeReg, 0o4777, "b"},
		tarEntry{"package/empty", tar.TypeDir, 0o700, ""},
		tarEntry{"x", tar.TypeReg, 0o644, "a file of the first segment alone"},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		".yarn-metadata.json -rw-r--r--", "cli.js -rwxr-xr-x", "empty/ -rwxr-xr-x", "lib/ -rwxr-xr-x",
		"lib/a.js -rwxr--r--", "lib/b.js -rwxr-xr-x", "package.json -rw-r--r--",
	}
	var got []string
	for _, l := range treeFiles(t, dest) {
		f := strings.Fields(l)
		got = append(got, f[0]+" "+f[1])
	}
	if !slices.Equal(got, want) {
		t.Errorf("unpacked %q, want %q", got, want)
	}
	var meta struct {
		Remote struct{ Hash, CacheIntegrity, Reference, PackageName string }
		Hash   string
	}
	if err := json.Unmarshal([]byte(readFile(t, dest, yarnMetadataName)), &meta); err != nil || meta.Hash == "" ||
		meta.Hash != meta.Remote.Hash || meta.Remote.PackageName != "x" || meta.Remote.Reference != "https://registry.yarnpkg.com/x/-/x-1.0.0.tgz" ||
		!strings.HasPrefix(meta.Remote.CacheIntegrity, "sha512-") {
		t.Errorf("metadata %+v, %v", meta, err)
	}
	for name, entries := range map[string][]tarEntry{
		"a symlink":         {manifest, {"package/link", tar.TypeSymlink, 0o777, ""}},
		"a hard link":       {manifest, {"package/hard", tar.TypeLink, 0o644, ""}},
		"a path up":         {manifest, {"package/../../escape", tar.TypeReg, 0o644, "escape"}},
		"an absolute path":  {manifest, {"/etc/x", tar.TypeReg, 0o644, "x"}},
		"a dot segment":     {manifest, {"package/a/./b", tar.TypeReg, 0o644, "x"}},
		"a backslash":       {manifest, {`package/a\b`, tar.TypeReg, 0o644, "x"}},
		"a device":          {manifest, {"package/dev", tar.TypeChar, 0o644, ""}},
		"no package.json":   {{"package/index.js", tar.TypeReg, 0o644, "x"}},
		"a path via a file": {manifest, {"package/a", tar.TypeReg, 0o644, "x"}, {"package/a/b", tar.TypeReg, 0o644, "x"}},
	} {
		var bad *badTarballError
		if _, err := add("right", entries...); !errors.As(err, &bad) {
			t.Errorf("%s: %v, want the tarball left to Yarn", name, err)
		}
	}
	var bad *badTarballError
	if _, err := add(strings.Repeat("0", 40), manifest); !errors.As(err, &bad) {
		t.Errorf("a sha1 that is not the lockfile's: %v, want the tarball left to Yarn", err)
	}
	if _, err := add("", manifest); err != nil {
		t.Errorf("a lockfile URL without a sha1: %v", err)
	}
}
