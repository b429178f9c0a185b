package local

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/gilf-review/gilf/executors/local/egress"
)

// Limits of seeding npm's cache from the verifying cache.
const (
	// MaxSeedLockfileBytes bounds the lockfile read for the digests it
	// names; a larger one seeds nothing.
	MaxSeedLockfileBytes = 64 << 20
	// MaxSeedBytes bounds the bytes one install step's npm cache is
	// seeded with; past it the rest is fetched through the proxy.
	MaxSeedBytes = 1 << 30
)

// npmLockfiles are the lockfiles npm ci installs from.
var npmLockfiles = []string{"npm-shrinkwrap.json", "package-lock.json"}

// sriSHA512 is an SRI sha512 as lockfiles write it.
var sriSHA512 = regexp.MustCompile(`sha512-[A-Za-z0-9+/]{86}==`)

// sha512SRI is the digest s names when s is one SRI sha512 and nothing
// else; nil otherwise.
func sha512SRI(s string) []byte {
	if len(s) != len("sha512-")+88 || !sriSHA512.MatchString(s) {
		return nil
	}
	sum, err := base64.StdEncoding.DecodeString(s[len("sha512-"):])
	if err != nil {
		return nil
	}
	return sum
}

// seedNpmCache gives the install step's npm the tarballs its lockfile
// names that the worker's verifying cache holds, as content of npm's own
// cache in the sandbox's HOME (~/.npm/_cacache/content-v2, addressed by
// the sha512 of the bytes, which is what npm looks a locked tarball up
// by). npm then installs them without asking the proxy, as a bare npm
// does from its warm cache; what the cache lacks it fetches through the
// proxy as before. The sandbox gets a copy: nothing it does reaches the
// shared cache. npm checks each tarball against the lockfile's integrity
// as it reads it, and the copy's bytes have the very digest the lockfile
// names, so the lockfile gets nothing it could not have fetched.
//
// Seeding is best effort: a missing or unreadable lockfile, a HOME that
// already has .npm (an earlier step made it; it is the sandbox's, never
// followed), or a full disk seeds less or nothing. It returns the
// tarballs and bytes seeded, at most maxBytes (MaxSeedBytes).
func seedNpmCache(c *egress.Cache, workspace, home string, uid, gid int, maxBytes int64) (int, int64, error) {
	if c == nil {
		return 0, 0, nil
	}
	var lock []byte
	for _, name := range npmLockfiles {
		b, err := readCapped(filepath.Join(workspace, name), MaxSeedLockfileBytes)
		if err == nil {
			lock = b
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return 0, 0, err
		}
	}
	if lock == nil {
		return 0, 0, nil
	}
	sums := lockfileSums(lock)
	if len(sums) == 0 {
		return 0, 0, nil
	}
	// Every directory is made here, new (Mkdir fails on anything that
	// exists, a link included), and the sandbox's: npm writes into it.
	root := filepath.Join(home, ".npm")
	if err := mkdirOwned(root, 0o700, uid, gid); err != nil {
		if errors.Is(err, os.ErrExist) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	content := root
	for _, d := range []string{"_cacache", "content-v2", "sha512"} {
		content = filepath.Join(content, d)
		if err := mkdirOwned(content, 0o700, uid, gid); err != nil {
			return 0, 0, err
		}
	}
	made := map[string]bool{}
	return seedTarballs(c, sums, uid, gid, maxBytes, func(i int) (string, error) {
		h := hex.EncodeToString(sums[i])
		dir := content
		for _, d := range []string{h[:2], h[2:4]} {
			dir = filepath.Join(dir, d)
			if made[dir] {
				continue
			}
			if err := mkdirOwned(dir, 0o700, uid, gid); err != nil {
				return "", err
			}
			made[dir] = true
		}
		return filepath.Join(dir, h[4:]), nil
	})
}

// seedTarballs copies the cache's tarballs of the digests sums, each it
// holds to the new file dst(i) names, until the byte budget maxBytes is
// spent (then it stops, without an error), and returns how many it
// copied and their bytes.
func seedTarballs(c *egress.Cache, sums [][]byte, uid, gid int, maxBytes int64, dst func(i int) (string, error)) (int, int64, error) {
	var n int
	budget := maxBytes
	for i, sum := range sums {
		ok, err := seedTarball(c, sum, uid, gid, &budget, func() (string, error) { return dst(i) })
		if err != nil {
			return n, maxBytes - budget, ignoreFull(err)
		}
		if ok {
			n++
		}
	}
	return n, maxBytes - budget, nil
}

// errSeedFull says a seed's byte budget is spent.
var errSeedFull = errors.New("seed budget spent")

// ignoreFull is err unless it only says the budget is spent.
func ignoreFull(err error) error {
	if errors.Is(err, errSeedFull) {
		return nil
	}
	return err
}

// seedTarball copies the cache's tarball of digest sum, when it holds it,
// to the new file dst names (made only then), read-only and owned by
// uid:gid, and takes its size from *budget. A tarball larger than what is
// left of the budget is not copied: errSeedFull.
func seedTarball(c *egress.Cache, sum []byte, uid, gid int, budget *int64, dst func() (string, error)) (bool, error) {
	f, size, ok := c.OpenTarball(sum)
	if !ok {
		return false, nil
	}
	defer f.Close()
	if size > *budget {
		return false, errSeedFull
	}
	p, err := dst()
	if err != nil {
		return false, err
	}
	if err := copyOpen(f, p, 0o444, uid, gid); err != nil {
		return false, err
	}
	*budget -= size
	return true, nil
}

// lockfileSums are the distinct sha512 digests a lockfile names, in
// order.
func lockfileSums(lock []byte) [][]byte {
	var sums [][]byte
	seen := map[string]bool{}
	for _, m := range sriSHA512.FindAll(lock, -1) {
		sum, err := base64.StdEncoding.DecodeString(string(m[len("sha512-"):]))
		if err != nil || seen[string(sum)] {
			continue
		}
		seen[string(sum)] = true
		sums = append(sums, sum)
	}
	return sums
}

// copyOpen copies the open file in into the new file dst, owned by
// uid:gid with mode perm.
func copyOpen(in *os.File, dst string, perm os.FileMode, uid, gid int) error {
	return createOwned(dst, perm, uid, gid, "copy", func(out *os.File) error {
		_, err := io.Copy(out, in)
		return err
	})
}
