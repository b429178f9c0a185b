package toolchain

import (
	"regexp"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// MaxVersionBytes caps the length of an exact version, requested or read
// from the registry (node-semver's MAX_LENGTH).
const MaxVersionBytes = 256

// MaxMajorDigits caps the digits of a requested major ("9", "10").
const MaxMajorDigits = 4

// exactVersion is MAJOR.MINOR.PATCH with an optional prerelease, as
// semver 2.0.0 writes it (numbers without leading zeros), and no build
// metadata: the only versions that become a path or a URL.
var exactVersion = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?$`)

// isExact reports whether v is an exact version gilf puts in a path.
func isExact(v string) bool {
	return len(v) <= MaxVersionBytes && exactVersion.MatchString(v)
}

// isMajor reports whether v is a bare major: digits, no leading zero, at
// most MaxMajorDigits of them.
func isMajor(v string) bool {
	if v == "" || len(v) > MaxMajorDigits || (len(v) > 1 && v[0] == '0') {
		return false
	}
	for _, c := range []byte(v) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// wanted is a requested version: exactly one of exact and major is set,
// or neither (the registry's latest).
type wanted struct {
	exact string
	major string
}

// String is the version as a public message shows it after the name.
func (w wanted) String() string {
	switch {
	case w.exact != "":
		return w.exact
	case w.major != "":
		return w.major
	}
	return "latest"
}

// parseWanted classifies a requested version; anything but an exact
// version, a major or empty is a refusal.
func parseWanted(pm validation.PackageManager, v string) (wanted, error) {
	switch {
	case v == "":
		return wanted{}, nil
	case isMajor(v):
		return wanted{major: v}, nil
	case isExact(v):
		return wanted{exact: v}, nil
	}
	shown := v
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	return wanted{}, validation.Refuse(validation.CodePackageManagerUnavailable,
		"%s version %q is not an exact version (MAJOR.MINOR.PATCH[-prerelease]) or a major", pm, shown)
}

// split returns the numeric core of an exact version and its prerelease.
func split(v string) (core [3]string, pre string) {
	c, pre, _ := strings.Cut(v, "-")
	parts := strings.SplitN(c, ".", 3)
	copy(core[:], parts)
	return core, pre
}

// compareNumbers orders two decimal numbers without leading zeros, of
// any length.
func compareNumbers(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// highestStable returns the highest exact version without a prerelease
// whose major is major, or "" when there is none. Keys that are not
// exact versions are ignored.
func highestStable(versions []string, major string) string {
	best := ""
	var bestCore [3]string
	for _, v := range versions {
		if !isExact(v) {
			continue
		}
		core, pre := split(v)
		if pre != "" || core[0] != major {
			continue
		}
		if best == "" || compareCore(core, bestCore) > 0 {
			best, bestCore = v, core
		}
	}
	return best
}

func compareCore(a, b [3]string) int {
	for i := range a {
		if c := compareNumbers(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}
