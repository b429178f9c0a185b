package local

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxToolMirrors bounds the package-manager mirrors kept under
// WorkRoot/tools: past it, making a new one removes those used longest
// ago that no run holds.
const MaxToolMirrors = 8

// mirrorLockName is the lock file beside each mirror: a run holds it
// shared while its sandboxes bind the mirror; the sweep takes it
// exclusive, without waiting, before it removes one.
const mirrorLockSuffix = ".lock"

// holdMirror takes a shared lock on the mirror dst for a run and marks it
// used now; release frees it.
func holdMirror(dst string) (release func(), err error) {
	// A sweep may remove the lock file between its open and the lock
	// taken: the lock held must be the file at the path.
	var f *os.File
	for range 3 {
		if f, err = os.OpenFile(dst+mirrorLockSuffix, os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err != nil {
			return nil, fmt.Errorf("tool mirror lock: %w", err)
		}
		if err = unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
			f.Close()
			return nil, fmt.Errorf("tool mirror lock: %w", err)
		}
		held, herr := f.Stat()
		path, perr := os.Stat(f.Name())
		if herr == nil && perr == nil && os.SameFile(held, path) {
			break
		}
		f.Close()
		f = nil
	}
	if f == nil {
		return nil, errors.New("tool mirror lock: its file keeps being removed")
	}
	now := time.Now()
	if err := os.Chtimes(f.Name(), now, now); err != nil {
		f.Close()
		return nil, fmt.Errorf("tool mirror lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// verifyMirror checks that the mirror dst holds exactly the verified
// toolchain tree src as mirrorTree makes it: the same names and kinds,
// the same links, and files with the same permission class and the same
// bytes (the same inode when it was hard-linked, else compared).
func verifyMirror(src, dst string) error {
	seen := 0
	err := filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		seen++
		want, err := de.Info()
		if err != nil {
			return err
		}
		got, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		switch wm, gm := want.Mode(), got.Mode(); {
		case wm.IsDir():
			if !gm.IsDir() || gm.Perm() != 0o755 {
				return fmt.Errorf("%s is not the directory it should be", rel)
			}
		case wm&fs.ModeSymlink != 0:
			wl, err1 := os.Readlink(p)
			gl, err2 := os.Readlink(filepath.Join(dst, rel))
			if gm&fs.ModeSymlink == 0 || err1 != nil || err2 != nil || wl != gl {
				return fmt.Errorf("%s is not the link it should be", rel)
			}
		case wm.IsRegular():
			perm := os.FileMode(0o644)
			if wm.Perm()&0o111 != 0 {
				perm = 0o755
			}
			if !gm.IsRegular() || gm.Perm() != perm || got.Size() != want.Size() {
				return fmt.Errorf("%s differs", rel)
			}
			if os.SameFile(want, got) {
				return nil
			}
			if err := sameBytes(p, filepath.Join(dst, rel)); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		default:
			return fmt.Errorf("%s is not a file, directory or symlink", rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := 0
	if err := filepath.WalkDir(dst, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dst {
			n++
		}
		return err
	}); err != nil {
		return err
	}
	if n != seen {
		return fmt.Errorf("the mirror holds %d entries, the toolchain %d", n, seen)
	}
	return nil
}

// sameBytes reports an error unless files a and b hold the same bytes.
func sameBytes(a, b string) error {
	fa, err := os.Open(a)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return errors.New("content differs")
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			if eb == io.EOF || eb == io.ErrUnexpectedEOF {
				return nil
			}
			return errors.New("content differs")
		}
		if ea != nil {
			return ea
		}
		if eb != nil {
			return eb
		}
	}
}

// sweepMirrors removes the mirrors under root (root/<manager>/<version>)
// used longest ago, past MaxToolMirrors, skipping any a run holds and
// keep; it also removes half-made ones (.tmp-) no one holds. It returns
// what it removed.
func sweepMirrors(root, keep string) ([]string, error) {
	type mirror struct {
		dir  string
		used time.Time
	}
	var all []mirror
	var errs []error
	managers, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, m := range managers {
		if !m.IsDir() {
			continue
		}
		des, err := os.ReadDir(filepath.Join(root, m.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, de := range des {
			dir := filepath.Join(root, m.Name(), de.Name())
			switch {
			case !de.IsDir() && strings.HasPrefix(de.Name(), ".tmp-"):
				// An image left half-made by a dead run.
				if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
					errs = append(errs, os.Remove(dir))
				}
			case !de.IsDir():
			case strings.HasPrefix(de.Name(), ".tmp-"):
				// Being made by a live run, or left by a dead one:
				// only the latter is old.
				if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
					errs = append(errs, os.RemoveAll(dir))
				}
			case dir != keep:
				used := time.Time{}
				if fi, err := os.Stat(dir + mirrorLockSuffix); err == nil {
					used = fi.ModTime()
				} else if fi, err := de.Info(); err == nil {
					used = fi.ModTime()
				}
				all = append(all, mirror{dir, used})
			}
		}
	}
	slices.SortFunc(all, func(a, b mirror) int { return cmp.Or(b.used.Compare(a.used), strings.Compare(a.dir, b.dir)) })
	var removed []string
	for _, m := range all[min(len(all), MaxToolMirrors-1):] {
		ok, err := removeUnheld(m.dir)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, m.dir)
		}
	}
	return removed, errors.Join(errs...)
}

// removeUnheld removes the mirror dir unless a run holds its lock.
func removeUnheld(dir string) (bool, error) {
	f, err := os.OpenFile(dir+mirrorLockSuffix, os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, err
	}
	// Its image goes with it (a run that still has it mounted keeps
	// the file until it unmounts).
	if err := os.Remove(dir + toolImageSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, os.Remove(f.Name())
}
