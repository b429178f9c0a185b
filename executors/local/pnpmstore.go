package local

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors/local/egress"
)

// pnpm's content-addressable store, as pnpm 10 lays it out (store v10):
//
//	files/<2 hex>/<126 hex>[-exec]   a file of a package, named by the
//	                                 sha512 of its bytes (-exec: executable)
//	index/<2 hex>/<62 hex>-<id>.json a package: its files by path, named by
//	                                 the first 64 hex digits of its
//	                                 tarball's sha512 and its lockfile id
//
// gilf writes such a store from the verifying cache (warmdisk.go): every
// file's name is the digest of the bytes it holds, and a package's index
// is found only by the digest of the tarball it came from, which is the
// integrity the lockfile names. A path inside a tarball is never a path
// on the worker: it is only a key of the index.
const (
	// pnpmStoreLayout is the store's directory under its root.
	pnpmStoreLayout = "v10"
	// pnpmWarmLockfileVersion is the lockfile format whose packages are
	// read (pnpm 9 and 10 write it).
	pnpmWarmLockfileVersion = "9.0"
	// MaxWarmStoreBytes bounds the bytes of files one warm store holds
	// (tarballs unpacked); packages past it are left to the package
	// manager.
	MaxWarmStoreBytes int64 = 2 << 30
	// MaxWarmStoreFiles bounds the files of one warm store, likewise.
	MaxWarmStoreFiles = 400_000
)

// lockedPackage is one package a lockfile (pnpm's, bun's, Yarn's) locks from a
// registry.
type lockedPackage struct {
	// id is the lockfile's key, name@version (Yarn's: its cache
	// directory, yarnSlug).
	id string
	// sum is the sha512 of its tarball (the lockfile's integrity).
	sum []byte
	// yarn is what Yarn classic's cache records of it (its lockfile's
	// packages only).
	yarn *yarnLocked
}

// pnpmLockPackages are the registry packages of a pnpm-lock.yaml of
// format pnpmWarmLockfileVersion: the entries of its packages section
// whose resolution is an sha512 integrity alone (a tarball URL, a git
// commit or a directory is left to pnpm). Any other format gives none.
// The file is read line by line, as pnpm writes it; what does not parse
// is skipped.
func pnpmLockPackages(lock []byte) []lockedPackage {
	var pkgs []lockedPackage
	in, version, id := false, "", ""
	sc := bufio.NewScanner(bytes.NewReader(lock))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
		case !strings.HasPrefix(line, " "):
			in, id = line == "packages:", ""
			if v, ok := strings.CutPrefix(line, "lockfileVersion:"); ok {
				version = strings.Trim(strings.TrimSpace(v), `'"`)
			}
		case !in:
		case strings.HasPrefix(line, "  ") && line[2] != ' ':
			id = ""
			if k, ok := strings.CutSuffix(line[2:], ":"); ok {
				id = unquoteYAMLKey(k)
			}
		case id != "" && strings.HasPrefix(line, "    resolution: {"):
			if sum := pnpmResolutionSum(line); sum != nil {
				pkgs = append(pkgs, lockedPackage{id: id, sum: sum})
			}
			id = ""
		}
	}
	if version != pnpmWarmLockfileVersion {
		return nil
	}
	return pkgs
}

// unquoteYAMLKey is a mapping key as written, its quotes removed.
func unquoteYAMLKey(k string) string {
	if len(k) >= 2 && k[0] == '\'' && k[len(k)-1] == '\'' {
		return strings.ReplaceAll(k[1:len(k)-1], "''", "'")
	}
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' && !strings.Contains(k, `\`) {
		return k[1 : len(k)-1]
	}
	return k
}

// pnpmResolutionSum is the sha512 of a flow-style resolution that names
// only an integrity, nil otherwise.
func pnpmResolutionSum(line string) []byte {
	body, ok := strings.CutSuffix(strings.TrimSpace(strings.TrimPrefix(line, "    resolution:")), "}")
	if !ok {
		return nil
	}
	v, ok := strings.CutPrefix(strings.TrimPrefix(body, "{"), "integrity: ")
	if !ok {
		return nil
	}
	return sha512SRI(v)
}

// pnpmIndexName is where pnpm looks a package's index up in the store
// (pnpm's getIndexFilePathInCafs).
func pnpmIndexName(sum []byte, id string) string {
	h := hex.EncodeToString(sum)[:64]
	safe := strings.Map(func(r rune) rune {
		if strings.ContainsRune(`\/:*?"<>|`, r) {
			return '+'
		}
		return r
	}, id)
	return filepath.Join("index", h[:2], h[2:]+"-"+safe+".json")
}

