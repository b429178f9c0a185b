package sqlite

import (
	"os"
	"syscall"
)

// datasync flushes f's data and the metadata needed to read it back
// (fdatasync): a file that did not grow needs no journal commit, which is
// most of an fsync's cost on ext4. What it buys, measured with
// bench/intake.sh -c 64 (1 / 500 pull requests, load average 9–11): with
// File.Sync instead SQLite made 0.10× / 0.10× and 0.11× / 0.11× a bare
// net/http handler, against 0.12× / 0.09× and 0.15× / 0.15× with it in
// the runs that followed (docs/store.md).
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
