package local

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gilf-review/gilf/executors/local/egress"
)

// bun's install cache, as bun 1 lays it out: each package unpacked in a
// directory named <name>@<version>@@@1 (a scope is a directory of its
// own: @scope/name@1.0.0@@@1), which bun hard-links into node_modules.
// bun also makes <name>/<version>@@@1 links to them; it installs from a
// cache without them (and makes them again).
//
// gilf writes such a cache from the verifying cache (warmdisk.go): unlike
// pnpm's store, a tarball's paths are paths here, so an entry is written
// only when its path is plain (no "..", no absolute path, no backslash),
// only regular files and the directories above them are made, never a
// link, and a file's mode is 0644 or 0755. A package is found by the
// name and version its lockfile entry names; the image holds only the
// packages of that one lockfile, each from the tarball of the integrity
// that entry names.
const bunCacheSuffix = "@@@1"

// bunLockEntry is a package line of bun.lock (format 1): the entry's
// array starts with "name@version" and ends with its sha512 integrity.
var bunLockEntry = regexp.MustCompile(`^    "[^"]+": \["((?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*@[0-9A-Za-z.+-]+)", .*"(sha512-[A-Za-z0-9+/]{86}==)"\],?$`)

// bunLockPackages are the registry packages a bun.lock (lockfileVersion
// 1) locks with an sha512 integrity; any other file gives none.
func bunLockPackages(lock []byte) []lockedPackage {
	if !bytes.Contains(lock[:min(len(lock), 256)], []byte(`"lockfileVersion": 1,`)) {
		return nil
	}
	var pkgs []lockedPackage
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(lock))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := bunLockEntry.FindStringSubmatch(sc.Text())
		if m == nil || seen[m[1]] {
			continue
		}
		sum := sha512SRI(m[2])
		if sum == nil {
			continue
		}
		seen[m[1]] = true
		pkgs = append(pkgs, lockedPackage{id: m[1], sum: sum})
	}
	return pkgs
}

// bunCacheWriter writes packages into a bun cache at root, within a
// budget of bytes and files.
type bunCacheWriter struct {
	root string
	// suffix is what bun adds to a package's name@version for the
	// registry it installs from (bunRegistrySuffix).
	suffix string
	warmBudget
	packages int
	tarBytes int64
}

func (w *bunCacheWriter) written() (int, int64) { return w.packages, w.tarBytes }

// newBunCache makes an empty cache at root, its packages named for the
// registry suffix says.
func newBunCache(root, suffix string) (*bunCacheWriter, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &bunCacheWriter{root: root, suffix: suffix, warmBudget: newWarmBudget()}, nil
}

// bunRegistrySuffix is what bun added to a package's directory name in
// the cache dir its install filled: nothing for the npm registry,
// "@@<host>" for another (a long host name is shortened with a hash of
// the URL). It is read off the directory of one of pkgs, the only thing
// taken from what the sandbox wrote (a name, checked against the forms
// bun writes: a wrong one only makes bun fetch again); "" when none is
// found.
func bunRegistrySuffix(cache string, pkgs []lockedPackage) string {
	for _, p := range pkgs[:min(len(pkgs), 8)] {
		dir, base := cache, p.id
		if scope, rest, ok := strings.Cut(p.id, "/"); ok {
			dir, base = filepath.Join(cache, scope), rest
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return ""
		}
		for _, e := range ents {
			if mid, ok := strings.CutPrefix(e.Name(), base); ok {
				if mid, ok := strings.CutSuffix(mid, bunCacheSuffix); ok && bunSuffixForm.MatchString(mid) {
					return mid
				}
			}
		}
	}
	return ""
}

// bunSuffixForm is a registry suffix as bun writes it.
var bunSuffixForm = regexp.MustCompile(`^(@@[a-z0-9.-]{1,32}|@@[a-z0-9.-]{1,12}__[0-9a-f]{1,16})?$`)

// addFromCache adds the packages the cache holds, as pnpmStoreWriter's.
func (w *bunCacheWriter) addFromCache(c *egress.Cache, pkgs []lockedPackage) error {
	dir := func(p lockedPackage) string { return filepath.Join(w.root, p.id+w.suffix+bunCacheSuffix) }
	n, size, err := addTarballs(c, pkgs, dir, func(p lockedPackage, r io.Reader) error { return w.add(r, dir(p)) })
	w.packages, w.tarBytes = w.packages+n, w.tarBytes+size
	return err
}

// add unpacks the tarball r (gzip or not) into the new directory dir:
// its regular files only, the first path segment dropped, a later entry
// of the same path winning.
func (w *bunCacheWriter) add(r io.Reader, dir string) error {
	return unpackEntries(r, dir, func(h *tar.Header, body io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		name, ok := pnpmEntryName(h.Name)
		if !ok {
			return nil
		}
		if err := w.take(h.Size); err != nil {
			return err
		}
		return writeEntry(dir, name, body, storeFileMode(h.Mode&0o111 != 0))
	})
}

// unpackEntries makes the directory dir and hands each entry of the
// tarball r (gzip or not) to each, in order; a tarball that does not read
// is one the manager would not unpack either.
func unpackEntries(r io.Reader, dir string, each func(h *tar.Header, body io.Reader) error) error {
	tr, done, err := tarballEntries(r)
	if err != nil {
		return err
	}
	defer done()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &badTarballError{err}
		}
		if err := each(h, tr); err != nil {
			return err
		}
	}
}

// writeEntry writes body as the file name (a plain relative path, mode perm) under
// dir, making the directories above it; a name that is, or runs through,
// something else already there makes the tarball one bun would not unpack
// either.
func writeEntry(dir, name string, body io.Reader, perm os.FileMode) error {
	p := filepath.Join(dir, filepath.FromSlash(name))
	if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		return &badTarballError{fmt.Errorf("entry %q", name)}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return &badTarballError{err}
	}
	os.Remove(p) // a later entry of the same path wins
	err := createOwned(p, perm, -1, -1, "write", func(f *os.File) error {
		_, err := io.Copy(f, body)
		return err
	})
	if err != nil {
		return &badTarballError{err}
	}
	return nil
}