// pnpmIndexFile is one file of a package's index, as pnpm writes it.
type pnpmIndexFile struct {
	CheckedAt int64  `json:"checkedAt"`
	Integrity string `json:"integrity"`
	Mode      int64  `json:"mode"`
	Size      int64  `json:"size"`
}

// pnpmIndex is a package's index.
type pnpmIndex struct {
	Name          json.RawMessage          `json:"name,omitempty"`
	Version       json.RawMessage          `json:"version,omitempty"`
	RequiresBuild bool                     `json:"requiresBuild"`
	Files         map[string]pnpmIndexFile `json:"files"`
}

// warmBudget is what is left of a warm store's bytes and files.
type warmBudget struct {
	bytes int64
	files int
}

// newWarmBudget is the budget of one warm store.
func newWarmBudget() warmBudget {
	return warmBudget{bytes: MaxWarmStoreBytes, files: MaxWarmStoreFiles}
}

// take takes a file of size bytes from the budget: errWarmFull when it
// does not fit.
func (b *warmBudget) take(size int64) error {
	if b.files--; b.files < 0 || size > b.bytes {
		return errWarmFull
	}
	b.bytes -= size
	return nil
}

// pnpmStoreWriter writes packages into a pnpm store at root (its
// pnpmStoreLayout directory), within a budget of bytes and files.
type pnpmStoreWriter struct {
	root string
	warmBudget
	// packages and tarBytes are what was written: packages and the
	// bytes of their tarballs.
	packages int
	tarBytes int64
}

func (w *pnpmStoreWriter) written() (int, int64) { return w.packages, w.tarBytes }

// errWarmFull says a warm store's budget is spent.
var errWarmFull = errors.New("warm store budget spent")

// newPnpmStore makes an empty store at root/pnpmStoreLayout, with the
// directories pnpm makes.
func newPnpmStore(root string) (*pnpmStoreWriter, error) {
	dir := filepath.Join(root, pnpmStoreLayout)
	for _, sub := range []string{"files", "index"} {
		for i := range 256 {
			if err := os.MkdirAll(filepath.Join(dir, sub, fmt.Sprintf("%02x", i)), 0o755); err != nil {
				return nil, err
			}
		}
	}
	return &pnpmStoreWriter{root: dir, warmBudget: newWarmBudget()}, nil
}

// addFromCache adds the packages the cache holds; a package the cache
// lacks, or whose tarball pnpm could not read either, is left out (pnpm
// fetches it). It stops at the budget.
func (w *pnpmStoreWriter) addFromCache(c *egress.Cache, pkgs []lockedPackage) error {
	idx := func(p lockedPackage) string { return filepath.Join(w.root, pnpmIndexName(p.sum, p.id)) }
	n, size, err := addTarballs(c, pkgs, idx, func(p lockedPackage, r io.Reader) error { return w.add(r, p.sum, idx(p)) })
	w.packages, w.tarBytes = w.packages+n, w.tarBytes+size
	return err
}

// addTarballs adds, with add, each of pkgs whose tarball the cache holds
// and whose entry (at the path made names) is not there yet. A package
// add finds pnpm or bun would not unpack either (badTarballError) is left
// out, what it made of it removed; at the budget (errWarmFull) it stops.
// It returns the packages added and their tarballs' bytes.
func addTarballs(c *egress.Cache, pkgs []lockedPackage, made func(lockedPackage) string, add func(lockedPackage, io.Reader) error) (int, int64, error) {
	var n int
	var total int64
	for _, p := range pkgs {
		if _, err := os.Lstat(made(p)); err == nil {
			continue
		}
		f, size, ok := c.OpenTarball(p.sum)
		if !ok {
			continue
		}
		err := add(p, f)
		f.Close()
		var bad *badTarballError
		if full := errors.Is(err, errWarmFull); full || errors.As(err, &bad) {
			if rerr := os.RemoveAll(made(p)); rerr != nil || full {
				return n, total, rerr
			}
			continue
		}
		if err != nil {
			return n, total, err
		}
		n, total = n+1, total+size
	}
	return n, total, nil
}

// tarballEntries reads the tarball r, gzip or not; done closes what it
// opened.
func tarballEntries(r io.Reader) (tr *tar.Reader, done func(), err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(3); !bytes.Equal(magic, []byte{0x1f, 0x8b, 8}) {
		return tar.NewReader(br), func() {}, nil
	}
	z, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, &badTarballError{err}
	}
	return tar.NewReader(z), func() { z.Close() }, nil
}

// badTarballError is a tarball pnpm would not unpack either.
type badTarballError struct{ err error }

func (e *badTarballError) Error() string { return "tarball: " + e.err.Error() }

