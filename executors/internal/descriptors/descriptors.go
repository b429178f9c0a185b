// Package descriptors keeps a process's inherited file descriptors from
// passing through exec: the local sandbox's worker and its egress bridge
// both start children that must get nothing but what they are given.
package descriptors

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseOnExecFrom marks every descriptor from first up close-on-exec. Go
// opens its own descriptors that way; this covers the ones the process
// inherited (a socket, a jobserver pipe, a handshake pipe), which would
// otherwise pass through every exec. The descriptors stay open here.
func CloseOnExecFrom(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: one descriptor at a time.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("mark descriptors close-on-exec: %w", errors.Join(err, rerr))
	}
	for _, en := range entries {
		fd, cerr := strconv.Atoi(en.Name())
		if cerr != nil || fd < first {
			continue
		}
		// EBADF: the directory listing's own descriptor, now closed.
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); ferr != nil && !errors.Is(ferr, unix.EBADF) {
			return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, ferr)
		}
	}
	return nil
}
