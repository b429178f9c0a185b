package validation_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/validation"
)

func TestPublicationID(t *testing.T) {
	for _, tt := range []struct {
		job   int64
		rerun int
		want  string
	}{
		{123, 0, "123"},
		{123, 2, "123.2"},
		{1, 1, "1.1"},
		{math.MaxInt64, math.MaxInt32, "9223372036854775807.2147483647"},
	} {
		got := validation.PublicationID(tt.job, tt.rerun)
		if got != tt.want {
			t.Errorf("PublicationID(%d, %d) = %q, want %q", tt.job, tt.rerun, got, tt.want)
		}
		job, rerun, ok := validation.ParsePublicationID(got)
		if !ok || job != tt.job || rerun != tt.rerun {
			t.Errorf("ParsePublicationID(%q) = %d, %d, %v; want the round trip", got, job, rerun, ok)
		}
	}
}

func TestParsePublicationIDIsStrict(t *testing.T) {
	for _, s := range []string{
		"", ".", "1.", ".1", "0", "0.1", "01", "1.01", "1.0", "-1", "+1", "1.-1", " 1", "1 ", "1.2.3",
		"1e3", "0x10", "١", "1\x00", "abc", "gilf-123",
		"9223372036854775808",                // job id over int64
		"1." + strconv.Itoa(math.MaxInt32+1), // rerun over int32
		strings.Repeat("1", 40),              // over the length bound
	} {
		if job, rerun, ok := validation.ParsePublicationID(s); ok {
			t.Errorf("ParsePublicationID(%q) = %d, %d, true; want not ok", s, job, rerun)
		}
	}
}

func FuzzParsePublicationID(f *testing.F) {
	for _, s := range []string{"123", "123.2", "0", "1.0", "01", "9223372036854775807.2147483647"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		job, rerun, ok := validation.ParsePublicationID(s)
		if !ok {
			return
		}
		if job <= 0 || rerun < 0 || validation.PublicationID(job, rerun) != s {
			t.Fatalf("ParsePublicationID(%q) = %d, %d: not canonical", s, job, rerun)
		}
	})
}
