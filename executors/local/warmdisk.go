package local

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// A warm disk: the run's own file system (disk.go) made from an image that
// already holds the package manager's store for the lockfile the run
// installs (pnpm 10's store, bun 1's cache, Yarn classic's cache:
// warmManagers), so that a second run of a lockfile links or copies its
// packages from a filled store, as the bare manager does from its warm
// one, instead of unpacking every tarball into an empty store again.
//
// The store is written by gilf alone, never by a sandbox: after an install
// step that passed, gilf unpacks the tarballs the lockfile names from the
// verifying cache (each checked, when it came in, against the integrity
// its registry publishes) into the manager's layout (pnpmstore.go,
// buncache.go, yarncache.go) and makes an image of it (mkfs.ext4 -d), one per
// lockfile. A later run of the same lockfile copies the image as its disk
// (copy_file_range over its data, holes kept) instead of formatting an
// empty one; the store is the run's own copy, so whatever a step does to
// it (pnpm links from it, and a linked file is the store's file) dies
// with the run. It is outside the workspace until the install step starts
// (the git work tree never adds it), then renamed to where the manager
// keeps its store in the sandbox (pnpmSandboxStore, bunSandboxCache,
// yarnSandboxCache).
//
// Measured (BenchmarkInstallCacheRealRepo, pnpm 10.33.0 on unjs/defu, 500
// packages: second run 3.1x a bare warm install before, 0.6-0.9x after;
// bun 1.4.5 on 0001-labs/ds-one, 212 packages: 3.7x before, 2.3x after,
// where bun itself takes a bare warm install's time and gilf's step setup
// as much again): see docs/install-cache.md.
const (
	// DefaultWarmBytes bounds the disk space the warm images take (their
	// allocated blocks); the least recently used are removed past it.
	DefaultWarmBytes int64 = 20 << 30
	// warmStoreDir is where a warm image holds the store, at the root
	// of the run's file system (root's, unseen by the sandbox).
	warmStoreDir = ".gilf-warm-store"
	// warmMetaName records, beside it, what the store holds.
	warmMetaName = ".gilf-warm.json"
	// pnpmSandboxStore is where pnpm keeps its store in the sandbox,
	// under the workspace (npm_config_store_dir, which a checkout's
	// .npmrc does not override): on HOME, its default, the store is
	// another mount than node_modules, and pnpm copies every file
	// instead of hard-linking it (a bare pnpm links from its store). In
	// node_modules, which every tool (git, linters, formatters, test
	// runners) leaves aside, and which pnpm leaves alone.
	pnpmSandboxStore = "node_modules/.pnpm-store"
	// bunSandboxCache is bun's cache in the sandbox, for the same reason
	// (BUN_INSTALL_CACHE_DIR): bun hard-links from it too.
	bunSandboxCache = "node_modules/.cache/bun"
	// warmImageExt names the images in WarmOptions.Dir.
	warmImageExt = ".img"
	// warmTmpStale is the age past which a temporary tree or image in
	// WarmOptions.Dir is a dead maker's (another process may be making
	// one now: it takes seconds).
	warmTmpStale = time.Hour
)

// WarmOptions configures warm disks.
type WarmOptions struct {
	// Dir holds the images (made 0700 when missing); "" turns warm
	// disks off. They need Egress.Cache and a disk ceiling.
	Dir string
	// MaxBytes bounds the images' allocated bytes; zero means
	// DefaultWarmBytes.
	MaxBytes int64
}

// warmMeta is what a warm image holds.
type warmMeta struct {
	Packages     int   `json:"packages"`
	TarballBytes int64 `json:"tarball_bytes"`
}

