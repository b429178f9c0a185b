package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/gilf-review/gilf/internal/logkey"
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
// ceiling; the shared image costs one read-only mount per run (~10 ms;
// BenchmarkRunFixedCostTool: pnpm's fixed cost over npm's 38–49 ms with
// the image, 62–63 ms with the mirror bound, within this loaded host's
// noise), and making it is paid once per version (1–2.5 s here).
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
// toolchain tree src), open, made when missing or not matching: the file
// returned is the one checked, and the one to mount (mountTool), whatever
// is at its path by then. The caller holds the mirror (holdMirror), which
// keeps the sweep off both, and closes the file.
func (e *Executor) toolImage(ctx context.Context, tools diskTools, src, mirror string) (*os.File, error) {
	img := mirror + toolImageSuffix
	f, err := os.OpenFile(img, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case err == nil:
		k, kerr := keyOfFile(f)
		if kerr == nil && e.images.ok(img, k) {
			return f, nil
		}
		if kerr == nil {
			kerr = checkImage(ctx, tools, src, f, filepath.Dir(mirror))
		}
		if kerr == nil {
			e.images.remember(img, k)
			return f, nil
		}
		f.Close()
		e.log.Warn("tool image does not match the verified toolchain; making it again", "image", filepath.Base(img), logkey.Err, kerr.Error())
		if err := os.RemoveAll(img); err != nil {
			return nil, fmt.Errorf("tool image: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("tool image: %w", err)
	}
	return e.makeToolImage(ctx, tools, src, mirror, img)
}

// keyOfFile is the key of the regular file f.
func keyOfFile(f *os.File) (imageKey, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return imageKey{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return imageKey{}, errors.New("not a regular file")
	}
	return keyOf(&st), nil
}

// makeToolImage makes img from mirror (mkfs.ext4 -d), checks it against
// src and renames it into place; it returns it open.
func (e *Executor) makeToolImage(ctx context.Context, tools diskTools, src, mirror, img string) (*os.File, error) {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	bytes, inodes, err := treeSize(mirror)
	if err != nil {
		return nil, fmt.Errorf("tool image: %w", err)
	}
	parent := filepath.Dir(mirror)
	f, err := os.CreateTemp(parent, ".tmp-img-")
	if err != nil {
		return nil, fmt.Errorf("tool image: %w", err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Truncate(bytes); err != nil {
		return nil, fmt.Errorf("tool image: %w", err)
	}
	if err := mkfsWith(ctx, tools.mkfs, tmp, inodes, "-d", mirror); err != nil {
		return nil, fmt.Errorf("tool image: %w", err)
	}
	// mkfs adds lost+found, and gives the root the source's mode: the
	// image must hold the mirror's tree and nothing else.
	if err := withImage(ctx, tools, f, parent, false, func(dir string) error {
		if err := os.Remove(filepath.Join(dir, "lost+found")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		return verifyMirror(src, dir)
	}); err != nil {
		return nil, fmt.Errorf("tool image: %w", err)
	}
	if err := os.Rename(tmp, img); err != nil {
		return nil, fmt.Errorf("tool image: %w", err)
	}
	done = true
	// The key after the rename (which changes the file's ctime).
	if k, err := keyOfFile(f); err == nil {
		e.images.remember(img, k)
	}
	return f, nil
}

// checkImage mounts the image f read-only and checks it against src.
func checkImage(ctx context.Context, tools diskTools, src string, f *os.File, parent string) error {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	return withImage(ctx, tools, f, parent, true, func(dir string) error { return verifyMirror(src, dir) })
}

// withImage mounts the image f on a fresh directory under parent, calls
// fn with it, and unmounts and removes it.
func withImage(ctx context.Context, tools diskTools, f *os.File, parent string, ro bool, fn func(dir string) error) (err error) {
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
	if err := mountImage(ctx, tools.mount, f.Name(), f, dir, ro); err != nil {
		return err
	}
	return fn(dir)
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

// mountTool mounts the image f read-only at the run directory's tool
// mount point and returns it.
func mountTool(ctx context.Context, tools diskTools, f *os.File, runRoot string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	dir := filepath.Join(runRoot, toolMountName)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("tool mount point: %w", err)
	}
	if err := mountImage(ctx, tools.mount, f.Name(), f, dir, true); err != nil {
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
