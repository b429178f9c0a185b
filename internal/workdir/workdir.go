// Package workdir makes the temporary directories a run works in (a
// job's checkout, a sandbox's run directory) so that a later process can
// tell whether their owner is still alive, and removes those whose owner
// died (SIGKILL, a power cut) without ever touching a live one of another
// process.
//
// Each directory holds OwnerFile: the owner's pid and its start time (the
// 22nd field of /proc/<pid>/stat, in clock ticks since boot). A pid that
// is gone, or that now names a process started at another time, is a dead
// owner.
package workdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// OwnerFile is the marker in every directory Create makes.
const OwnerFile = ".gilf-owner"

// DefaultGrace is how old a directory without a readable marker must be
// before Sweep takes it for dead: Create writes the marker right after
// making the directory, so only a crash in between leaves none.
const DefaultGrace = time.Minute

// MaxSweep bounds how many entries of one parent Sweep looks at.
const MaxSweep = 100_000

// Create makes a new directory in parent named pattern (as os.MkdirTemp)
// and marks this process as its owner.
func Create(parent, pattern string) (string, error) {
	dir, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		return "", err
	}
	if err := MarkOwned(dir); err != nil {
		return dir, errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

// MarkOwned writes this process's marker into dir.
func MarkOwned(dir string) error {
	start, err := startTime(os.Getpid())
	if err != nil {
		return fmt.Errorf("owner marker: %w", err)
	}
	body := fmt.Sprintf("%d %d\n", os.Getpid(), start)
	if err := os.WriteFile(filepath.Join(dir, OwnerFile), []byte(body), 0o600); err != nil {
		return fmt.Errorf("owner marker: %w", err)
	}
	return nil
}

// Alive reports whether dir's owner still runs. A directory without a
// readable marker is alive while it is younger than grace.
func Alive(dir string, grace time.Duration, now time.Time) bool {
	b, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	if err != nil {
		st, serr := os.Lstat(dir)
		return serr == nil && now.Sub(st.ModTime()) < grace
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return false
	}
	now0, err := startTime(pid)
	return err == nil && now0 == start
}

// Sweep removes the directories of parent whose names start with prefix
// and whose owner is dead. Before removing one it calls release (when not
// nil) to undo what the owner left attached to it (a mount); a directory
// whose release fails is left alone. It returns the names it removed.
func Sweep(parent, prefix string, grace time.Duration, release func(dir string) error) ([]string, error) {
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", parent, err)
	}
	var removed []string
	var errs []error
	now := time.Now()
	for i, en := range entries {
		if i == MaxSweep {
			break
		}
		if !en.IsDir() || !strings.HasPrefix(en.Name(), prefix) {
			continue
		}
		dir := filepath.Join(parent, en.Name())
		if Alive(dir, grace, now) {
			continue
		}
		if release != nil {
			if err := release(dir); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", en.Name(), err))
			continue
		}
		removed = append(removed, en.Name())
	}
	return removed, errors.Join(errs...)
}

// startTime is the start time of pid, from /proc/<pid>/stat.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold anything: the
	// fields start after its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); the start time is field 22.
	if len(f) < 20 {
		return 0, errors.New("malformed /proc stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}
