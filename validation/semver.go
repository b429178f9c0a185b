package validation

import (
	"errors"
	"strconv"
	"strings"
)

// A small semver matcher with node-semver's semantics for the ranges
// package.json, .nvmrc and .node-version carry: exact and partial
// versions, a "v" or "=" prefix, <, <=, >, >=, caret, tilde, x-ranges,
// hyphen ranges, whitespace AND and || OR. A version with a prerelease
// satisfies a comparator set only when one of its comparators has a
// prerelease on the same major.minor.patch (node-semver's default,
// includePrerelease off). Loose mode and build metadata ranking are not
// needed: node versions are plain "v20.11.1".

// maxSemverNumber is node-semver's cap on a numeric part
// (Number.MAX_SAFE_INTEGER).
const maxSemverNumber = 1<<53 - 1

// maxRangeBytes bounds what parseRange looks at; longer input is refused.
const maxRangeBytes = 1 << 10

var errBadRange = errors.New("not a semver range")

// semver is a full version. pre holds the prerelease identifiers.
type semver struct {
	major, minor, patch int64
	pre                 []string
}

// parseSemver parses a full version "1.2.3", "v1.2.3", "=1.2.3",
// "1.2.3-rc.1" or "1.2.3+build" (the build is ignored).
func parseSemver(s string) (semver, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "=")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "v"), "V")
	p, ok := parsePartial(s)
	if !ok || p.parts != 3 {
		return semver{}, false
	}
	return p.v, true
}

// partial is a version with 0 to 3 numeric parts; a missing or x part
// ends it (parts counts the numbers present: "1.x" has 1).
type partial struct {
	v     semver
	parts int
}

// parsePartial parses "1", "1.2", "1.2.3", "1.x", "1.2.*", "x", "*", ""
// with an optional prerelease and build on a full version. A number after
// a wildcard is refused ("1.x.3" is not a version).
func parsePartial(s string) (partial, bool) {
	var p partial
	if s == "" || s == "*" || s == "x" || s == "X" {
		return p, true
	}
	core, build, hasBuild := strings.Cut(s, "+")
	if hasBuild && !validIdentifiers(build, false) {
		return p, false
	}
	core, pre, hasPre := strings.Cut(core, "-")
	fields := strings.Split(core, ".")
	if len(fields) > 3 {
		return p, false
	}
	wild := false
	for i, f := range fields {
		if f == "x" || f == "X" || f == "*" {
			wild = true
			continue
		}
		if wild {
			return p, false
		}
		n, ok := semverNumber(f)
		if !ok {
			return p, false
		}
		switch i {
		case 0:
			p.v.major = n
		case 1:
			p.v.minor = n
		case 2:
			p.v.patch = n
		}
		p.parts++
	}
	if hasPre {
		if p.parts != 3 || !validIdentifiers(pre, true) {
			return p, false
		}
		p.v.pre = strings.Split(pre, ".")
	}
	if hasBuild && p.parts != 3 {
		return p, false
	}
	return p, true
}

// semverNumber parses a numeric part: digits, no leading zero, at most
// maxSemverNumber.
func semverNumber(s string) (int64, bool) {
	if s == "" || len(s) > 16 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxSemverNumber {
		return 0, false
	}
	return n, true
}

// validIdentifiers checks dot-separated prerelease or build identifiers:
// [0-9A-Za-z-]+, and for a prerelease no numeric identifier with a
// leading zero.
func validIdentifiers(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		numeric := true
		for _, c := range []byte(id) {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return false
			}
		}
		if pre && numeric && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// compareSemver orders versions as semver 2.0.0 does (build ignored).
