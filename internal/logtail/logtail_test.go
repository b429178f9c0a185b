package logtail

import (
	"strings"
	"sync"
	"testing"
)

func TestBufferKeepsTheTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"under the limit", 8, []string{"ab", "cd"}, "abcd"},
		{"exactly the limit", 4, []string{"ab", "cd"}, "abcd"},
		{"over across writes", 4, []string{"abc", "def"}, "cdef"},
		{"one write over", 4, []string{"ab", "cdefgh"}, "efgh"},
		{"zero value keeps nothing", 0, []string{"abc"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.limit)
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				if err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if got := b.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBufferConcurrentWrites(t *testing.T) {
	b := New(64)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("xxxxxxxxxx")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 64) {
		t.Errorf("String() = %q, want 64 x", got)
	}
}
