package toolchain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockPoll is how often a busy lock is tried again: flock(2) cannot be
// interrupted by a context, so gilf polls with LOCK_NB.
const lockPoll = 50 * time.Millisecond

// fileLock is an exclusive flock on a file, shared with other processes.
type fileLock struct{ f *os.File }

// lock takes the exclusive flock on path, creating the file, waiting
// while another process (or another Cache) holds it, until ctx ends.
func lock(ctx context.Context, path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	var tick *time.Ticker
	for {
		ok, err := tryFlock(f)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("lock %s: %w", path, err), f.Close())
		}
		if ok {
			return &fileLock{f: f}, nil
		}
		if tick == nil {
			tick = time.NewTicker(lockPoll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("lock %s: %w", path, ctx.Err()), f.Close())
		case <-tick.C:
		}
	}
}

// tryLock takes the flock on path if it is free; nil when it is held.
func tryLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	ok, err := tryFlock(f)
	if err != nil || !ok {
		return nil, errors.Join(err, f.Close())
	}
	return &fileLock{f: f}, nil
}

func tryFlock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}

// unlock releases the lock; closing the file drops the flock.
func (l *fileLock) unlock() error { return l.f.Close() }

// removeStale removes the temporary directories of builds that no
// process holds the lock of: a build holds its version's lock from
// before it creates its directory until after it renames it.
func (c *Cache) removeStale() error {
	var errs []error
	for _, pm := range managers {
		dir := filepath.Join(c.dir, string(pm))
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("toolchain dir: %w", err))
			continue
		}
		for _, e := range entries {
			rest, ok := strings.CutPrefix(e.Name(), tmpPrefix)
			if !ok {
				continue
			}
			version := rest
			if i := strings.LastIndexByte(rest, '-'); i >= 0 {
				version = rest[:i]
			}
			if err := removeIfUnlocked(dir, e.Name(), version); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeIfUnlocked removes dir/name unless the lock of version is held.
func removeIfUnlocked(dir, name, version string) (err error) {
	if isExact(version) {
		l, err := tryLock(filepath.Join(dir, version+lockSuffix))
		if err != nil {
			return err
		}
		if l == nil {
			return nil // a build under way
		}
		defer func() {
			if uerr := l.unlock(); uerr != nil && err == nil {
				err = fmt.Errorf("unlock: %w", uerr)
			}
		}()
	}
	if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("remove stale %s: %w", name, err)
	}
	return nil
}
