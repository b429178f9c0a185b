package sqlite

import (
	"os"
	"syscall"
)

// datasync flushes f's data and the metadata needed to read it back
// (fdatasync): a file that did not grow needs no journal commit, which is
// most of an fsync's cost on ext4.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
