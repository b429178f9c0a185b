package validation

import (
	"strings"
)

// Limits on the small files BuildPlan reads besides package.json. The PR
// author writes every byte of them; each is read through os.Root, never
// through a symlink, and never past its limit.
const (
	// MaxLockfileHeadBytes is how much of pnpm-lock.yaml and yarn.lock is
	// read: their lockfileVersion, "# yarn lockfile v1" header and
	// __metadata block are the first lines every version writes.
	MaxLockfileHeadBytes = 4 << 10
	// MaxYarnrcBytes caps .yarnrc.yml. A larger one is not read (a note
	// says so) and its yarnPath is not known.
	MaxYarnrcBytes = 64 << 10
	// MaxNodeVersionFileBytes caps .nvmrc and .node-version; a larger one
	// is not read.
	MaxNodeVersionFileBytes = 1 << 10
	// MaxYarnPathBytes caps the yarnPath of .yarnrc.yml.
	MaxYarnPathBytes = 255
)

// YarnLockKind is the format of a yarn.lock.
type YarnLockKind string

const (
	// YarnLockV1 is Yarn classic's format ("# yarn lockfile v1").
	YarnLockV1 YarnLockKind = "v1"
	// YarnLockBerry is Yarn 2+'s format, with a top-level __metadata block.
	YarnLockBerry YarnLockKind = "berry"
)

// CheckoutFacts are the small facts read from the checkout root that pick
// the package manager's version and the node requirement. The zero value
// means nothing was read (PlanFromManifest); BuildPlan reads them with
// bounded reads (MaxLockfileHeadBytes, MaxYarnrcBytes,
// MaxNodeVersionFileBytes).
type CheckoutFacts struct {
	// PNPMLockfileVersion is pnpm-lock.yaml's top-level lockfileVersion as
	// written ("9.0", "6.0", "5.4"); "" when unknown.
	PNPMLockfileVersion string
	// YarnLock is the format of yarn.lock; "" when unknown.
	YarnLock YarnLockKind
	// YarnLockMetadataVersion is __metadata.version of a berry yarn.lock;
	// 0 when unknown.
	YarnLockMetadataVersion int
	// YarnPath is the top-level yarnPath of .yarnrc.yml as written; ""
	// when there is none. PlanFromCheckout checks it is a clean path
	// inside the checkout before using it.
	YarnPath string
	// NodeVersionFile is the requirement of .nvmrc, else .node-version;
	// nil when neither names one. engines.node comes from package.json.
	NodeVersionFile *NodeRequirement
}

// yamlLine is one line of a block-style YAML file, as far as gilf needs:
// its indentation, and a key and scalar value when it is "key: value".
type yamlLine struct {
	indent int
	key    string
	value  string // the raw text after ": ", comment removed
	isKey  bool
}

// yamlLines splits data into lines. When truncated, the last line may be
// cut short and is dropped. Comment-only and blank lines are skipped, as
// is a document marker ("---").
func yamlLines(data string, truncated bool) []yamlLine {
	data = strings.TrimPrefix(data, utf8BOM)
	if truncated {
		if i := strings.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		} else {
			data = ""
		}
	}
	var out []yamlLine
	for raw := range strings.Lines(data) {
		raw = strings.TrimRight(raw, "\r\n")
		body := strings.TrimLeft(raw, " ")
		if body == "" || strings.HasPrefix(body, "#") || strings.TrimSpace(body) == "" {
			continue
		}
		if strings.HasPrefix(body, "---") && strings.TrimSpace(body[3:]) == "" {
			continue
		}
		l := yamlLine{indent: len(raw) - len(body)}
		l.key, l.value, l.isKey = splitYAMLKey(body)
		out = append(out, l)
	}
	return out
}

// splitYAMLKey splits "key: value" where key may be plain, 'single' or
// "double" quoted. The value keeps its quotes; a comment is removed.
func splitYAMLKey(s string) (key, value string, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "'"):
		k, n, ok := yamlQuoted(s)
		if !ok {
			return "", "", false
		}
		key, rest = k, s[n:]
	default:
		i := strings.Index(s, ":")
		if i <= 0 {
			return "", "", false
		}
		key, rest = strings.TrimRight(s[:i], " \t"), s[i:]
	}
	rest = strings.TrimLeft(rest, " \t")
	if !strings.HasPrefix(rest, ":") {
		return "", "", false
	}
	rest = rest[1:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", "", false // "a:b" is a plain scalar, not a key
	}
	return key, stripYAMLComment(strings.TrimSpace(rest)), true
}

