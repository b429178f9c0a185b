package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// A package manager the toolchain provides (pnpm, Yarn, Bun) reaches a
// sandbox from a file system of its own when the host can make one (the
// disk ceiling's mkfs and loop mounts): a read-only ext4 image of its
// mirror, made once beside the mirror and mounted read-only in each run
// directory. A bind of a plain host directory shows its host path in
// /proc/self/mountinfo (the root field is the path inside the source file
// system); a bind of the image's root shows "/" and a loop device, nothing
// of the worker's. Copying the tool onto the run's own disk would do the
// same, but pnpm is 21 MB in 1,354 files and Bun 100 MB: ~190 ms per run
// for pnpm here (and its write-back at unmount), charged to the run's
// ceiling; the shared image costs one read-only mount per run (~10 ms,
// BenchmarkRunFixedCostTool), and making it is paid once per version.
//
// Whatever is mounted must be the verified toolchain's bytes (the mirror
// rule, verifyMirror): an image is checked against the toolchain, mounted,
// before this process first uses it (when it made it, or found it made by
// another process), and only that very file is used later without a new
// check: one whose device, inode, size, change or modification time
// differs is checked again (and made again when it does not match).

// toolImageSuffix names a mirror's image, beside it.
const toolImageSuffix = ".img"

// toolMountName is the mount point of the image in a run directory.
const toolMountName = "tool"

// toolImageSlack is room the image has beyond its files: ext4's metadata
// and each directory's block.
const toolImageSlack = 8 << 20

// imageKey identifies one image file, as checked.
type imageKey struct {
	dev, ino         uint64
	size             int64
	mtimeNs, ctimeNs int64
	mode, uid        uint32
}

func keyOf(st *unix.Stat_t) imageKey {
	return imageKey{
		dev: st.Dev, ino: st.Ino, size: st.Size,
		mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano(),
		mode: st.Mode, uid: st.Uid,
	}
}

// checkedImages are the images this process has checked, by path.
type checkedImages struct {
	mu   sync.Mutex
	keys map[string]imageKey
}

func (c *checkedImages) ok(img string, k imageKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.keys[img]
	return ok && got == k
}

func (c *checkedImages) remember(img string, k imageKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[string]imageKey{}
	}
	c.keys[img] = k
}

// toolImage returns the image of mirror (the checked copy of the verified
// toolchain tree src), made when missing or not matching. The caller holds
// the mirror (holdMirror), which keeps the sweep off both.
func (e *Executor) toolImage(ctx context.Context, tools diskTools, src, mirror string) (string, error) {
	img := mirror + toolImageSuffix
	var st unix.Stat_t
	if err := unix.Lstat(img, &st); err == nil {
		if e.images.ok(img, keyOf(&st)) {
			return img, nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			if err := checkImage(ctx, tools, src, img, filepath.Dir(mirror)); err == nil {
				e.images.remember(img, keyOf(&st))
				return img, nil
			} else {
				e.log.Warn("tool image does not match the verified toolchain; making it again", "image", filepath.Base(img), "error", err.Error())
			}
		}
		if err := os.RemoveAll(img); err != nil {
			return "", fmt.Errorf("tool image: %w", err)
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return "", fmt.Errorf("tool image: %w", err)
	}
	return e.makeToolImage(ctx, tools, src, mirror, img)
}

// makeToolImage makes img from mirror (mkfs.ext4 -d), checks it against
// src and renames it into place.
func (e *Executor) makeToolImage(ctx context.Context, tools diskTools, src, mirror, img string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	bytes, inodes, err := treeSize(mirror)
	if err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	parent := filepath.Dir(mirror)
	f, err := os.CreateTemp(parent, ".tmp-img-")
	if err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			os.Remove(tmp)
		}
	}()
	terr := f.Truncate(bytes)
	if err := errors.Join(terr, f.Close()); err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	if err := mkfsWith(ctx, tools.mkfs, tmp, inodes, "-d", mirror); err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	// mkfs adds lost+found, and gives the root the source's mode: the
	// image must hold the mirror's tree and nothing else.
	if err := withImage(ctx, tools, tmp, parent, false, func(dir string) error {
		if err := os.Remove(filepath.Join(dir, "lost+found")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		return verifyMirror(src, dir)
	}); err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	if err := os.Rename(tmp, img); err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	done = true
	var st unix.Stat_t
	if err := unix.Lstat(img, &st); err != nil {
		return "", fmt.Errorf("tool image: %w", err)
	}
	e.images.remember(img, keyOf(&st))
	return img, nil
}

// checkImage mounts img read-only and checks it against src.
func checkImage(ctx context.Context, tools diskTools, src, img, parent string) error {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	return withImage(ctx, tools, img, parent, true, func(dir string) error { return verifyMirror(src, dir) })
}

// withImage mounts img on a fresh directory under parent, calls f with it,
// and unmounts and removes it.
func withImage(ctx context.Context, tools diskTools, img, parent string, ro bool, f func(dir string) error) (err error) {
	dir, err := os.MkdirTemp(parent, ".tmp-mnt-")
	if err != nil {
		return err
	}
	defer func() {
		uerr := unmountDir(dir)
		if uerr == nil {
			uerr = os.Remove(dir)
		}
		err = errors.Join(err, uerr)
	}()
	if err := mountImage(ctx, tools.mount, img, dir, ro); err != nil {
		return err
	}
	return f(dir)
}

// treeSize is the size of an ext4 file system that holds the tree dir:
// its files' blocks with slack, and an inode for each entry with some to
// spare.
func treeSize(dir string) (bytes, inodes int64, err error) {
	const block = 4096
	err = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		inodes++
		info, err := de.Info()
		if err != nil {
			return err
		}
		bytes += (info.Size() + block - 1) / block * block
		if de.IsDir() {
			bytes += block
		}
		return nil
	})
	bytes += bytes/8 + toolImageSlack
	return (bytes + block - 1) / block * block, max(inodes+64, MinDiskInodes), err
}

// mountTool mounts the image read-only at the run directory's tool mount
// point and returns it.
func mountTool(ctx context.Context, tools diskTools, img, runRoot string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	dir := filepath.Join(runRoot, toolMountName)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("tool mount point: %w", err)
	}
	if err := mountImage(ctx, tools.mount, img, dir, true); err != nil {
		return "", fmt.Errorf("tool: %w", err)
	}
	return dir, nil
}

// unmountTool detaches a run directory's tool mount, if any.
func unmountTool(dir string) error {
	if err := unmountDir(dir); err != nil {
		return fmt.Errorf("unmount the run's package manager: %w", err)
	}
	return nil
}
