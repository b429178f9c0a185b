//go:build unix

package validation

import "syscall"

// manifestOpenFlags: never block opening a FIFO. os.Root resolves a final
// symlink itself (inside the checkout); readManifest refuses symlinks by
// Lstat first and checks after opening that it got the same file.
const manifestOpenFlags = syscall.O_NONBLOCK
