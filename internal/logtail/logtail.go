// Package logtail keeps the last bytes of a child process's output, to
// show in the error that explains why it failed.
package logtail

import (
	"slices"
	"sync"
)

// Buffer keeps the last limit bytes written to it. It is safe for
// concurrent use; the zero value keeps nothing.
type Buffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

// New returns a Buffer keeping the last limit bytes.
func New(limit int) *Buffer { return &Buffer{limit: limit} }

// Write keeps the tail of what it was given; it never fails.
func (t *Buffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if len(b) >= t.limit {
		t.buf = append(t.buf[:0], b[len(b)-t.limit:]...)
		return n, nil
	}
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return n, nil
}

// Bytes returns a copy of the kept bytes.
func (t *Buffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.buf)
}

// String returns the kept bytes as a string.
func (t *Buffer) String() string { return string(t.Bytes()) }
