package webhook

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func specialByte(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }

// TestSpecialWord: the eight-byte fast path of skipString never calls a
// word plain when a byte of it is special: every byte value at every
// position, in a word of plain bytes, and random words against the
// byte-wise rule.
func TestSpecialWord(t *testing.T) {
	t.Run("each byte at each position", func(t *testing.T) {
		for pos := range 8 {
			for c := range 256 {
				w := []byte("abcdefgh")
				w[pos] = byte(c)
				if got, want := specialWord(binary.LittleEndian.Uint64(w)), specialByte(byte(c)); got != want {
					t.Fatalf("byte %#x at %d: special %v, want %v", c, pos, got, want)
				}
			}
		}
	})
	t.Run("random words", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		var w [8]byte
		for range 200000 {
			for i := range w {
				// Mostly plain printable bytes, some of any value.
				if r.IntN(8) == 0 {
					w[i] = byte(r.IntN(256))
				} else {
					w[i] = byte(0x20 + r.IntN(0x60))
				}
			}
			want := false
			for _, c := range w {
				want = want || specialByte(c)
			}
			if got := specialWord(binary.LittleEndian.Uint64(w[:])); got != want {
				t.Fatalf("%q: special %v, want %v", w, got, want)
			}
		}
	})
	t.Run("plainRun stops at the first special byte", func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for range 50000 {
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = byte(0x20 + r.IntN(0x60))
				if r.IntN(16) == 0 {
					b[i] = byte(r.IntN(256))
				}
			}
			first := len(b)
			for i, c := range b {
				if specialByte(c) {
					first = i
					break
				}
			}
			if got, want := plainRun(b, 0), min(first, len(b)/8*8); got != want {
				t.Fatalf("%q: plainRun = %d, want %d", b, got, want)
			}
		}
	})
}