// warmPlan is what a run knows of its warm disk.
type warmPlan struct {
	// pm is the package manager whose store the disk holds.
	pm validation.PackageManager
	// image is the image the run's disk is copied from; "" for none.
	image string
	// key names the image of the run's lockfile; "" when the run has
	// none to make.
	key string
	// pkgs are the lockfile's packages, to make the image from.
	pkgs []lockedPackage
	// workspace is the run's, once its install passed: what the
	// manager made there tells how it names its store's entries.
	workspace string
	// owner and ownerGID own the store in the image: a run that has
	// them (uidPool.take prefers them) changes no owner of it, which
	// takes a walk over every file (tens of milliseconds for a few
	// hundred packages); another run makes the store its own.
	owner, ownerGID uint32
}

// warmDisks makes and finds warm images, one maker at a time.
type warmDisks struct {
	mu sync.Mutex
}

// warmFor is the warm disk of a run: the lockfile of the checkout at dir
// (warmManagers: pnpm 10's pnpm-lock.yaml 9.0, bun 1's bun.lock, Yarn
// classic's yarn.lock) keyed with the manager, its store's layout and the
// disk's ceiling, the uid that owns the store in its image, and its image
// when one is kept. It is empty when the run installs nothing warm disks
// serve.
func (e *Executor) warmFor(plan validation.Plan, tool toolMount, dir string) warmPlan {
	o := e.opts
	if o.Warm.Dir == "" || o.Egress.Cache == nil || o.Disk.off() || !installs(plan) {
		return warmPlan{}
	}
	wm, ok := warmManagers[tool.manager]
	if !ok || !strings.HasPrefix(tool.version, wm.version) {
		return warmPlan{}
	}
	lock, err := readCapped(filepath.Join(dir, wm.lockfile), MaxSeedLockfileBytes)
	if err != nil {
		return warmPlan{}
	}
	pkgs := wm.packages(lock)
	if len(pkgs) == 0 {
		return warmPlan{}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00", tool.manager, wm.layout, o.Disk.Bytes, o.Disk.Inodes)
	h.Write(lock)
	sum := h.Sum(nil)
	// The store's owner: a uid of the pool the key picks, which the run
	// takes when no other run holds it.
	off := binary.BigEndian.Uint32(sum) % max(o.UIDCount, 1)
	w := warmPlan{pm: tool.manager, key: hex.EncodeToString(sum), pkgs: pkgs, owner: o.SandboxUID + off, ownerGID: o.SandboxGID + off}
	img := filepath.Join(o.Warm.Dir, w.key+warmImageExt)
	if st, err := os.Lstat(img); err == nil && st.Mode().IsRegular() {
		now := time.Now()
		os.Chtimes(img, now, now) // used: last to be removed
		w.image = img
	}
	return w
}

// warmManager is what warm disks know of a package manager.
type warmManager struct {
	// version is the prefix of the versions whose store layout is
	// layout.
	version, layout string
	// lockfile is the lockfile read, packages what it locks.
	lockfile string
	packages func(lock []byte) []lockedPackage
	// store makes an empty store at a directory, for a run's plan.
	store func(root string, w warmPlan) (warmWriter, error)
	// sandbox is where the store goes in the workspace (the manager's
	// setting names it; see toolMount.env).
	sandbox string
}

// warmWriter writes a store from the verifying cache.
type warmWriter interface {
	addFromCache(c *egress.Cache, pkgs []lockedPackage) error
	// written are the packages written and their tarballs' bytes.
	written() (int, int64)
}

// warmManagers are the managers warm disks serve.
var warmManagers = map[validation.PackageManager]warmManager{
	validation.PNPM: {version: "10.", layout: "pnpm-store-" + pnpmStoreLayout, lockfile: "pnpm-lock.yaml", packages: pnpmLockPackages, sandbox: pnpmSandboxStore,
		store: func(root string, _ warmPlan) (warmWriter, error) { return newPnpmStore(root) }},
	validation.Bun: {version: "1.", layout: "bun-cache" + bunCacheSuffix, lockfile: "bun.lock", packages: bunLockPackages, sandbox: bunSandboxCache,
		store: func(root string, w warmPlan) (warmWriter, error) {
			return newBunCache(root, bunRegistrySuffix(filepath.Join(w.workspace, bunSandboxCache), w.pkgs))
		}},
	validation.Yarn: {version: "1.", layout: "yarn-cache-" + yarnCacheVersion, lockfile: "yarn.lock", packages: yarnLockPackages, sandbox: yarnSandboxCache,
		store: func(root string, _ warmPlan) (warmWriter, error) { return newYarnCache(root) }},
}

// installs says the plan has an install step that will run.
func installs(plan validation.Plan) bool {
	return slices.ContainsFunc(plan.Steps, func(s validation.Step) bool {
		return s.Name == validation.StepInstall && s.Inconclusive == ""
	})
}

// buildWarm makes the image of the run's lockfile when it has none and
// its install step passed (so the verifying cache holds what it fetched):
// the "warm-disk" phase. A failure is logged; the run is not affected.
func (r *run) buildWarm(ctx context.Context) {
	w := r.warm
	if w.key == "" || w.image != "" || ctx.Err() != nil || !installPassed(r.res.Steps) {
		return
	}
	if r.p.disk == nil {
		return
	}
	w.workspace = r.dirs.Workspace
	if err := r.e.makeWarmImage(ctx, *r.p.disk, w); err != nil {
		r.e.log.Warn("warm disk not made", logkey.Manager, string(r.tool.manager), logkey.Err, err.Error())
	}
	r.clock.mark("warm-disk")
}

// installPassed says the results hold an install step that passed.
func installPassed(steps []validation.StepResult) bool {
	return slices.ContainsFunc(steps, func(s validation.StepResult) bool {
		return s.Name == validation.StepInstall && s.Status == validation.StatusPassed
	})
}

// makeWarmImage writes the store of w's packages that the verifying cache
// holds and makes the image of a run's disk holding it, then removes the
// least recently used images past the bound.
func (e *Executor) makeWarmImage(ctx context.Context, tools diskTools, w warmPlan) error {
	e.warm.mu.Lock()
	defer e.warm.mu.Unlock()
	o := e.opts
	img := filepath.Join(o.Warm.Dir, w.key+warmImageExt)
	if _, err := os.Lstat(img); err == nil {
		return nil
	}
	if err := os.MkdirAll(o.Warm.Dir, 0o700); err != nil {
		return err
	}
	tree, err := os.MkdirTemp(o.Warm.Dir, ".tmp-tree-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	st, err := warmManagers[w.pm].store(filepath.Join(tree, warmStoreDir), w)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := st.addFromCache(o.Egress.Cache, w.pkgs); err != nil {
		return err
	}
	wrote := time.Since(start)
	n, size := st.written()
	if n == 0 {
		return nil
	}
	meta, err := json.Marshal(warmMeta{Packages: n, TarballBytes: size})
	if err != nil {
		return err
	}
	if err := writeNew(filepath.Join(tree, warmMetaName), meta, 0o600, -1, -1); err != nil {
		return err
	}
	if err := chownTree(filepath.Join(tree, warmStoreDir), int(w.owner), int(w.ownerGID)); err != nil {
		return err
	}
	if err := mkfsWarm(ctx, tools, o.Disk, tree, img); err != nil {
		return err
	}
	e.log.Info("warm disk made", logkey.Manager, string(w.pm), "packages", n, "tarball_bytes", size,
		"store_ms", wrote.Milliseconds(), "image_ms", (time.Since(start) - wrote).Milliseconds())
	return evictWarm(o.Warm.Dir, cmp.Or(o.Warm.MaxBytes, DefaultWarmBytes))
}

// mkfsWarm makes img, an image of the run disk's size and inodes, filled
// from tree.
func mkfsWarm(ctx context.Context, tools diskTools, l DiskLimit, tree, img string) error {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	id, err := randomID()
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(img), ".tmp-img-"+id)
	if err := sparseFile(tmp, l.Bytes); err != nil {
		return err
	}
	if err := mkfsWith(ctx, tools.mkfs, tmp, l.Inodes, "-d", tree); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, img)
}

