package pgtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// DebianLibDir is where Debian's postgresql packages put each major
// version's programs (DebianLibDir/<major>/bin), off PATH.
const DebianLibDir = "/usr/lib/postgresql"

// where says where to look for the PostgreSQL programs.
type where struct {
	libDir string // DebianLibDir, or a test's
	path   string // a PATH-style list, searched when libDir has none
}

// binDir returns the directory holding initdb and postgres: the highest
// major version under w.libDir, else the first PATH directory holding
// both. Their absence is an error naming Install.
func binDir(w where) (string, error) {
	best, bestMajor := "", -1
	entries, err := os.ReadDir(w.libDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", w.libDir, err)
	}
	for _, e := range entries {
		major, err := strconv.Atoi(e.Name())
		if err != nil || major <= bestMajor {
			continue
		}
		if dir := filepath.Join(w.libDir, e.Name(), "bin"); hasPrograms(dir) {
			best, bestMajor = dir, major
		}
	}
	if best != "" {
		return best, nil
	}
	for _, dir := range filepath.SplitList(w.path) {
		if dir != "" && hasPrograms(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL not found: no initdb and postgres in %s/*/bin or PATH; install it with: %s", w.libDir, Install)
}

// hasPrograms reports whether dir holds executable initdb and postgres.
func hasPrograms(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}