// stripYAMLComment removes a " #…" comment outside quotes.
func stripYAMLComment(v string) string {
	if strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "'") {
		if _, n, ok := yamlQuoted(v); ok {
			return v[:n]
		}
		return v
	}
	if strings.HasPrefix(v, "#") {
		return ""
	}
	for _, sep := range [...]string{" #", "\t#"} {
		if i := strings.Index(v, sep); i >= 0 {
			v = v[:i]
		}
	}
	return strings.TrimSpace(v)
}

// yamlQuoted reads a quoted scalar at the start of s and returns its value
// and the bytes it used. Double quotes take the escapes \\ \" \/ \t \n; any
// other escape is refused rather than guessed.
func yamlQuoted(s string) (string, int, bool) {
	if s == "" {
		return "", 0, false
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case q == '\'' && c == '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), i + 1, true
		case q == '"' && c == '"':
			return b.String(), i + 1, true
		case q == '"' && c == '\\':
			if i+1 >= len(s) {
				return "", 0, false
			}
			i++
			switch s[i] {
			case '\\', '"', '/':
				b.WriteByte(s[i])
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			default:
				return "", 0, false
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

// yamlScalar is the value of a scalar as written: unquoted, or plain text.
// ok is false for an unterminated quote, an empty value, or a flow or
// block collection ("[", "{", "|", ">", "&", "*", "!").
func yamlScalar(v string) (string, bool) {
	if v == "" {
		return "", false
	}
	if v[0] == '"' || v[0] == '\'' {
		s, n, ok := yamlQuoted(v)
		if !ok || strings.TrimSpace(v[n:]) != "" {
			return "", false
		}
		return s, true
	}
	if strings.ContainsRune("[{|>&*!%@`", rune(v[0])) {
		return "", false
	}
	return v, true
}

// topLevelScalar is the first top-level "key: scalar" of lines.
func topLevelScalar(lines []yamlLine, key string) (string, bool) {
	for _, l := range lines {
		if l.indent == 0 && l.isKey && l.key == key {
			return yamlScalar(l.value)
		}
	}
	return "", false
}

// parsePNPMLockfileVersion reads lockfileVersion from the head of
// pnpm-lock.yaml ('9.0', "6.0" or a bare 5.4). truncated says data is
// only the first MaxLockfileHeadBytes of a longer file. It returns "" when
// there is none, or when the value is not digits and dots.
func parsePNPMLockfileVersion(head []byte, truncated bool) string {
	v, ok := topLevelScalar(yamlLines(string(head), truncated), "lockfileVersion")
	if !ok || len(v) > 16 || strings.Trim(v, "0123456789.") != "" || !strings.ContainsAny(v[:1], "0123456789") {
		return ""
	}
	return v
}

// parseYarnLockHead reads the kind of a yarn.lock from its head, and for a
// berry lockfile its __metadata.version (0 when it is not a number). A
// top-level __metadata block means berry, as Yarn itself decides
// (Project.setupResolutions); else a "# yarn lockfile v1" comment before
// the first entry means classic; else the kind is "".
func parseYarnLockHead(head []byte, truncated bool) (YarnLockKind, int) {
	lines := yamlLines(string(head), truncated)
	for i, l := range lines {
		if l.indent != 0 || !l.isKey || l.key != "__metadata" || l.value != "" {
			continue
		}
		version := 0
		for _, m := range lines[i+1:] {
			if m.indent == 0 {
				break
			}
			if m.isKey && m.key == "version" {
				if s, ok := yamlScalar(m.value); ok {
					if n, ok := leadingNumber(s); ok && len(s) <= 9 && strings.Trim(s, "0123456789") == "" {
						version = n
					}
				}
				break
			}
		}
		return YarnLockBerry, version
	}
	// The v1 header is a comment, which yamlLines skips: look at the
	// comment lines before the first entry.
	s := strings.TrimPrefix(string(head), utf8BOM)
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		if strings.TrimSpace(strings.TrimPrefix(line, "#")) == "yarn lockfile v1" {
			return YarnLockV1, 0
		}
	}
	return "", 0
}

// parseYarnrcYarnPath reads the top-level yarnPath of .yarnrc.yml (the
// whole file). It returns "" when there is none or it is not a scalar.
func parseYarnrcYarnPath(data []byte) string {
	v, ok := topLevelScalar(yamlLines(string(data), false), "yarnPath")
	if !ok {
		return ""
	}
	return v
}
