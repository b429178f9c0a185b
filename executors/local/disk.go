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
	// DiskBytesPerInode derives the inode count from the size when the
	// count is not set: one inode per 8 KiB (1,048,576 for the default
	// size, 32,768 for 256 MiB, 2,048 for 16 MiB), well within what ext4
	// can make at every size, never below MinDiskInodes.
	DiskBytesPerInode int64 = 8 << 10
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

// DerivedInodes is the inode count of a file system of size bytes whose
// count is not set.
func DerivedInodes(bytes int64) int64 {
	return min(max(bytes/DiskBytesPerInode, MinDiskInodes), MaxDiskInodes)
}

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

// mountDisk makes the image under root, formats it (or copies the warm
// image warm, made at the same size; a copy that fails is formatted
// instead) and mounts it at root/fs, owned by root with mode 0711 (the
// sandbox's directories inside are its own).
func mountDisk(ctx context.Context, tools diskTools, root string, l DiskLimit, warm string) (*runDisk, error) {
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	d := &runDisk{image: filepath.Join(root, "disk.img"), dir: filepath.Join(root, "fs"), limit: l}
	if warm == "" || copySparse(warm, d.image) != nil {
		if err := newDiskImage(ctx, tools, d.image, l); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(d.dir, 0o711); err != nil {
		return nil, fmt.Errorf("disk mount point: %w", err)
	}
	if err := mountImage(ctx, tools.mount, d.image, nil, d.dir, false); err != nil {
		return nil, err
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

// newDiskImage makes image, an empty file system of l's size and
// inodes (replacing what a failed copy left).
func newDiskImage(ctx context.Context, tools diskTools, image string, l DiskLimit) error {
	if err := os.Remove(image); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disk image: %w", err)
	}
	if err := sparseFile(image, l.Bytes); err != nil {
		return fmt.Errorf("disk image: %w", err)
	}
	return runMkfs(ctx, tools.mkfs, image, l.Inodes, false)
}

// sparseFile makes the new file p of size bytes, all a hole.
func sparseFile(p string, size int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	terr := f.Truncate(size)
	return errors.Join(terr, f.Close())
}

// mountImage loop-mounts the ext4 image at dir, read-only when ro. With f
// set, the image is the file f holds (image is then only its name): the
// file mounted is the one the caller opened, whatever is at its path now.
func mountImage(ctx context.Context, mountPath, image string, f *os.File, dir string, ro bool) error {
	opts := "loop,nosuid,nodev,noatime"
	if ro {
		opts += ",ro"
	}
	src := image
	if f != nil {
		src = "/proc/self/fd/3"
	}
	mount := exec.CommandContext(ctx, mountPath, "-t", "ext4", "-o", opts, src, dir)
	if f != nil {
		mount.ExtraFiles = []*os.File{f}
	}
	mount.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := mount.CombinedOutput(); err != nil {
		return fmt.Errorf("mount the disk image: %w: %s", err, firstLine(string(out)))
	}
	return nil
}

// unmountDir detaches the file system mounted at dir, lazily when it is
// busy; nothing mounted there is no error.
func unmountDir(dir string) error {
	err := unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// runMkfs formats image (an existing file of the disk's size) with inodes
// inodes; dryRun (mkfs -n) only checks that it could, writing nothing.
// No journal (the file system dies with the run), no reserved blocks,
// lazy init (the image stays sparse), no discard at mkfs; block and inode
// sizes are fixed, so that what fits does not depend on the host's
// mke2fs.conf.
func runMkfs(ctx context.Context, mkfsPath, image string, inodes int64, dryRun bool) error {
	var pre []string
	if dryRun {
		pre = []string{"-n"}
	}
	return mkfsWith(ctx, mkfsPath, image, inodes, pre...)
}

// mkfsWith is runMkfs's mkfs.ext4 with extra options first (-n, or -d DIR
// to fill the file system from DIR).
func mkfsWith(ctx context.Context, mkfsPath, image string, inodes int64, extra ...string) error {
	args := append(append([]string{}, extra...), "-q", "-F", "-t", "ext4", "-b", "4096", "-I", "256", "-O", "^has_journal", "-m", "0",
		"-N", strconv.FormatInt(inodes, 10), "-E", "lazy_itable_init=1,nodiscard", image)
	mkfs := exec.CommandContext(ctx, mkfsPath, args...)
	mkfs.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := mkfs.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, firstLine(string(out)))
	}
	return nil
}

// checkDiskFits refuses a ceiling whose inode count ext4 cannot make at
// its size, saying the largest count that fits: at start, not at every
// run's mkfs. It asks mkfs -n on a sparse file of the size under dir
// (nothing is written but the file's length). A host whose mkfs cannot
// make even MinDiskInodes is not refused here: the isolation probe finds
// the ceiling unusable and says so in the tier's notes.
func checkDiskFits(ctx context.Context, mkfsPath, dir string, l DiskLimit) error {
	if l.off() {
		return nil
	}
	if _, err := os.Stat(mkfsPath); err != nil {
		return nil // the probe says why there is no ceiling
	}
	ctx, cancel := context.WithTimeout(ctx, DiskSetupTimeout)
	defer cancel()
	// A run directory of its own: Sweep removes it should this process
	// die before it does.
	tmp, err := os.MkdirTemp(dir, runPrefix+"fit-")
	if err != nil {
		return fmt.Errorf("disk ceiling check: %w", err)
	}
	defer os.RemoveAll(tmp) // a sparse file of no blocks: nothing to lose
	if err := workdir.MarkOwned(tmp); err != nil {
		return fmt.Errorf("disk ceiling check: %w", err)
	}
	image := filepath.Join(tmp, "fit.img")
	if err := sparseFile(image, l.Bytes); err != nil {
		return fmt.Errorf("disk ceiling check: %w", err)
	}
	fits := func(n int64) bool { return runMkfs(ctx, mkfsPath, image, n, true) == nil }
	if fits(l.Inodes) || !fits(MinDiskInodes) {
		return nil
	}
	lo, hi := MinDiskInodes, l.Inodes // fits(lo), !fits(hi)
	for hi-lo > 1 && ctx.Err() == nil {
		m := lo + (hi-lo)/2
		if fits(m) {
			lo = m
		} else {
			hi = m
		}
	}
	return fmt.Errorf("disk: %d inodes cannot be made on a file system of %d bytes; the largest count that fits is %d (or leave the count unset: it is then derived from the size, %d)",
		l.Inodes, l.Bytes, lo, DerivedInodes(l.Bytes))
}

// unmount detaches the file system (the loop device goes with it: mount
// -o loop sets autoclear). Every process of the run is dead by now; a
// lazy detach covers a descriptor that escaped every kill.
func (d *runDisk) unmount() error {
	if err := unmountDir(d.dir); err != nil {
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
		return errors.Join(unmountTool(filepath.Join(dir, toolMountName)), d.unmount())
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
	d, err := mountDisk(ctx, tools, root, DiskLimit{Bytes: MinDiskBytes, Inodes: MinDiskInodes}, "")
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
