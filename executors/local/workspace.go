package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/internal/workdir"
)

// runDirs are the host directories of one run, all owned by the sandbox
// uid and removed when the run ends.
type runDirs struct {
	Root string
	// Base is where everything the sandbox sees of the run lives: the
	// run's own file system when it has one (so that no bind names a
	// host directory, and nothing a step can write is outside it), else
	// Root.
	Base      string
	Workspace string
	Home      string
	Tmp       string
	// Shm is bound at /dev/shm (/dev itself is read-only).
	Shm string
	// Etc holds the generated /etc files (GeneratedEtc), root-owned and
	// world-readable.
	Etc string
	// disk is the run's own file system, holding Workspace, Home and
	// Tmp; nil without a disk ceiling.
	disk *runDisk
	// Tool, when set, is where the package manager's image is mounted
	// (toolimage.go), unmounted with the run.
	Tool string
}

// makeRunDirs is makeRunDirsOn without a disk ceiling.
func makeRunDirs(workRoot, src string, uid, gid int) (runDirs, []string, error) {
	return makeRunDirsOn(context.Background(), workRoot, src, uid, gid, nil, DiskLimit{Bytes: -1}, "")
}

// makeRunDirsOn creates a private run directory under workRoot holding a
// copy of src as the workspace (empty when src is ""), an empty HOME and
// an empty TMPDIR, all owned by uid:gid, on a file system of their own
// when limit is on (tools then are mkfs and mount), made from the warm
// image warm when it is set (warmdisk.go). The caller calls
// remove in every outcome (also on error, when Root is set). skipped
// lists what was not copied.
func makeRunDirsOn(ctx context.Context, workRoot, src string, uid, gid int, tools *diskTools, limit DiskLimit, warm string) (d runDirs, skipped []string, err error) {
	root, err := os.MkdirTemp(workRoot, "gilf-local-")
	if err != nil {
		return d, nil, fmt.Errorf("create run dir: %w", err)
	}
	d = runDirs{Root: root}
	// Root stays root-owned but traversable; the sandbox uid owns only
	// what is bound into the sandbox.
	if err := os.Chmod(root, 0o711); err != nil {
		return d, nil, fmt.Errorf("chmod run dir: %w", err)
	}
	// A later worker removes the directory only once this process is
	// gone (Executor.Sweep).
	if err := workdir.MarkOwned(root); err != nil {
		return d, nil, err
	}
	base := root
	if !limit.off() && tools != nil {
		if d.disk, err = mountDisk(ctx, *tools, root, limit, warm); err != nil {
			return d, nil, err
		}
		base = d.disk.dir
	}
	d.Base = base
	d.Etc = filepath.Join(base, "etc")
	d.Workspace = filepath.Join(base, "workspace")
	d.Home = filepath.Join(base, "home")
	d.Tmp = filepath.Join(base, "tmp")
	d.Shm = filepath.Join(base, "shm")
	for _, p := range []string{d.Home, d.Tmp, d.Shm} {
		if err := mkdirOwned(p, 0o700, uid, gid); err != nil {
			return d, nil, err
		}
	}
	if err := writeEtc(d.Etc, uint32(uid), uint32(gid)); err != nil {
		return d, nil, err
	}
	if src == "" {
		return d, nil, mkdirOwned(d.Workspace, 0o700, uid, gid)
	}
	skipped, err = copyTree(src, d.Workspace, uid, gid)
	if err != nil {
		return d, skipped, err
	}
	return d, skipped, nil
}

func mkdirOwned(p string, mode os.FileMode, uid, gid int) error {
	if err := os.Mkdir(p, mode); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Base(p), err)
	}
	if err := os.Lchown(p, uid, gid); err != nil {
		return fmt.Errorf("chown %s: %w", filepath.Base(p), err)
	}
	// Mkdir applies the umask; the mode is meant exactly.
	if err := os.Chmod(p, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", filepath.Base(p), err)
	}
	return nil
}

