package store_test

import (
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

func TestBackoff(t *testing.T) {
	base, max := 30*time.Second, 30*time.Minute
	tests := []struct {
		name    string
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{"first attempt, no jitter", 1, 0, 15 * time.Second},
		{"first attempt, full jitter", 1, 0.999999, 30 * time.Second},
		{"second attempt doubles", 2, 0, 30 * time.Second},
		{"fifth attempt", 5, 0.5, 6 * time.Minute},
		{"capped", 30, 0, 15 * time.Minute},
		{"capped, full jitter", 30, 0.999999, 30 * time.Minute},
		{"attempt zero is the first", 0, 0, 15 * time.Second},
		{"jitter out of range is clamped", 1, 7, 30 * time.Second},
		{"negative jitter is clamped", 1, -1, 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := store.Backoff(tt.attempt, base, max, tt.jitter)
			if d := got - tt.want; d < -time.Millisecond || d > time.Millisecond {
				t.Fatalf("Backoff(%d, jitter %v) = %v, want %v", tt.attempt, tt.jitter, got, tt.want)
			}
		})
	}
}
