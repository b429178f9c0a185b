package validation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestCapture(t *testing.T) {
	const euro = "\u20ac"     // 3 bytes: e2 82 ac
	const grin = "\U0001F600" // 4 bytes: f0 9f 98 80
	tests := []struct {
		name  string
		max   int
		input string
		want  Output
	}{
		{"empty", 10, "", Output{}},
		{"one byte", 10, "a", Output{Head: "a"}},
		{"under the limit", 10, "012345678", Output{Head: "012345678"}},
		{"exactly the limit", 10, "0123456789", Output{Head: "0123456789"}},
		{"limit plus one", 10, "0123456789A", Output{Head: "01234", Tail: "6789A", Truncated: true}},
		{"far over the limit", 10, strings.Repeat("x", 100) + "END!!", Output{Head: "xxxxx", Tail: "END!!", Truncated: true}},
		{"odd limit splits head low", 5, "abcdefg", Output{Head: "ab", Tail: "efg", Truncated: true}},
		{"limit one keeps only tail", 1, "abc", Output{Tail: "c", Truncated: true}},
		// head is 5 bytes: "abcd" + the first byte of the euro sign.
		{"3-byte rune across head cut", 10, "abcd" + euro + "0123456789", Output{Head: "abcd", Tail: "56789", Truncated: true}},
		// tail is 5 bytes: the last two bytes of the euro sign + "abc".
		{"3-byte rune across tail cut", 10, "0123456789" + euro + "abc", Output{Head: "01234", Tail: "abc", Truncated: true}},
		{"4-byte rune cut after 1 byte in head", 10, "abcd" + grin + "0123456789", Output{Head: "abcd", Tail: "56789", Truncated: true}},
		{"4-byte rune cut after 2 bytes in head", 10, "abc" + grin + "0123456789", Output{Head: "abc", Tail: "56789", Truncated: true}},
		{"4-byte rune cut after 3 bytes in head", 10, "ab" + grin + "0123456789", Output{Head: "ab", Tail: "56789", Truncated: true}},
		{"4-byte rune whole at head end", 10, "a" + grin + "0123456789", Output{Head: "a" + grin, Tail: "56789", Truncated: true}},
		{"4-byte rune cut, 3 bytes in tail", 10, "0123456789" + grin + "ab", Output{Head: "01234", Tail: "ab", Truncated: true}},
		{"4-byte rune whole at tail start", 10, "0123456789" + grin + "a", Output{Head: "01234", Tail: grin + "a", Truncated: true}},
		{"rune across the limit, nothing cut", 10, "01234567" + "\u00e9", Output{Head: "01234567\u00e9"}},
		{"invalid UTF-8 kept as is", 10, "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5", Output{Head: "\xff\xfe\xfd\xfc\xfb", Tail: "\xf9\xf8\xf7\xf6\xf5", Truncated: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Bytes = int64(len(tc.input))
			tc.want.SHA256 = sha256Hex([]byte(tc.input))
			// The same output whatever the write sizes.
			for _, chunk := range []int{1, 2, 3, 7, len(tc.input) + 1} {
				c := NewCapture(tc.max)
				for rest := []byte(tc.input); len(rest) > 0; {
					k := min(chunk, len(rest))
					n, err := c.Write(rest[:k])
					if err != nil || n != k {
						t.Fatalf("Write = %d, %v; want %d, nil", n, err, k)
					}
					rest = rest[k:]
				}
				if diff := cmp.Diff(tc.want, c.Output()); diff != "" {
					t.Errorf("chunk %d: Output() mismatch (-want +got):\n%s", chunk, diff)
				}
			}
		})
	}
}

func TestCaptureDefaultLimit(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		truncated bool
	}{
		{"exactly DefaultMaxOutputBytes", DefaultMaxOutputBytes, false},
		{"DefaultMaxOutputBytes plus one", DefaultMaxOutputBytes + 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Repeat([]byte("0123456789abcdef"), tc.size/16+1)[:tc.size]
			c := NewCapture(0)
			if _, err := c.Write(in); err != nil {
				t.Fatal(err)
			}
			out := c.Output()
			if out.Truncated != tc.truncated {
				t.Fatalf("Truncated = %v, want %v", out.Truncated, tc.truncated)
			}
			if got := len(out.Head) + len(out.Tail); tc.truncated && got != DefaultMaxOutputBytes {
				t.Errorf("kept %d bytes, want %d", got, DefaultMaxOutputBytes)
			}
			if !tc.truncated && out.Head != string(in) {
				t.Errorf("Head is not the whole stream")
			}
			if tc.truncated && (out.Head != string(in[:DefaultMaxOutputBytes/2]) || out.Tail != string(in[len(in)-DefaultMaxOutputBytes/2:])) {
				t.Errorf("head or tail is not the stream's start or end")
			}
		})
	}
}

func TestCaptureRandomChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		size := rng.IntN(400)
		in := make([]byte, size)
		for j := range in {
			in[j] = byte('a' + rng.IntN(26))
		}
		max := 1 + rng.IntN(120)
		c := NewCapture(max)
		for rest := in; len(rest) > 0; {
			k := min(1+rng.IntN(50), len(rest))
			if _, err := c.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		out := c.Output()
		want := Output{Head: string(in), Bytes: int64(size), SHA256: sha256Hex(in)}
		if size > max {
			want.Head, want.Tail, want.Truncated = string(in[:max/2]), string(in[size-(max-max/2):]), true
		}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Fatalf("case %d (size %d, max %d): mismatch (-want +got):\n%s", i, size, max, diff)
		}
	}
}

// TestCaptureBoundedMemory writes 64 MiB and checks that nothing grew past
// the limit and that a write in the steady state allocates nothing.
func TestCaptureBoundedMemory(t *testing.T) {
	const max = 64 << 10
	c := NewCapture(max)
	chunk := bytes.Repeat([]byte("PASS src/a.test.ts (12 ms)\n"), 32<<10/27)
	h := sha256.New()
	var total int64
	for total < 64<<20 {
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
		h.Write(chunk)
		total += int64(len(chunk))
	}
	if cap(c.head) > max/2 || len(c.ring) != max-max/2 {
		t.Errorf("head cap %d, ring len %d; want ≤ %d and %d", cap(c.head), len(c.ring), max/2, max-max/2)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
		h.Write(chunk)
	})
	if allocs != 0 {
		t.Errorf("steady-state Write allocates %v times, want 0", allocs)
	}
	total += int64(len(chunk)) * 101 // AllocsPerRun runs once more to warm up
	got := c.Output()
	if got.Bytes != total || got.SHA256 != hex.EncodeToString(h.Sum(nil)) || !got.Truncated {
		t.Errorf("Output: bytes %d (want %d), sha %s, truncated %v", got.Bytes, total, got.SHA256, got.Truncated)
	}
	if !utf8.ValidString(got.Head) || !utf8.ValidString(got.Tail) {
		t.Errorf("head or tail is not valid UTF-8")
	}
}
