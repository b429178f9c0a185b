//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Every store handle holds a shared flock on the segment it appends to,
// from before the segment has its final name until the handle closes.
// Pruning deletes a segment only under an exclusive flock it got without
// waiting, so it never deletes a segment a live handle — in this process
// or in another, `gilf serve` while `gilf prune` runs — may still write.

// lockShared takes the shared lock of a segment this handle appends to.
func lockShared(f *os.File) error {
	if err := flock(f, unix.LOCK_SH); err != nil {
		return fmt.Errorf("body log: lock segment: %w", err)
	}
	return nil
}

// tryLockExclusive reports whether no handle holds f's segment.
func tryLockExclusive(f *os.File) (bool, error) {
	err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("body log: lock segment %s: %w", f.Name(), err)
	}
	return true, nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
