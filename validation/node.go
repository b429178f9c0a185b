package validation

import (
	"fmt"
	"strings"
)

// Where a NodeRequirement comes from, in precedence order.
const (
	NodeVersionFileNVM  = ".nvmrc"
	NodeVersionFileNode = ".node-version"
	SourceEnginesNode   = "engines.node"
)

// MaxNodeRangeBytes caps NodeRequirement.Range; a longer requirement is
// cut (and marked with "…", which no range parser accepts, so a cut one is
// never evaluated).
const MaxNodeRangeBytes = 256

// newNodeRequirement trims and caps a requirement; nil when it is empty.
func newNodeRequirement(value, source string) *NodeRequirement {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil
	}
	if len(value) > MaxNodeRangeBytes {
		value = truncateUTF8(value, MaxNodeRangeBytes-len("…"))
	}
	return &NodeRequirement{Range: value, Source: source}
}

// nodeAlias reports whether a requirement is a version manager's alias
// (nvm, fnm, nodenv) that only a release index can resolve.
func nodeAlias(s string) bool {
	s = strings.ToLower(s)
	if strings.HasPrefix(s, "lts/") || strings.HasPrefix(s, "lts-") {
		return true
	}
	switch s {
	case "lts", "node", "stable", "latest", "current", "system", "iojs", "unstable", "newest":
		return true
	}
	return false
}

// NodeNote is the record's note on the worker's node against what the
// checkout asks for. The requirement is never enforced: the scripts run on
// the worker's node either way, and the note says so.
//
// It is "" when req is nil, when nodeVersion (as `node --version` prints
// it, "v20.20.2") is empty or not a version, and when the requirement is
// satisfied. An alias that cannot be evaluated offline ("lts/*",
// "lts/hydrogen", "node", "stable", "latest", "system") and a requirement
// that is not a semver range get a note saying it was not checked: the
// record then shows what was asked without claiming it was met.
func NodeNote(req *NodeRequirement, nodeVersion string) string {
	if req == nil {
		return ""
	}
	v, ok := parseSemver(nodeVersion)
	if !ok {
		return ""
	}
	what := fmt.Sprintf("%s %s", req.Source, quoteNote(req.Range))
	if nodeAlias(req.Range) {
		return fmt.Sprintf("%s names an alias gilf cannot resolve offline, so the worker's node %s was not checked against it", what, nodeVersion)
	}
	r, err := parseRange(req.Range)
	if err != nil {
		return fmt.Sprintf("%s is not a semver range, so the worker's node %s was not checked against it", what, nodeVersion)
	}
	if r.satisfies(v) {
		return ""
	}
	return fmt.Sprintf("the worker's node %s does not satisfy %s; the scripts ran on it anyway", nodeVersion, what)
}

// quoteNote quotes an untrusted value for a note, escaped and capped.
func quoteNote(s string) string {
	return fmt.Sprintf("%q", truncateUTF8(s, MaxNodeRangeBytes))
}

// parseNodeVersionFile reads .nvmrc or .node-version: the first line that
// is neither blank nor a comment ("#…"), trimmed, with a trailing " #…"
// comment removed. ok is false when there is no such line (value "") or
// it holds a control character or invalid UTF-8 (value is the line).
func parseNodeVersionFile(data []byte) (value string, ok bool) {
	s := strings.TrimPrefix(string(data), utf8BOM)
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if i := strings.Index(line, "\t#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		for _, r := range line {
			if r < 0x20 || r == 0x7f || r == '\uFFFD' {
				return line, false
			}
		}
		return line, true
	}
	return "", false
}
