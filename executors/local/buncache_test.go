package local

import (
	"archive/tar"
	"bytes"
	"crypto/sha512"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/validation"
)

// bunWarmVersion is the bun the warm-disk tests run, one the package's
// registry publishes (internal/registrytest/tools.txt).
const bunWarmVersion = "1.2.20"

// bareBun runs bun bare in dir against the registry at url, its cache in
// cache.
func bareBun(t *testing.T, bun, dir, url, cache string, args ...string) {
	t.Helper()
	cmd := exec.Command(bun, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + filepath.Dir(bun) + ":" + DefaultPath, "HOME=" + t.TempDir(), "CI=true", "LANG=C.UTF-8",
		"BUN_CONFIG_REGISTRY=" + url, "BUN_INSTALL_CACHE_DIR=" + cache}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bun %q: %v\n%s", args, err, out)
	}
}

// bunRepo is the package's registry repository with its bun.lock, made
// by a bare bun.
func bunRepo(t *testing.T, bun, url string) string {
	t.Helper()
	src := registryRepo(t, url, map[string]string{"bunfig.toml": "[install]\nregistry = \"" + url + "\"\n"})
	bareBun(t, bun, src, url, t.TempDir(), "install", "--lockfile-only")
	return src
}

// The cache gilf writes is the cache bun writes: for the real tree of the
// package's registry, installed by a real bun, the same package
// directories holding the same files with the same bytes (bun's own
// <name>/<version>@@@1 links aside).
func TestBunCacheAsBunWritesIt(t *testing.T) {
	r := registry(t)
	_, bun := warmTool(t, validation.Bun, bunWarmVersion)
	src := bunRepo(t, bun, r.URL)
	pkgs := lockedTree(t, filepath.Join(src, "bun.lock"), bunLockPackages)
	theirs := t.TempDir()
	bareBun(t, bun, src, r.URL, theirs, "install", "--frozen-lockfile")
	// Verdaccio is not the npm registry: bun names its packages with its
	// host.
	suffix := bunRegistrySuffix(theirs, pkgs)
	if suffix != "@@127.0.0.1" {
		t.Errorf("the registry's suffix read off bun's cache: %q", suffix)
	}
	w, err := newBunCache(t.TempDir(), suffix)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		b := registryTarball(t, r.URL, p)
		if err := w.add(bytes.NewReader(b), filepath.Join(w.root, p.id+suffix+bunCacheSuffix)); err != nil {
			t.Fatalf("%s: %v", p.id, err)
		}
	}
	want, got := cacheFiles(t, theirs), cacheFiles(t, w.root)
	if !slices.Equal(got, want) {
		t.Errorf("gilf wrote %d files, bun %d; first differences: %v", len(got), len(want), firstDiff(got, want))
	}
}

// cacheFiles lists the regular files of a bun cache with their digests,
// sorted (bun's links aside).
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %x", rel, sha512.Sum512(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestBunLockPackages(t *testing.T) {
	sri := "sha512-" + b64(bytes.Repeat([]byte{9}, 64))
	lock := `{
  "lockfileVersion": 1,
  "workspaces": {
    "": {
      "name": "app",
      "dependencies": {
        "a": "^1.0.0",
      },
    },
  },
  "packages": {
    "a": ["a@1.0.0", "", {}, "` + sri + `"],

    "@s/b": ["@s/b@2.0.0-rc.1", "", { "dependencies": { "a": "1" } }, "` + sri + `"],

    "x/a": ["a@1.0.0", "", {}, "` + sri + `"],

    "g": ["g@github:o/g#abc", {}, "o-g-abc"],

    "up": ["../up@1.0.0", "", {}, "` + sri + `"],
  }
}
`
	var ids []string
	for _, p := range bunLockPackages([]byte(lock)) {
		ids = append(ids, p.id)
	}
	if want := []string{"a@1.0.0", "@s/b@2.0.0-rc.1"}; !slices.Equal(ids, want) {
		t.Errorf("packages %q, want %q", ids, want)
	}
	if got := bunLockPackages([]byte(strings.Replace(lock, `"lockfileVersion": 1,`, `"lockfileVersion": 2,`, 1))); got != nil {
		t.Errorf("another format: %d packages, want none", len(got))
	}
}

// A tarball's paths become paths only when plain: one that would leave
// the package's directory is dropped, a link is never made, modes are
// 0644 or 0755, and a path that runs through a file makes the package one
// gilf leaves to bun.
func TestBunCacheHostileTarball(t *testing.T) {
	w, err := newBunCache(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(w.root, "x@1.0.0"+bunCacheSuffix)
	tgz := testTarball(t,
		tarEntry{"package/package.json", tar.TypeReg, 0o666, `{"name":"x"}`},
		tarEntry{"package/bin/x", tar.TypeReg, 0o4777, "#!/bin/sh\n"},
		tarEntry{"package/../../escape", tar.TypeReg, 0o644, "escape"},
		tarEntry{"package/a/..", tar.TypeReg, 0o644, "dot"},
		tarEntry{"package/link", tar.TypeSymlink, 0o777, ""},
		tarEntry{"package/hard", tar.TypeLink, 0o644, ""},
	)
	if err := w.add(bytes.NewReader(tgz), dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(w.root, func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			info, _ := de.Info()
			rel, _ := filepath.Rel(dir, p)
			got = append(got, fmt.Sprintf("%s %v", rel, info.Mode()))
		}
		return err
	})
	slices.Sort(got)
	if want := []string{"bin/x -rwxr-xr-x", "escape -rw-r--r--", "package.json -rw-r--r--"}; !slices.Equal(got, want) {
		t.Errorf("written %q, want %q", got, want)
	}
	through := testTarball(t, tarEntry{"package/a", tar.TypeReg, 0o644, "file"}, tarEntry{"package/a/b", tar.TypeReg, 0o644, "under a file"})
	var bad *badTarballError
	if err := w.add(bytes.NewReader(through), filepath.Join(w.root, "y@1.0.0"+bunCacheSuffix)); !errors.As(err, &bad) {
		t.Errorf("a path through a file: %v, want a tarball left to bun", err)
	}
}
