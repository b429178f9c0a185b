package toolchain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/gilf-review/gilf/validation"
)

// Names inside a prepared version's directory.
const (
	pkgDir     = "pkg"             // the tarball's package/ contents
	binDir     = "bin"             // one relative symlink per command
	markerFile = ".gilf-tool.json" // written last: its presence means complete
	tmpPrefix  = ".tmp-"           // <Dir>/<manager>/.tmp-<version>-*
	lockSuffix = ".lock"           // <Dir>/<manager>/<version>.lock
)

// markerFormat is the version of the marker's layout; an entry with
// another one is rebuilt.
const markerFormat = 1

// MaxManifestBytes caps the package.json read from a tarball.
const MaxManifestBytes = 1 << 20

// maxMarkerBytes caps the marker read back from the cache; gilf writes
// it, a few hundred bytes.
const maxMarkerBytes = 64 << 10

// maxBinName caps a command name (NAME_MAX).
const maxBinName = 255

// marker records a prepared version, so a cache hit needs no network.
type marker struct {
	Format  int                       `json:"format"`
	Manager validation.PackageManager `json:"manager"`
	Package string                    `json:"package"`
	Version string                    `json:"version"`
	// Integrity is Tool.Integrity's words for the registry checks.
	Integrity    string     `json:"integrity"`
	TarballBytes int64      `json:"tarball_bytes"`
	Tarball      hexDigests `json:"tarball"`
	// Main is the file of the manager's own command, below pkg/.
	Main        string            `json:"main"`
	MainDigests hexDigests        `json:"main_digests"`
	Bins        map[string]string `json:"bins"`
}

// valid reports whether m is a complete entry for t at version.
func (m marker) valid(t tool, version string) bool {
	return m.Format == markerFormat && m.Manager == t.manager && m.Package == t.pkg &&
		m.Version == version && m.Integrity != "" && m.Main != "" &&
		m.Tarball.valid() && m.MainDigests.valid() && len(m.Bins) > 0
}

// readMarker returns the marker of the entry in dir, and whether it is
// a complete entry for t at version.
func readMarker(dir string, t tool, version string) (marker, bool, error) {
	f, err := os.Open(filepath.Join(dir, markerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return marker{}, false, nil
	}
	if err != nil {
		return marker{}, false, fmt.Errorf("read marker: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarkerBytes+1))
	if err != nil {
		return marker{}, false, fmt.Errorf("read marker: %w", err)
	}
	var m marker
	if len(b) > maxMarkerBytes || json.Unmarshal(b, &m) != nil || !m.valid(t, version) {
		return marker{}, false, nil
	}
	return m, true, nil
}

// writeMarker writes m into dir, synced: it is the entry's last file.
func writeMarker(dir string, m marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode marker: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, markerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	return nil
}

// manifest is the part of a tarball's package.json gilf reads.
type manifest struct {
	Name    string          `json:"name"`
	Version string          `json:"version"`
	Bin     json.RawMessage `json:"bin"`
}

// readManifest reads pkg/package.json through root, capped.
func readManifest(root *os.Root) (manifest, error) {
	f, err := root.Open("package.json")
	if err != nil {
		return manifest{}, fmt.Errorf("package.json: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return manifest{}, fmt.Errorf("package.json: %w", err)
	}
	if len(b) > MaxManifestBytes {
		return manifest{}, fmt.Errorf("package.json is more than %d bytes", MaxManifestBytes)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return manifest{}, fmt.Errorf("package.json: %w", err)
	}
	return m, nil
}

// parseBins reads a package.json bin field, a string (the command named
// after the package) or an object of command → file, and checks every
// name and target: a name is a plain file name, a target a path that
// stays inside the package. Targets come back clean ("bin/x.js").
func parseBins(pkg string, raw json.RawMessage) (map[string]string, error) {
	bins := map[string]string{}
	if len(raw) == 0 || string(raw) == "null" {
		return bins, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		bins[baseName(pkg)] = one
	} else if err := json.Unmarshal(raw, &bins); err != nil {
		return nil, fmt.Errorf("package.json bin is neither a string nor an object of strings: %w", err)
	}
	out := make(map[string]string, len(bins))
	for name, target := range bins {
		if !plainName(name) {
			return nil, fmt.Errorf("package.json bin: the command name %q is not a plain file name", truncate(name, 100))
		}
		clean, ok := insidePath(target)
		if !ok {
			return nil, fmt.Errorf("package.json bin: the target %q of %s leaves the package", truncate(target, 200), name)
		}
		out[name] = clean
	}
	return out, nil
}

// plainName reports whether name can be a file in bin/: no separator, no
// control character, not . or .., at most NAME_MAX bytes.
func plainName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > maxBinName || strings.ContainsAny(name, `/\`) {
		return false
	}
	return !strings.ContainsFunc(name, unicode.IsControl)
}

// insidePath cleans a relative path and reports whether it names
// something strictly inside its root.
func insidePath(p string) (string, bool) {
	if p == "" || strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) {
		return "", false
	}
	clean := path.Clean(p)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

// linkBins checks that each target is a regular file inside pkg (through
// root, so no link leads out), makes it executable, and creates
// bin/<name> → ../pkg/<target> in dir.
func linkBins(root *os.Root, dir string, bins map[string]string) error {
	if err := os.Mkdir(filepath.Join(dir, binDir), 0o755); err != nil {
		return fmt.Errorf("bin dir: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(bins)) {
		target := bins[name]
		fi, err := root.Stat(target)
		if err != nil {
			return fmt.Errorf("command %s: its target %s: %w", name, target, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("command %s: its target %s is not a regular file", name, target)
		}
		if err := root.Chmod(target, 0o755); err != nil {
			return fmt.Errorf("command %s: %w", name, err)
		}
		if err := os.Symlink("../"+pkgDir+"/"+target, filepath.Join(dir, binDir, name)); err != nil {
			return fmt.Errorf("command %s: %w", name, err)
		}
	}
	return nil
}

// shareable makes the tree at dir readable by every uid and writable by
// its owner only: directories 0755, files 0755 when any execute bit is
// set and 0644 otherwise. Symlinks are left as they are.
func shareable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var mode fs.FileMode
		switch {
		case d.IsDir():
			mode = 0o755
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode = 0o644
			if fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			if fi.Mode().Perm() == mode {
				return nil
			}
		default:
			return nil
		}
		return os.Chmod(p, mode)
	})
}

// hashFile returns the corepack digests of the file at p below root.
func hashFile(root *os.Root, p string) (hexDigests, error) {
	f, err := root.Open(p)
	if err != nil {
		return hexDigests{}, err
	}
	defer f.Close()
	h := newHasher()
	if _, err := io.Copy(h, f); err != nil {
		return hexDigests{}, err
	}
	return toHex(h.sums()), nil
}
