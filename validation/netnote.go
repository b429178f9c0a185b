package validation

import (
	"net/netip"
	"regexp"
	"strings"
)

// Network errors a step prints when it tries to reach the network it does
// not have: a failed name lookup, undici's "fetch failed", a refused
// connection to an address that is not the sandbox's own loopback.
var (
	netLookup  = regexp.MustCompile(`\b(?:ENOTFOUND|EAI_AGAIN)\b(?: ([A-Za-z0-9.-]{1,253}))?`)
	netFetch   = regexp.MustCompile(`\bfetch failed\b`)
	netRefused = regexp.MustCompile(`\bECONNREFUSED (?:\[([0-9A-Fa-f:.]+)\]|([0-9A-Fa-f:.]+)):\d+`)
)

// MaxNetworkNoteScan is how much of a step's kept output NetworkNotes
// reads: the head and the tail, each cut to this many bytes.
const MaxNetworkNoteScan = 256 << 10

// NetworkNotes says, for each failed script step whose output shows
// network errors, that script steps have no network by design: the
// failure is the step's want of a network, whatever the pull request
// changed. The install step, which has the registries, gets none.
func NetworkNotes(steps []StepResult) []string {
	var out []string
	for _, s := range steps {
		if !Failed(s.Status) || s.Network != NetworkNone {
			continue
		}
		if why := networkError(clipScan(s.Output.Head) + "\n" + clipScan(s.Output.Tail)); why != "" {
			out = append(out, "step `"+s.Name+"` printed network errors ("+why+"): script steps have no network by design, "+
				"only the install step reaches the package registries. A test that needs the network fails here whatever the pull request changes.")
		}
	}
	return out
}

func clipScan(s string) string {
	if len(s) > MaxNetworkNoteScan {
		return s[len(s)-MaxNetworkNoteScan:]
	}
	return s
}

// networkError names the first network error in text, "" when none.
func networkError(text string) string {
	if m := netLookup.FindStringSubmatch(text); m != nil {
		return strings.TrimSpace(m[0])
	}
	for _, m := range netRefused.FindAllStringSubmatch(text, 50) {
		a, err := netip.ParseAddr(m[1] + m[2])
		if err == nil && !a.IsLoopback() && !a.IsUnspecified() {
			return m[0]
		}
	}
	if netFetch.MatchString(text) {
		return "fetch failed"
	}
	return ""
}
