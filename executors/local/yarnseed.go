package local

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// Where Yarn classic's offline mirror is seeded in the sandbox.
const (
	// yarnMirrorDir is the offline mirror's directory in the sandbox's
	// HOME.
	yarnMirrorDir = ".gilf-yarn-offline-mirror"
	// yarnUserRC is Yarn classic's own user configuration in HOME, which
	// names the mirror.
	yarnUserRC = ".yarnrc"
)

// seedInstallCache seeds the install step's package manager with the
// tarballs its lockfile names that the worker's verifying cache holds, in
// the form that manager reads without a request: npm's own cache
// (seedNpmCache), pnpm's store, bun's cache and Yarn classic's cache when
// the run's disk is warm (seedWarmStore), else Yarn classic's offline
// mirror (seedYarnMirror). The other managers
// are not seeded: the proxy serves them from the cache. A
// plan naming no manager is npm's. It returns the tarballs and bytes
// seeded.
func seedInstallCache(pm validation.PackageManager, c *egress.Cache, d runDirs, uid, gid int, maxBytes int64) (int, int64, error) {
	workspace, home := d.Workspace, d.Home
	switch pm {
	case validation.NPM, "":
		return seedNpmCache(c, workspace, home, uid, gid, maxBytes)
	case validation.Yarn:
		if n, size, err := seedWarmStore(d.Base, workspace, warmManagers[pm].sandbox, uid, gid); n > 0 || err != nil {
			return n, size, err
		}
		return seedYarnMirror(c, workspace, home, uid, gid, maxBytes)
	case validation.PNPM, validation.Bun:
		return seedWarmStore(d.Base, workspace, warmManagers[pm].sandbox, uid, gid)
	}
	return 0, 0, nil
}

