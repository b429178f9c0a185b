package validation

import (
	"strings"
	"testing"
)

func TestNetworkNotes(t *testing.T) {
	step := func(name string, status Status, network Network, out string) StepResult {
		return StepResult{Name: name, Status: status, Network: network, Output: Output{Head: out}}
	}
	tests := []struct {
		name string
		step StepResult
		want string // "" = no note
	}{
		{"name lookup", step("test", StatusFailed, NetworkNone, "Error: getaddrinfo ENOTFOUND registry.example.org\n"), "ENOTFOUND registry.example.org"},
		{"temporary lookup failure", step("test", StatusFailed, NetworkNone, "getaddrinfo EAI_AGAIN api.github.com"), "EAI_AGAIN api.github.com"},
		{"undici", step("test", StatusFailed, NetworkNone, "TypeError: fetch failed\n    at node:internal/deps/undici"), "fetch failed"},
		{"refused off the host", step("test", StatusFailed, NetworkNone, "connect ECONNREFUSED 140.82.112.3:443"), "ECONNREFUSED 140.82.112.3:443"},
		{"refused on IPv6 off the host", step("test", StatusFailed, NetworkNone, "connect ECONNREFUSED [2606:50c0:8000::153]:443"), "ECONNREFUSED [2606:50c0:8000::153]:443"},
		{"refused on loopback is the test's own server", step("test", StatusFailed, NetworkNone, "connect ECONNREFUSED 127.0.0.1:3000\nconnect ECONNREFUSED ::1:3000"), ""},
		{"a passed step", step("test", StatusPassed, NetworkNone, "ENOTFOUND x.org"), ""},
		{"the install step has the registries", step("install", StatusFailed, NetworkRegistry, "ENOTFOUND x.org"), ""},
		{"an ordinary failure", step("test", StatusFailed, NetworkNone, "AssertionError: 1 !== 2"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notes := NetworkNotes([]StepResult{tt.step})
			if tt.want == "" {
				if len(notes) != 0 {
					t.Errorf("notes %q, want none", notes)
				}
				return
			}
			if len(notes) != 1 || !strings.Contains(notes[0], "("+tt.want+")") || !strings.Contains(notes[0], "no network by design") {
				t.Errorf("notes %q, want one naming %q", notes, tt.want)
			}
		})
	}
	// The scan is bounded: an error past MaxNetworkNoteScan of the head's
	// end is still read, one before it is not.
	far := step("test", StatusFailed, NetworkNone, "ENOTFOUND a.org\n"+strings.Repeat("x", MaxNetworkNoteScan))
	if n := NetworkNotes([]StepResult{far}); len(n) != 0 {
		t.Errorf("an error beyond the scanned bytes was read: %q", n)
	}
	near := step("test", StatusFailed, NetworkNone, strings.Repeat("x", MaxNetworkNoteScan-len(" ENOTFOUND a.org"))+" ENOTFOUND a.org")
	if n := NetworkNotes([]StepResult{near}); len(n) != 1 {
		t.Errorf("an error within the scanned bytes was missed: %q", n)
	}
}