// add unpacks the tarball r (gzip or not) into the store's files and
// writes its index at idx, as pnpm's addFilesFromTarball does: the first
// path segment dropped, regular files and hard links kept (directories
// and symlinks are not), a later entry of the same path winning.
func (w *pnpmStoreWriter) add(r io.Reader, sum []byte, idx string) error {
	tr, done, err := tarballEntries(r)
	if err != nil {
		return err
	}
	defer done()
	index := pnpmIndex{Files: map[string]pnpmIndexFile{}}
	var manifest []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return &badTarballError{err}
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeLink:
		case tar.TypeDir, tar.TypeSymlink:
			continue
		default:
			return &badTarballError{fmt.Errorf("entry type %q", h.Typeflag)}
		}
		name, ok := pnpmEntryName(h.Name)
		if !ok {
			continue
		}
		if err := w.take(h.Size); err != nil {
			return err
		}
		body := io.Reader(tr)
		if h.Typeflag == tar.TypeLink {
			body = bytes.NewReader(nil)
		}
		var keep *bytes.Buffer
		if name == "package.json" && h.Size <= MaxSeedLockfileBytes {
			keep = &bytes.Buffer{}
			body = io.TeeReader(body, keep)
		}
		fsum, size, err := w.writeFile(body, h.Mode&0o111 != 0)
		if err != nil {
			return err
		}
		if keep != nil {
			manifest = keep.Bytes()
		}
		index.Files[name] = pnpmIndexFile{
			CheckedAt: time.Now().UnixMilli(),
			Integrity: "sha512-" + base64.StdEncoding.EncodeToString(fsum),
			Mode:      h.Mode,
			Size:      size,
		}
	}
	if err := index.fromManifest(manifest); err != nil {
		return &badTarballError{err}
	}
	b, err := json.Marshal(index)
	if err != nil {
		return err
	}
	return writeNew(idx, b, 0o644, -1, -1)
}

// pnpmEntryName is the path pnpm's tarball parser gives a tar entry's
// name: everything after its first slash (or backslash), "./" resolved,
// "//" folded. ok is false for a name that would leave the package's
// directory (pnpm itself is not asked to import it).
func pnpmEntryName(name string) (string, bool) {
	if i := strings.IndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if strings.Contains(name, "./") || strings.Contains(name, `.\`) {
		name = path.Join("/", strings.ReplaceAll(name, `\`, "/"))[1:]
	}
	name = strings.ReplaceAll(name, "//", "/")
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) {
		return "", false
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." || seg == "." {
			return "", false
		}
	}
	return name, true
}

// fromManifest takes the package's name and version from its
// package.json, and whether it needs a build (pnpm's pkgRequiresBuild:
// an install script, binding.gyp, or .hooks/).
func (x *pnpmIndex) fromManifest(b []byte) error {
	if b == nil {
		return errors.New("no package.json")
	}
	var m struct {
		Name    json.RawMessage            `json:"name"`
		Version json.RawMessage            `json:"version"`
		Scripts map[string]json.RawMessage `json:"scripts"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("package.json: %w", err)
	}
	x.Name, x.Version = m.Name, m.Version
	for _, s := range []string{"preinstall", "install", "postinstall"} {
		if v, ok := m.Scripts[s]; ok && truthy(v) {
			x.RequiresBuild = true
		}
	}
	for f := range x.Files {
		if f == "binding.gyp" || strings.HasPrefix(f, ".hooks/") {
			x.RequiresBuild = true
		}
	}
	return nil
}

// truthy is JavaScript's Boolean() of a JSON value.
func truthy(v json.RawMessage) bool {
	switch s := string(bytes.TrimSpace(v)); s {
	case "", "null", "false", "0", `""`, "-0":
		return false
	}
	return true
}

// writeFile writes body as a file of the store, named by the sha512 of
// its bytes (-exec when executable, mode 0755, else 0644), unless the
// store holds it already. It returns the digest and the size.
func (w *pnpmStoreWriter) writeFile(body io.Reader, exec bool) ([]byte, int64, error) {
	tmp, err := os.CreateTemp(w.root, ".tmp-")
	if err != nil {
		return nil, 0, err
	}
	defer os.Remove(tmp.Name())
	h := sha512.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, 0, &badTarballError{err}
	}
	sum := h.Sum(nil)
	x := hex.EncodeToString(sum)
	dst := filepath.Join(w.root, "files", x[:2], x[2:])
	mode := storeFileMode(exec)
	if exec {
		dst += "-exec"
	}
	if _, err := os.Lstat(dst); err == nil {
		return sum, n, nil
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return nil, 0, err
	}
	return sum, n, os.Rename(tmp.Name(), dst)
}

// storeFileMode is the mode of a file a warm store holds: 0755 when the
// tarball made it executable, else 0644.
func storeFileMode(exec bool) os.FileMode {
	if exec {
		return 0o755
	}
	return 0o644
}
