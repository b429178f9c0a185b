package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/internal/workdir"
)

// The disk ceiling of a run: the workspace, HOME and TMPDIR live on an
// ext4 file system of their own, in a sparse image file in the run
// directory, loop-mounted for the run. Writes past its size or its inode
// count fail inside with ENOSPC, and the host loses at most the image's
// size, whatever a step writes. Chosen over a size-limited tmpfs (it
// would charge the files to the memory limit, so a 4 GiB memory limit
// could not hold an 8 GiB node_modules) and over project quotas (they need
// the host file system mounted with prjquota, which an operator would have
// to set up). mkfs and mount of an 8 GiB image take ~70 ms here.
const (
	// DefaultDiskBytes is the size of a run's file system.
	DefaultDiskBytes int64 = 8 << 30
	// DefaultDiskInodes is how many files and directories it can hold.
	DefaultDiskInodes int64 = 1_000_000
	// MinDiskBytes and MinDiskInodes are the smallest ceilings: ext4
	// needs room for its own metadata.
	MinDiskBytes  int64 = 16 << 20
	MinDiskInodes int64 = 1024
	// MaxDiskBytes and MaxDiskInodes bound the settings (a typo of a few
	// zeros should be an error).
	MaxDiskBytes  int64 = 4 << 40
	MaxDiskInodes int64 = 1 << 32
	// DiskSetupTimeout bounds mkfs and mount.
	DiskSetupTimeout = 30 * time.Second
	// diskFullSlack: a file system with less room than this, or no free
	// inode, is "full" for the record.
	diskFullSlack = 1 << 20
)

// DefaultMkfsPath is where Debian's e2fsprogs installs mkfs.ext4.
const DefaultMkfsPath = "/usr/sbin/mkfs.ext4"

// DiskLimit is the disk ceiling of one run. Bytes < 0 turns it off.
type DiskLimit struct {
	Bytes  int64
	Inodes int64
}

func (l DiskLimit) off() bool { return l.Bytes < 0 }

// diskTools are the host programs the ceiling needs.
type diskTools struct {
	mkfs  string
	mount string
}

// runDisk is a mounted run file system.
type runDisk struct {
	image string
	dir   string
	limit DiskLimit
}

// mountDisk makes the image under root, formats it and mounts it at
// root/fs, owned by root with mode 0711 (the sandbox's directories inside
// are its own).
func mountDisk(ctx context.Context, tools diskTools, root string, l DiskLimit) (*runDisk, error) {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	d := &runDisk{image: filepath.Join(root, "disk.img"), dir: filepath.Join(root, "fs"), limit: l}
	f, err := os.OpenFile(d.image, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk image: %w", err)
	}
	terr := f.Truncate(l.Bytes)
	if err := errors.Join(terr, f.Close()); err != nil {
		return nil, fmt.Errorf("disk image: %w", err)
	}
	// No journal (the file system dies with the run), no reserved
	// blocks, lazy init (the image stays sparse), no discard at mkfs.
	mkfs := exec.CommandContext(ctx, tools.mkfs, "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-m", "0",
		"-N", strconv.FormatInt(l.Inodes, 10), "-E", "lazy_itable_init=1,nodiscard", d.image)
	mkfs.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := mkfs.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mkfs.ext4: %w: %s", err, firstLine(string(out)))
	}
	if err := os.Mkdir(d.dir, 0o711); err != nil {
		return nil, fmt.Errorf("disk mount point: %w", err)
	}
	mount := exec.CommandContext(ctx, tools.mount, "-t", "ext4", "-o", "loop,nosuid,nodev,noatime", d.image, d.dir)
	mount.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := mount.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount the disk image: %w: %s", err, firstLine(string(out)))
	}
	// The file system's root: traversable, not listable, by others.
	if err := os.Chmod(d.dir, 0o711); err != nil {
		return d, fmt.Errorf("chmod disk root: %w", errors.Join(err, d.unmount()))
	}
	if err := os.Remove(filepath.Join(d.dir, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return d, fmt.Errorf("disk root: %w", errors.Join(err, d.unmount()))
	}
	return d, nil
}

// unmount detaches the file system (the loop device goes with it: mount
// -o loop sets autoclear). Every process of the run is dead by now; a
// lazy detach covers a descriptor that escaped every kill.
func (d *runDisk) unmount() error {
	err := unix.Unmount(d.dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(d.dir, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount the run's disk: %w", err)
	}
	return nil
}

// full reports whether the file system has (nearly) no room or no inode
// left, for the step's record.
func (d *runDisk) full() (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.dir, &st); err != nil {
		return false, fmt.Errorf("statfs the run's disk: %w", err)
	}
	return int64(st.Bavail)*st.Bsize < diskFullSlack || st.Ffree == 0, nil
}

// ceilingWords is what the record says of a run that hit the ceiling.
func (l DiskLimit) ceilingWords() string {
	return fmt.Sprintf("the run's disk ceiling (%d bytes, %d inodes) was reached: writes past it fail with ENOSPC", l.Bytes, l.Inodes)
}

// findDiskTools looks for mkfs.ext4 and mount where Debian puts them.
func findDiskTools(mkfs string) (diskTools, error) {
	t := diskTools{mkfs: mkfs}
	if _, err := os.Stat(t.mkfs); err != nil {
		return t, fmt.Errorf("mkfs.ext4 is not usable at %s (apt-get install e2fsprogs): %w", t.mkfs, err)
	}
	for _, p := range []string{"/usr/bin/mount", "/bin/mount"} {
		if _, err := os.Stat(p); err == nil {
			t.mount = p
			return t, nil
		}
	}
	return t, errors.New("mount(8) not found in /usr/bin or /bin")
}

// runPrefix names every run directory under WorkRoot.
const runPrefix = "gilf-local-"

// Sweep removes the run directories under WorkRoot whose worker died
// (SIGKILL, a crash) with their file systems, and the cgroups such workers
// left. It never touches a run of a live process. gilf serve and gilf
// validate call it at start; the isolation probe sweeps cgroups again.
func (e *Executor) Sweep(ctx context.Context) (int, error) {
	removed, err := workdir.Sweep(e.opts.WorkRoot, runPrefix, workdir.DefaultGrace, func(dir string) error {
		d := &runDisk{dir: filepath.Join(dir, "fs")}
		return d.unmount()
	})
	n := len(removed)
	if self, rerr := os.ReadFile("/proc/self/cgroup"); rerr == nil {
		if h := detectCgroups(e.opts.CgroupRoot, self); h.version != cgroupNone {
			c, cerr := h.sweep(ctx)
			n += c
			err = errors.Join(err, cerr)
		}
	}
	return n, err
}

// checkDisk makes, mounts and removes a small run file system, so the
// tier says what was really possible. It returns why the ceiling cannot
// be kept ("" when it can, or when it is off: that is the operator's
// choice, said in a note).
func (p *prober) checkDisk(ctx context.Context, res *probed) string {
	if p.opts.Disk.off() {
		res.notes = append(res.notes, "no disk ceiling: turned off by the worker's settings")
		return ""
	}
	tools, err := findDiskTools(p.opts.MkfsPath)
	if err != nil {
		return err.Error()
	}
	root, err := os.MkdirTemp(p.opts.WorkRoot, runPrefix+"disk-check-")
	if err != nil {
		return err.Error()
	}
	d, err := mountDisk(ctx, tools, root, DiskLimit{Bytes: MinDiskBytes, Inodes: MinDiskInodes})
	if d != nil {
		err = errors.Join(err, d.unmount())
	}
	if rerr := os.RemoveAll(root); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return err.Error()
	}
	res.disk = &tools
	return ""
}
