package main

import (
	"strings"
	"testing"
)

// TestLoadOrigin: GILF_BASE_COMPARISON is on unless 0; anything but 0 or
// 1 is a configuration error; the name is known.
func TestLoadOrigin(t *testing.T) {
	for v, want := range map[string]bool{"": true, "1": true, "0": false, " 0 ": false} {
		cfg, err := Load(envMap(map[string]string{"GILF_BASE_COMPARISON": v}))
		if err != nil || cfg.Origin.BaseComparison != want {
			t.Errorf("GILF_BASE_COMPARISON=%q: %v, %v; want %v", v, cfg.Origin.BaseComparison, err, want)
		}
	}
	if _, err := Load(envMap(map[string]string{"GILF_BASE_COMPARISON": "off"})); err == nil || !strings.Contains(err.Error(), `GILF_BASE_COMPARISON="off": want 0 or 1`) {
		t.Errorf("GILF_BASE_COMPARISON=off: %v", err)
	}
	if errs := unknownEnv([]string{"GILF_BASE_COMPARISON=0"}); len(errs) != 0 {
		t.Errorf("GILF_BASE_COMPARISON is unknown: %v", errs)
	}
}
