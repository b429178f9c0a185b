package local

import (
	"archive/tar"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gilf-review/gilf/executors/local/egress"
)

// Yarn classic's cache (v6, Yarn 1.22), as Yarn lays it out: each package
// unpacked in <cache>/v6/<slug>/node_modules/<name>, where the slug is
// npm-<name>-<version>-<sha1 of the lockfile's URL>-integrity, beside a
// .yarn-metadata.json that records what it was fetched as. Yarn copies
// a package from there into node_modules when the lockfile's sha1 and
// integrity are the ones recorded.
//
// gilf writes such a cache from the verifying cache (warmdisk.go) as
// Yarn's tarball fetcher does: the first path segment dropped, files
// (mode | 0644) & 0755 and directories 0755, the package's bins 0755. The
// metadata leaves out the manifest Yarn records (its normalized
// package.json): without it, Yarn reads the package.json and normalizes
// it itself, as it did when it fetched. A tarball Yarn would unpack into
// anything but plain files and directories (a link, a device, a path
// leaving the package, a name not plain), one without a package.json, or
// one whose sha1 is not the lockfile's is left to Yarn.
const (
	// yarnSandboxCache is Yarn classic's cache in the sandbox
	// (YARN_CACHE_FOLDER), on the workspace's mount as pnpm's store.
	yarnSandboxCache = "node_modules/.cache/yarn"
	// yarnCacheVersion is the directory of Yarn 1.22's cache layout.
	yarnCacheVersion = "v6"
	// yarnMetadataName is the file Yarn reads an entry by.
	yarnMetadataName = ".yarn-metadata.json"
)

// yarnLocked is what Yarn classic's cache records of a locked package.
type yarnLocked struct {
	name, resolved, integrity string
	// sha1 is the hex digest the resolved URL's fragment names; "" for
	// none.
	sha1 string
}

// yarnPackageName is a registry package's name gilf makes a cache
// directory of.
var yarnPackageName = regexp.MustCompile(`^(@[A-Za-z0-9][A-Za-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*$`)

// yarnVersion is a version gilf puts in a cache directory's name.
var yarnVersion = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+-]*$`)

// yarnSHA1 is the fragment of a resolved URL Yarn checks the tarball's
// sha1 against.
var yarnSHA1 = regexp.MustCompile(`^[0-9a-f]{40}$`)

// yarnLockPackages are the registry packages of a Yarn classic lockfile
// that gilf writes cache entries for: an entry whose patterns all name
// one package (no alias), with a plain version, an http(s) URL whose
// fragment is absent or a sha1, and a single sha512 integrity. Its id is
// its cache directory (yarnSlug). An entry with a field that moves it
// (uid, registry, name), or one whose directory another entry gives
// another digest, is left to Yarn.
func yarnLockPackages(lock []byte) []lockedPackage {
	var all []lockedPackage
	for _, e := range yarnLockEntries(lock) {
		name := yarnEntryPackage(e.key)
		sum := sha512SRI(e.integrity) // one sha512, as Yarn's cacheIntegrity then reads
		u, err := url.Parse(e.resolved)
		if name == "" || e.other || sum == nil ||
			!yarnVersion.MatchString(e.version) || err != nil || (u.Scheme != "https" && u.Scheme != "http") ||
			(u.Fragment != "" && !yarnSHA1.MatchString(u.Fragment)) {
			continue
		}
		all = append(all, lockedPackage{id: yarnSlug(name, e.version, u.Fragment), sum: sum,
			yarn: &yarnLocked{name: name, resolved: e.resolved, integrity: e.integrity, sha1: u.Fragment}})
	}
	return oneDigest(all, func(p lockedPackage) (string, []byte) { return p.id, p.sum })
}

// yarnEntryPackage is the package a lockfile entry's key names (Yarn's
// getName of each pattern): "" when its patterns name different
// packages, an alias (npm:) or anything but a registry name.
func yarnEntryPackage(key string) string {
	var name string
	for _, pat := range strings.Split(strings.TrimSuffix(key, ":"), ", ") {
		pat = strings.Trim(pat, `"`)
		// The name ends at the first "@" after its first character (a
		// scope's "@" is its first).
		n, rng := pat, ""
		if i := strings.Index(pat[min(1, len(pat)):], "@"); i >= 0 {
			n, rng = pat[:i+1], pat[i+2:]
		}
		if strings.Contains(rng, ":") || (name != "" && n != name) {
			return ""
		}
		name = n
	}
	if !yarnPackageName.MatchString(name) {
		return ""
	}
	return name
}

