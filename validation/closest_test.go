package validation

import (
	"strings"
	"testing"
)

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"GILF_WORKER", "GILF_WORKERS", 1}, {"SECERT", "SECRET", 2}, {"a", "", 1}, {"providr", "provider", 1}, {"mode", "mode", 0},
		{strings.Repeat("a", MaxEditDistanceInput), strings.Repeat("a", MaxEditDistanceInput), 0},
		{strings.Repeat("a", MaxEditDistanceInput+1), strings.Repeat("a", MaxEditDistanceInput+1), MaxEditDistanceInput},
	} {
		if got := EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"provider", "codeChangesOnly", "crabbox", "e2b", "env"}
	if got, d := Closest("CodeChangesonly", known); got != "codeChangesOnly" || d != 0 {
		t.Errorf("Closest ignoring case = %q, %d", got, d)
	}
	if got, d := Closest("providr", known); got != "provider" || d != 1 {
		t.Errorf("Closest = %q, %d", got, d)
	}
	if got, d := Closest("x", nil); got != "" || d != -1 {
		t.Errorf("Closest of nothing = %q, %d", got, d)
	}
}