// seedYarnMirror gives Yarn classic the tarballs its yarn.lock names that
// the verifying cache holds, as an offline mirror in the sandbox's HOME
// (~/.gilf-yarn-offline-mirror, named by yarn-offline-mirror in
// ~/.yarnrc, which gilf writes). Yarn looks a locked tarball up there by
// the file name its resolved URL gives (<name>-<version>.tgz,
// @<scope>-<name>-<version>.tgz) before it asks the registry, and checks
// it against the lockfile's integrity as it reads it. Each file is a copy
// of bytes whose sha512 is the integrity the lockfile names for that URL,
// verified by the proxy against the registry's published integrity, so
// the lockfile gets nothing it could not have fetched; nothing the
// sandbox does reaches the shared cache. A checkout's own .yarnrc that
// names another mirror wins (it only loses the seed).
//
// Measured (BenchmarkInstallCacheRealRepo on facebook/prop-types, 545
// packages, Yarn 1.22.22, 2-core host at load 6–13, three iterations):
// the second run makes 0 requests instead of 545, and takes 0.73× the
// first run's time instead of 0.90× (per-iteration medians); against a
// bare warm Yarn it is 1.77× (paired median) instead of 2.48×; at load
// 2–3, 2.8× (11.5 s against 4.2 s). What is left is Yarn's own unpacking
// of every tarball into its empty cache, which a bare warm install skips.
// Seeding itself takes about 100 ms.
//
// Seeding is best effort, as seedNpmCache's: a missing, linked or
// oversized yarn.lock (MaxSeedLockfileBytes), a HOME that already has the
// mirror or a .yarnrc, or a full budget seeds less or nothing; when the
// cache holds none of the tarballs no mirror is named. It returns the
// tarballs and bytes seeded, at most maxBytes.
func seedYarnMirror(c *egress.Cache, workspace, home string, uid, gid int, maxBytes int64) (int, int64, error) {
	if c == nil {
		return 0, 0, nil
	}
	lock, err := readCapped(filepath.Join(workspace, validation.LockfileYarn), MaxSeedLockfileBytes)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	entries := yarnLockTarballs(lock)
	if len(entries) == 0 {
		return 0, 0, nil
	}
	// Nothing is made where the sandbox's HOME already has something.
	dir, rcPath := filepath.Join(home, yarnMirrorDir), filepath.Join(home, yarnUserRC)
	if _, err := os.Lstat(rcPath); !errors.Is(err, os.ErrNotExist) {
		return 0, 0, err
	}
	if err := mkdirOwned(dir, 0o700, uid, gid); err != nil {
		if errors.Is(err, os.ErrExist) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	sums := make([][]byte, len(entries))
	for i, e := range entries {
		sums[i] = e.sum
	}
	n, size, err := seedTarballs(c, sums, uid, gid, maxBytes, func(i int) (string, error) {
		return filepath.Join(dir, entries[i].file), nil
	})
	if err != nil {
		return n, size, err
	}
	if n == 0 {
		// No mirror to name: Yarn fetches as it would without one
		// (a named mirror would have it write a copy of each tarball).
		return 0, 0, os.Remove(dir)
	}
	rc := fmt.Sprintf("yarn-offline-mirror %q\n", SandboxHome+"/"+yarnMirrorDir)
	if err := writeOwned(rcPath, []byte(rc), uid, gid); err != nil {
		return 0, 0, err
	}
	return n, size, nil
}

// yarnTarball is a tarball a Yarn classic lockfile locks: the sha512 of
// its integrity and its file name in an offline mirror.
type yarnTarball struct {
	sum  []byte
	file string
}

// yarnLockTarballs are the tarballs of a Yarn classic (v1) lockfile's
// entries that name both a resolved URL with a mirror file name and a
// sha512 integrity, each file name once, in order. Anything else (a git
// or file dependency, an entry with a sha1 alone, a name that is not a
// plain file name, a name two entries give different digests) is left
// out: Yarn fetches it as before.
func yarnLockTarballs(lock []byte) []yarnTarball {
	var all []yarnTarball
	for _, e := range yarnLockEntries(lock) {
		if file, sum := yarnMirrorName(e.resolved), e.sha512(); file != "" && sum != nil {
			all = append(all, yarnTarball{sum: sum, file: file})
		}
	}
	return oneDigest(all, func(tb yarnTarball) (string, []byte) { return tb.file, tb.sum })
}

// oneDigest keeps the first of items of each key, in order, and none of
// a key that two items give different digests.
func oneDigest[T any](items []T, key func(T) (string, []byte)) []T {
	sums := map[string][]byte{}
	var firsts []T
	for _, it := range items {
		k, sum := key(it)
		if prev, ok := sums[k]; ok {
			if !bytes.Equal(prev, sum) {
				sums[k] = nil
			}
			continue
		}
		sums[k] = sum
		firsts = append(firsts, it)
	}
	out := firsts[:0]
	for _, it := range firsts {
		if k, _ := key(it); sums[k] != nil {
			out = append(out, it)
		}
	}
	return out
}

// yarnLockEntry is one entry of a Yarn classic (v1) lockfile: its key
// (the patterns it resolves, as written) and the fields gilf reads.
type yarnLockEntry struct {
	key, version, resolved, integrity string
	// other says the entry has a field that changes where Yarn caches
	// the package (uid, registry, name).
	other bool
}

// sha512 is the digest of the entry's integrity when it names one
// (nil when it does not).
func (e yarnLockEntry) sha512() []byte {
	return sha512SRI(sriSHA512.FindString(e.integrity))
}

// yarnLockEntries are the entries of a Yarn classic lockfile, read line
// by line as Yarn writes it: a key line at the margin, its fields
// indented by two spaces.
func yarnLockEntries(lock []byte) []yarnLockEntry {
	var all []yarnLockEntry
	var e yarnLockEntry
	flush := func() {
		if e.key != "" {
			all = append(all, e)
		}
		e = yarnLockEntry{}
	}
	sc := bufio.NewScanner(bytes.NewReader(lock))
	sc.Buffer(nil, MaxSeedLockfileBytes)
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(strings.TrimPrefix(line, "  "), " ")
		value = strings.Trim(value, `"`)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			flush()
		case !strings.HasPrefix(line, " "):
			flush()
			e.key = line
		case strings.HasPrefix(line, "   "):
			// A dependency list's line.
		case field == "version":
			e.version = value
		case field == "resolved":
			e.resolved = value
		case field == "integrity":
			e.integrity = value
		case field == "uid" || field == "registry" || field == "name":
			e.other = true
		}
	}
	flush()
	return all
}

// yarnTarballPath is Yarn classic's pattern of a registry tarball's URL
// path (its tarball fetcher's RE_URL_NAME_MATCH): an optional scope, the
// name, "-" or "_attachments", the file.
var yarnTarballPath = regexp.MustCompile(`/(?:(@[^/]+)(?:/|%2f))?[^/]+/(?:-|_attachments)/(?:@[^/]+/)?([^/]+)$`)

// yarnMirrorFile is what a mirror file name may be: plain characters, no
// separator, not hidden.
var yarnMirrorFile = regexp.MustCompile(`^[A-Za-z0-9@_+~-][A-Za-z0-9@._+~-]{0,254}$`)

// yarnMirrorName is the file name Yarn classic looks a resolved URL's
// tarball up by in an offline mirror ("" when it has none gilf writes).
func yarnMirrorName(resolved string) string {
	if resolved == "" {
		return ""
	}
	u, err := url.Parse(resolved)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	var name string
	if m := yarnTarballPath.FindStringSubmatch(u.EscapedPath()); m != nil {
		name = m[2]
		if m[1] != "" {
			name = m[1] + "-" + m[2]
		}
	} else {
		name = filepath.Base(u.EscapedPath())
	}
	if !yarnMirrorFile.MatchString(name) {
		return ""
	}
	return name
}