// yarnSlugChars are what Yarn's cache slug replaces with "-".
var yarnSlugChars = regexp.MustCompile(`[^@a-z0-9]+`)

// yarnSlug is the directory Yarn classic caches a registry package in
// (its generateUniquePackageSlug for a locked package with an
// integrity).
func yarnSlug(name, version, sha1 string) string {
	slug := "npm-" + strings.Trim(yarnSlugChars.ReplaceAllString(name, "-"), "-") + "-" + version
	if sha1 != "" {
		slug += "-" + sha1
	}
	return slug + "-integrity"
}

// yarnCacheWriter writes packages into a Yarn classic cache at root
// (its yarnCacheVersion directory in it), within a budget.
type yarnCacheWriter struct {
	root string
	warmBudget
	packages int
	tarBytes int64
}

func (w *yarnCacheWriter) written() (int, int64) { return w.packages, w.tarBytes }

// newYarnCache makes an empty cache at root.
func newYarnCache(root string) (*yarnCacheWriter, error) {
	if err := os.MkdirAll(filepath.Join(root, yarnCacheVersion), 0o755); err != nil {
		return nil, err
	}
	return &yarnCacheWriter{root: root, warmBudget: newWarmBudget()}, nil
}

// addFromCache adds the packages the cache holds, as pnpmStoreWriter's.
func (w *yarnCacheWriter) addFromCache(c *egress.Cache, pkgs []lockedPackage) error {
	dir := func(p lockedPackage) string { return filepath.Join(w.root, yarnCacheVersion, p.id) }
	n, size, err := addTarballs(c, pkgs, dir, func(p lockedPackage, r io.Reader) error {
		return w.add(r, p, filepath.Join(dir(p), "node_modules", filepath.FromSlash(p.yarn.name)))
	})
	w.packages, w.tarBytes = w.packages+n, w.tarBytes+size
	return err
}

// add unpacks the tarball r into the new directory dest as Yarn's
// tarball fetcher does, makes the bins its package.json names
// executable, and writes the entry's metadata.
func (w *yarnCacheWriter) add(r io.Reader, p lockedPackage, dest string) error {
	sum := sha1.New()
	raw := io.TeeReader(r, sum)
	if err := w.unpack(raw, dest); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return err
	}
	digest := sum.Sum(nil)
	if p.yarn.sha1 != "" && hex.EncodeToString(digest) != p.yarn.sha1 {
		return &badTarballError{fmt.Errorf("sha1 %x, the lockfile's %s", digest, p.yarn.sha1)}
	}
	manifest, err := readCapped(filepath.Join(dest, "package.json"), MaxSeedLockfileBytes)
	if err != nil {
		return &badTarballError{err}
	}
	if err := chmodBins(dest, manifest); err != nil {
		return err
	}
	return writeNew(filepath.Join(dest, yarnMetadataName), yarnMetadata(p, digest), 0o644, -1, -1)
}

// unpack writes the tarball r's directories and regular files under
// dest.
func (w *yarnCacheWriter) unpack(r io.Reader, dest string) error {
	return unpackEntries(r, dest, func(h *tar.Header, body io.Reader) error {
		name, ok := yarnEntryName(h.Name)
		switch {
		case !ok:
			return &badTarballError{fmt.Errorf("entry %q", h.Name)}
		case name == "":
			return nil
		case h.Typeflag == tar.TypeDir:
			if err := os.MkdirAll(filepath.Join(dest, name), 0o755); err != nil {
				return &badTarballError{err}
			}
			return nil
		case h.Typeflag == tar.TypeReg:
			if err := w.take(h.Size); err != nil {
				return err
			}
			return writeEntry(dest, name, body, (os.FileMode(h.Mode)&0o777|0o644)&0o755)
		}
		return &badTarballError{fmt.Errorf("entry %q of type %q", h.Name, h.Typeflag)}
	})
}

