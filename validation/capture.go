package validation

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"unicode/utf8"
)

// DefaultMaxOutputBytes is how much of one step's output is kept in total:
// the first half (the head) and the last half (the tail). Everything in
// between is counted and hashed, then dropped.
const DefaultMaxOutputBytes = 1_000_000

// Capture is an io.Writer that keeps the head and the tail of a stream in
// bounded memory, whatever the stream's size, and counts and hashes every
// byte written to it. It is not safe for concurrent use.
//
// Bytes and SHA256 of its Output describe the bytes written to the Capture.
// Behind a Redactor (as the marker parser uses it) that is the redacted
// stream, so the stored hash never commits to a secret's value; with no
// redactions it is the stream exactly as read.
type Capture struct {
	headCap int
	tailCap int
	head    []byte // grows up to headCap
	ring    []byte // tailCap bytes, allocated when the head is full
	ringPos int    // next write position in ring
	ringLen int    // valid bytes in ring, at most tailCap
	total   int64
	sum     hash.Hash
}

// NewCapture returns a Capture that keeps at most maxBytes: maxBytes/2 of
// head and the rest as tail. maxBytes <= 0 means DefaultMaxOutputBytes.
func NewCapture(maxBytes int) *Capture {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxOutputBytes
	}
	h := maxBytes / 2
	return &Capture{headCap: h, tailCap: maxBytes - h, sum: sha256.New()}
}

// Write keeps what fits in the head and the tail, counts and hashes all of
// p. It never fails.
func (c *Capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	c.sum.Write(p) // hash.Hash.Write never returns an error
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		if need := len(c.head) + k; need > cap(c.head) {
			// Grow by doubling, but never past the head's limit.
			grown := make([]byte, len(c.head), min(c.headCap, max(need, 2*cap(c.head), 4096)))
			copy(grown, c.head)
			c.head = grown
		}
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailCap == 0 {
		return n, nil
	}
	if c.ring == nil {
		c.ring = make([]byte, c.tailCap)
	}
	if len(p) >= c.tailCap {
		copy(c.ring, p[len(p)-c.tailCap:])
		c.ringPos, c.ringLen = 0, c.tailCap
		return n, nil
	}
	k := copy(c.ring[c.ringPos:], p)
	if k < len(p) {
		copy(c.ring, p[k:])
	}
	c.ringPos = (c.ringPos + len(p)) % c.tailCap
	c.ringLen = min(c.ringLen+len(p), c.tailCap)
	return n, nil
}

// Bytes is how many bytes were written so far.
func (c *Capture) Bytes() int64 { return c.total }

// Output returns what was kept. When nothing was cut, Head holds the whole
// stream and Tail is empty. When something was cut, Truncated is set, Head
// ends and Tail starts on a UTF-8 rune boundary (a rune split by the cut
// is dropped, never half-kept). Redactions is left zero: the Redactor in
// front of the Capture knows it.
func (c *Capture) Output() Output {
	out := Output{
		Bytes:  c.total,
		SHA256: hex.EncodeToString(c.sum.Sum(nil)),
	}
	tail := c.tailBytes()
	if c.total <= int64(c.headCap+c.tailCap) {
		out.Head = string(c.head) + string(tail)
		return out
	}
	out.Truncated = true
	out.Head = string(trimRuneEnd(c.head))
	out.Tail = string(trimRuneStart(tail))
	return out
}

// tailBytes returns the ring's valid bytes in stream order.
func (c *Capture) tailBytes() []byte {
	if c.ringLen < c.tailCap {
		return c.ring[:c.ringLen]
	}
	out := make([]byte, 0, c.tailCap)
	out = append(out, c.ring[c.ringPos:]...)
	return append(out, c.ring[:c.ringPos]...)
}

// trimRuneEnd drops an incomplete UTF-8 sequence at the end of b.
func trimRuneEnd(b []byte) []byte {
	// A rune is at most utf8.UTFMax bytes: look back that far for its start.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// trimRuneStart drops the continuation bytes of a rune cut at the start of
// b (at most utf8.UTFMax-1 of them).
func trimRuneStart(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax-1; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b[min(len(b), utf8.UTFMax-1):]
}