// copyTree copies src into the new directory dst, owned by uid:gid.
// Directories, regular files and symlinks are copied (a symlink as a link,
// never followed: it resolves inside the sandbox, where the host is
// absent). Set-id bits are dropped. Devices, sockets and FIFOs are
// skipped, and so are regular files with more than one hard link (a hard
// link made by an extractor could name a host file). src is only read.
func copyTree(src, dst string, uid, gid int) ([]string, error) {
	st, err := os.Lstat(src)
	if err != nil {
		return nil, fmt.Errorf("read checkout: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("checkout %s is not a directory", src)
	}
	// Private to the sandbox uid: another local user, or another run's
	// uid, reads none of a (possibly private) repository's code.
	if err := mkdirOwned(dst, 0o700, uid, gid); err != nil {
		return nil, err
	}
	var skipped []string
	err = filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk checkout: %w", err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return fmt.Errorf("walk checkout: %w", err)
		}
		if rel == "." {
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := de.Info()
		if err != nil {
			return fmt.Errorf("stat %s: %w", rel, err)
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return mkdirOwned(target, 0o700, uid, gid)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("read link %s: %w", rel, err)
			}
			if err := os.Symlink(link, target); err != nil {
				return fmt.Errorf("copy link %s: %w", rel, err)
			}
			if err := os.Lchown(target, uid, gid); err != nil {
				return fmt.Errorf("chown %s: %w", rel, err)
			}
			return nil
		case mode.IsRegular():
			if sys, ok := info.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
				skipped = append(skipped, rel)
				return nil
			}
			return copyFile(p, target, mode.Perm()&0o700|0o600, uid, gid)
		default:
			skipped = append(skipped, rel)
			return nil
		}
	})
	return skipped, err
}

func copyFile(src, dst string, perm os.FileMode, uid, gid int) (err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(src), err)
	}
	defer func() { err = errors.Join(err, in.Close()) }()
	return copyOpen(in, dst, perm, uid, gid)
}

// writeOwned creates the file p with data, owned by uid:gid, mode 0600.
func writeOwned(p string, data []byte, uid, gid int) error {
	return writeNew(p, data, 0o600, uid, gid)
}

// writeNew creates the file p with data and exactly mode perm (whatever
// the umask), owned by uid:gid; -1 keeps the worker's own.
func writeNew(p string, data []byte, perm os.FileMode, uid, gid int) error {
	return createOwned(p, perm, uid, gid, "write", func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// createOwned creates the new file p (never through a link), fills it
// with fill (what names it in an error) and gives it exactly mode perm,
// whatever the umask, owned by uid:gid; -1 keeps the worker's own. It is
// the worker's alone (0600) until filled.
func createOwned(p string, perm os.FileMode, uid, gid int, what string, fill func(*os.File) error) (err error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Base(p), err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := fill(f); err != nil {
		return fmt.Errorf("%s %s: %w", what, filepath.Base(p), err)
	}
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("chown %s: %w", filepath.Base(p), err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", filepath.Base(p), err)
	}
	return nil
}

// writeEtc writes GeneratedEtc into the new directory dir, owned by the
// worker and readable by all: the sandbox reads them, and cannot change
// them.
func writeEtc(dir string, uid, gid uint32) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create etc: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("chmod etc: %w", err)
	}
	for name, body := range GeneratedEtc(uid, gid) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return fmt.Errorf("write etc/%s: %w", name, err)
		}
		// WriteFile applies the umask; the mode is meant exactly.
		if err := os.Chmod(p, 0o644); err != nil {
			return fmt.Errorf("chmod etc/%s: %w", name, err)
		}
	}
	return nil
}

// remove unmounts the run's file system, if it has one, and removes the
// run directory.
func (d runDirs) remove() error {
	if d.Root == "" {
		return nil
	}
	var err error
	if d.Tool != "" {
		err = unmountTool(d.Tool)
	}
	if d.disk != nil {
		err = errors.Join(err, d.disk.unmount())
	}
	if err != nil {
		// Never remove below a file system still mounted: the image
		// and the mount point stay for the next sweep.
		return err
	}
	if rerr := os.RemoveAll(d.Root); rerr != nil {
		return fmt.Errorf("remove run dir: %w", rerr)
	}
	return nil
}

// ownWorkRoot makes the work root when it is missing: a directory of the
// worker's, mode 0711 (the sandbox uid traverses it, nobody else lists it).
// One that exists must be a real directory, not a symlink; the default one
// must also be the worker's own, with that mode: in the shared temporary
// directory another user could have made it first to watch or swap runs.
// A directory the operator names is the operator's choice.
func ownWorkRoot(dir string) error {
	if err := os.Mkdir(dir, 0o711); err == nil {
		return os.Chmod(dir, 0o711) // Mkdir applies the umask
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("work root: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("work root: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("work root %s is not a directory", dir)
	}
	if dir != DefaultWorkRoot() {
		return nil
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("work root %s belongs to another user", dir)
	}
	if st.Mode().Perm() != 0o711 {
		return os.Chmod(dir, 0o711)
	}
	return nil
}

// writePublic creates the file p with data, owned by the worker and
// readable by all (mode 0644, whatever the umask).
func writePublic(p string, data []byte) error { return writeNew(p, data, 0o644, -1, -1) }