// evictWarm removes the least recently used images in dir (by
// modification time, which a use moves) until what they take is within
// max bytes; temporary files older than warmTmpStale go too (a process
// that died making one).
func evictWarm(dir string, max int64) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type img struct {
		path  string
		used  time.Time
		bytes int64
	}
	var imgs []img
	var total int64
	for _, de := range ents {
		p := filepath.Join(dir, de.Name())
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			continue
		}
		used := time.Unix(st.Mtim.Unix())
		if strings.HasPrefix(de.Name(), ".tmp-") {
			if time.Since(used) > warmTmpStale {
				os.RemoveAll(p)
			}
			continue
		}
		if !strings.HasSuffix(de.Name(), warmImageExt) || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		imgs = append(imgs, img{p, used, st.Blocks * 512})
		total += st.Blocks * 512
	}
	slices.SortFunc(imgs, func(a, b img) int { return a.used.Compare(b.used) })
	var errs []error
	for _, im := range imgs {
		if total <= max {
			break
		}
		if err := os.Remove(im.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		total -= im.bytes
	}
	return errors.Join(errs...)
}

// copySparse copies the image src into the new file dst: its data
// extents by copy_file_range, its holes left holes.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = copyExtents(in, out, st.Size())
	if terr := out.Truncate(st.Size()); err == nil {
		err = terr
	}
	return errors.Join(err, out.Close())
}