func compareSemver(a, b semver) int {
	for _, d := range [...]int64{a.major - b.major, a.minor - b.minor, a.patch - b.patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		if c := compareIdentifier(a.pre[i], b.pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(a.pre) < len(b.pre):
		return -1
	case len(a.pre) > len(b.pre):
		return 1
	}
	return 0
}

// compareIdentifier: numeric identifiers compare numerically and sort
// before alphanumeric ones, which compare in ASCII order.
func compareIdentifier(a, b string) int {
	an, aNum := semverNumber(a)
	bn, bNum := semverNumber(b)
	switch {
	case aNum && bNum:
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

// comparator is one primitive test: op is "<", "<=", ">", ">=" or "=";
// an empty op matches every version (the "*" range).
type comparator struct {
	op string
	v  semver
}

func (c comparator) test(v semver) bool {
	if c.op == "" {
		return true
	}
	d := compareSemver(v, c.v)
	switch c.op {
	case "<":
		return d < 0
	case "<=":
		return d <= 0
	case ">":
		return d > 0
	case ">=":
		return d >= 0
	}
	return d == 0
}

// semverRange is a union (||) of comparator sets, each an intersection.
type semverRange [][]comparator

// parseRange parses a node-semver range. An empty range is "*".
func parseRange(s string) (semverRange, error) {
	if len(s) > maxRangeBytes {
		return nil, errBadRange
	}
	var r semverRange
	for _, part := range strings.Split(s, "||") {
		set, err := parseComparatorSet(part)
		if err != nil {
			return nil, err
		}
		r = append(r, set)
	}
	return r, nil
}

// satisfies reports whether v is in the range, with node-semver's
// prerelease rule.
func (r semverRange) satisfies(v semver) bool {
	for _, set := range r {
		if setSatisfies(set, v) {
			return true
		}
	}
	return false
}

func setSatisfies(set []comparator, v semver) bool {
	for _, c := range set {
		if !c.test(v) {
			return false
		}
	}
	if len(v.pre) == 0 {
		return true
	}
	// A prerelease passes only when some comparator names a prerelease
	// of the same major.minor.patch.
	for _, c := range set {
		if c.op != "" && len(c.v.pre) > 0 && c.v.major == v.major && c.v.minor == v.minor && c.v.patch == v.patch {
			return true
		}
	}
	return false
}

// parseComparatorSet parses one side of "||": a hyphen range or
// whitespace-separated comparators. An operator may be followed by spaces
// (">= 18"), as node-semver allows.
func parseComparatorSet(s string) ([]comparator, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return []comparator{{}}, nil
	}
	if len(fields) == 3 && fields[1] == "-" {
		return hyphenRange(fields[0], fields[2])
	}
	var set []comparator
	for i := 0; i < len(fields); i++ {
		tok := fields[i]
		if isOperator(tok) {
			if i+1 >= len(fields) {
				return nil, errBadRange
			}
			i++
			tok += fields[i]
		}
		cs, err := desugar(tok)
		if err != nil {
			return nil, err
		}
		set = append(set, cs...)
	}
	return set, nil
}

func isOperator(s string) bool {
	switch s {
	case "<", "<=", ">", ">=", "=", "~", "~>", "^":
		return true
	}
	return false
}

// desugar turns one comparator token into primitive comparators.
func desugar(tok string) ([]comparator, error) {
	op := ""
	for _, o := range [...]string{"<=", ">=", "~>", "<", ">", "=", "~", "^"} {
		if strings.HasPrefix(tok, o) {
			op, tok = o, tok[len(o):]
			break
		}
	}
	tok = strings.TrimPrefix(strings.TrimPrefix(tok, "v"), "V")
	if isOperator(tok) || strings.ContainsAny(tok, "<>=~^") {
		return nil, errBadRange
	}
	p, ok := parsePartial(tok)
	if !ok {
		return nil, errBadRange
	}
	switch op {
	case "^":
		return caret(p), nil
	case "~", "~>":
		return tilde(p), nil
	case "", "=":
		return xRange(p), nil
	}
	return primitive(op, p), nil
}

// lower is the smallest version a partial names; upper is the first
// version past it ("1.2" → 1.3.0-0). upper is only called with parts ≥ 1.
func lower(p partial) semver {
	return semver{major: p.v.major, minor: p.v.minor, patch: p.v.patch, pre: p.v.pre}
}

func upper(p partial) semver {
	switch p.parts {
	case 1:
		return semver{major: p.v.major + 1, pre: []string{"0"}}
	case 2:
		return semver{major: p.v.major, minor: p.v.minor + 1, pre: []string{"0"}}
	}
	return semver{major: p.v.major, minor: p.v.minor, patch: p.v.patch + 1, pre: []string{"0"}}
}

func xRange(p partial) []comparator {
	switch p.parts {
	case 0:
		return []comparator{{}}
	case 3:
		return []comparator{{op: "=", v: p.v}}
	}
	return []comparator{{op: ">=", v: lower(p)}, {op: "<", v: upper(p)}}
}

// primitive desugars <, <=, >, >= with a partial version.
func primitive(op string, p partial) []comparator {
	if p.parts == 3 {
		return []comparator{{op: op, v: p.v}}
	}
	if p.parts == 0 {
		if op == "<" || op == ">" {
			return []comparator{{op: "<", v: semver{pre: []string{"0"}}}} // nothing
		}
		return []comparator{{}}
	}
	switch op {
	case ">": // >1.2 → >=1.3.0
		return []comparator{{op: ">=", v: upper(p).withoutPre()}}
	case ">=":
		return []comparator{{op: ">=", v: lower(p)}}
	case "<": // <1.2 → <1.2.0-0
		return []comparator{{op: "<", v: semver{major: p.v.major, minor: p.v.minor, pre: []string{"0"}}}}
	}
	// <=1.2 → <1.3.0-0
	return []comparator{{op: "<", v: upper(p)}}
}

func (v semver) withoutPre() semver { v.pre = nil; return v }

// tilde: patch-level changes when a minor is given, minor-level otherwise.
func tilde(p partial) []comparator {
	switch p.parts {
	case 0:
		return []comparator{{}}
	case 1:
		return []comparator{{op: ">=", v: lower(p)}, {op: "<", v: upper(p)}}
	}
	return []comparator{{op: ">=", v: lower(p)}, {op: "<", v: semver{major: p.v.major, minor: p.v.minor + 1, pre: []string{"0"}}}}
}

// caret: changes that do not modify the leftmost non-zero part.
func caret(p partial) []comparator {
	lo := comparator{op: ">=", v: lower(p)}
	switch {
	case p.parts == 0:
		return []comparator{{}}
	case p.parts == 1:
		return []comparator{lo, {op: "<", v: upper(p)}}
	case p.parts == 2 && p.v.major == 0:
		return []comparator{lo, {op: "<", v: semver{minor: p.v.minor + 1, pre: []string{"0"}}}}
	case p.parts == 2:
		return []comparator{lo, {op: "<", v: semver{major: p.v.major + 1, pre: []string{"0"}}}}
	case p.v.major != 0:
		return []comparator{lo, {op: "<", v: semver{major: p.v.major + 1, pre: []string{"0"}}}}
	case p.v.minor != 0:
		return []comparator{lo, {op: "<", v: semver{minor: p.v.minor + 1, pre: []string{"0"}}}}
	}
	return []comparator{lo, {op: "<", v: semver{patch: p.v.patch + 1, pre: []string{"0"}}}}
}

// hyphenRange: "1.2 - 3" → >=1.2.0 <4.0.0-0; a full upper bound is
// inclusive.
func hyphenRange(from, to string) ([]comparator, error) {
	trim := func(s string) string { return strings.TrimPrefix(strings.TrimPrefix(s, "v"), "V") }
	lo, ok1 := parsePartial(trim(from))
	hi, ok2 := parsePartial(trim(to))
	if !ok1 || !ok2 {
		return nil, errBadRange
	}
	var set []comparator
	if lo.parts > 0 {
		set = append(set, comparator{op: ">=", v: lower(lo)})
	}
	switch hi.parts {
	case 0:
	case 3:
		set = append(set, comparator{op: "<=", v: hi.v})
	default:
		set = append(set, comparator{op: "<", v: upper(hi)})
	}
	if len(set) == 0 {
		set = []comparator{{}}
	}
	return set, nil
}