// yarnEntryName is the path under the package's directory Yarn gives a
// tar entry's name (its first segment dropped, as tar-fs's strip 1):
// ok is false for a name that is not already plain (absolute, "." or
// "..", "//", a backslash), which gilf leaves to Yarn; "" for the first
// segment itself.
func yarnEntryName(name string) (string, bool) {
	_, rest, _ := strings.Cut(name, "/")
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return "", !strings.HasPrefix(name, "/")
	}
	if strings.HasPrefix(name, "/") || strings.Contains(rest, `\`) || path.Clean(rest) != rest || strings.HasPrefix(rest, "../") {
		return "", false
	}
	return rest, true
}

// chmodBins makes the bins manifest (the package's package.json) names
// executable under dest, as Yarn does to its cache: bin (a string, or an
// object of valid names) or, without one, the files of directories.bin
// not starting with ".". A bin outside dest, or that is not a file, is
// left alone.
func chmodBins(dest string, manifest []byte) error {
	var m map[string]any
	if json.Unmarshal(manifest, &m) != nil {
		return nil // Yarn fails on it as before: nothing made executable
	}
	var bins []string
	switch b := m["bin"].(type) {
	case string:
		if _, ok := m["name"].(string); ok && b != "" {
			bins = append(bins, b)
		}
	case map[string]any:
		for k, v := range b {
			if s, ok := v.(string); ok && yarnBinKey.MatchString(k) && k != "." && k != ".." {
				bins = append(bins, s)
			}
		}
	case nil:
		dirs, _ := m["directories"].(map[string]any)
		if dir, ok := dirs["bin"].(string); ok && dir != "" && inPackage(dir) {
			ents, _ := os.ReadDir(filepath.Join(dest, filepath.FromSlash(path.Clean(dir))))
			for _, e := range ents {
				if !strings.HasPrefix(e.Name(), ".") {
					bins = append(bins, path.Join(dir, e.Name()))
				}
			}
		}
	}
	for _, b := range bins {
		if !inPackage(b) {
			continue
		}
		p := filepath.Join(dest, filepath.FromSlash(path.Clean(b)))
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
			if err := os.Chmod(p, 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

// inPackage says the relative path p stays in the package's directory.
func inPackage(p string) bool {
	c := path.Clean(p)
	return !path.IsAbs(c) && c != ".." && !strings.HasPrefix(c, "../")
}

// yarnBinKey is a bin name Yarn keeps (its VALID_BIN_KEYS).
var yarnBinKey = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// yarnMetadata is the .yarn-metadata.json of p, whose tarball's sha1 is
// sha1: what Yarn records when it fetches, its manifest aside (the
// integrity it checked the tarball against is the lockfile's and the
// sha1 it computed).
func yarnMetadata(p lockedPackage, sha1 []byte) []byte {
	type remote struct {
		Resolved       string `json:"resolved"`
		Type           string `json:"type"`
		Reference      string `json:"reference"`
		Hash           string `json:"hash"`
		Integrity      string `json:"integrity"`
		Registry       string `json:"registry"`
		PackageName    string `json:"packageName"`
		CacheIntegrity string `json:"cacheIntegrity"`
	}
	hash := p.yarn.sha1
	if hash == "" {
		// Yarn records the hex digest of the integrity it checked.
		hash = hex.EncodeToString(p.sum)
	}
	ref, _, _ := strings.Cut(p.yarn.resolved, "#")
	b, err := json.MarshalIndent(struct {
		Artifacts []string `json:"artifacts"`
		Remote    remote   `json:"remote"`
		Registry  string   `json:"registry"`
		Hash      string   `json:"hash"`
	}{[]string{}, remote{p.yarn.resolved, "tarball", ref, p.yarn.sha1, p.yarn.integrity, "npm", p.yarn.name,
		p.yarn.integrity + " sha1-" + base64.StdEncoding.EncodeToString(sha1)}, "npm", hash}, "", "  ")
	if err != nil {
		panic(err) // strings only
	}
	return b
}
