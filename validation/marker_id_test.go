package validation_test

import (
	"testing"

	"github.com/gilf-review/gilf/validation"
)

func TestMarkerIDRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		store string
		job   int64
		rerun int
		want  string
	}{
		{"", 1, 0, "1"},
		{"", 7, 2, "7.2"},
		{"0123456789abcdef", 1, 0, "0123456789abcdef-1"},
		{"0123456789abcdef", 42, 3, "0123456789abcdef-42.3"},
	} {
		got := validation.MarkerID(tt.store, tt.job, tt.rerun)
		if got != tt.want {
			t.Errorf("MarkerID(%q, %d, %d) = %q, want %q", tt.store, tt.job, tt.rerun, got, tt.want)
		}
		store, job, rerun, ok := validation.ParseMarkerID(got)
		if !ok || store != tt.store || job != tt.job || rerun != tt.rerun {
			t.Errorf("ParseMarkerID(%q) = %q, %d, %d, %v; want the round trip", got, store, job, rerun, ok)
		}
	}
}

func TestParseMarkerIDIsStrict(t *testing.T) {
	for _, s := range []string{
		"", "-1", "0123456789abcdef-", "0123456789abcdef-0", "0123456789ABCDEF-1", "0123456789abcde-1",
		"0123456789abcdef0-1", "0123456789abcdeg-1", "0123456789abcdef-1-2", "0123456789abcdef--1", "gilf-1",
	} {
		if store, job, rerun, ok := validation.ParseMarkerID(s); ok {
			t.Errorf("ParseMarkerID(%q) = %q, %d, %d, true; want not ok", s, store, job, rerun)
		}
	}
}

func FuzzParseMarkerID(f *testing.F) {
	for _, s := range []string{"1", "0123456789abcdef-42.3", "0123456789abcdef-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		store, job, rerun, ok := validation.ParseMarkerID(s)
		if ok && validation.MarkerID(store, job, rerun) != s {
			t.Fatalf("ParseMarkerID(%q) = %q, %d, %d: not canonical", s, store, job, rerun)
		}
	})
}