// copyExtents copies in's data extents to the same offsets of out.
func copyExtents(in, out *os.File, size int64) error {
	var off int64
	for off < size {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if err := copyRange(in, out, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// copyRange copies n bytes at off of in to the same offset of out: in the
// kernel (copy_file_range), or through a buffer where the kernel will not
// copy between the two (other file systems, on some kernels).
func copyRange(in, out *os.File, off, n int64) error {
	for n > 0 {
		roff, woff := off, off
		c, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(min(n, 1<<30)), 0)
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			return copyRangeBuffered(in, out, off, n)
		}
		if err != nil {
			return err
		}
		if c == 0 {
			return io.ErrUnexpectedEOF
		}
		off, n = off+int64(c), n-int64(c)
	}
	return nil
}

// copyRangeBuffered is copyRange through memory.
func copyRangeBuffered(in, out *os.File, off, n int64) error {
	_, err := io.Copy(io.NewOffsetWriter(out, off), io.NewSectionReader(in, off, n))
	return err
}

// chownTree makes uid and gid own root and everything under it.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// ownedBy says uid and gid own the file st describes.
func ownedBy(st fs.FileInfo, uid, gid int) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == uid && int(sys.Gid) == gid
}

// seedWarmStore gives the install step the warm store its disk was made
// with: owned by the run's uid, renamed to rel in the workspace, where
// the manager looks for it (never over anything there: a checkout that
// has node_modules keeps the store out). It returns the packages and
// tarball bytes the store holds; nothing when the disk is not warm.
func seedWarmStore(base, workspace, rel string, uid, gid int) (int, int64, error) {
	src := filepath.Join(base, warmStoreDir)
	if _, err := os.Lstat(src); err != nil {
		return 0, 0, nil
	}
	var meta warmMeta
	if b, err := readCapped(filepath.Join(base, warmMetaName), 4096); err == nil {
		_ = json.Unmarshal(b, &meta)
	}
	// The image's store is the run's uid's already when the run has
	// the store's owner (warmPlan.owner); else it is made the run's.
	var err error
	if st, serr := os.Lstat(src); serr != nil || !ownedBy(st, uid, gid) {
		err = chownTree(src, uid, gid)
	}
	dst := workspace
	for _, d := range strings.Split(filepath.Dir(rel), "/") {
		if dst = filepath.Join(dst, d); err == nil {
			err = mkdirOwned(dst, 0o755, uid, gid)
		}
	}
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, filepath.Join(workspace, rel), unix.RENAME_NOREPLACE)
	}
	if err != nil {
		return 0, 0, errors.Join(fmt.Errorf("warm store: %w", err), os.RemoveAll(src))
	}
	return meta.Packages, meta.TarballBytes, nil
}
