//go:build !unix

package validation

// manifestOpenFlags: the Lstat check before opening is the only guard here.
const manifestOpenFlags = 0
