package validation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on reading package.json. The PR author writes every byte of it.
const (
	// DefaultMaxManifestBytes is the largest package.json read. A larger
	// one is a gap (GapManifestTooLarge), refused before it is read whole.
	DefaultMaxManifestBytes = 1 << 20
	// DefaultMaxManifestDepth is the deepest nesting of objects and arrays
	// accepted in package.json (the top object is depth 1). Real manifests
	// stay under 10; deeper input is a gap, never a stack blow-up.
	DefaultMaxManifestDepth = 128
	// MaxGapMessageBytes caps a gap's public message: nothing of a large
	// manifest is ever quoted into it.
	MaxGapMessageBytes = 240
	// MaxManifestNotes caps the notes one manifest can add (duplicate
	// keys, ignored script values); the rest are counted in one last note.
	MaxManifestNotes = 16
	// maxNoteKeyBytes caps how much of an untrusted key a note quotes.
	maxNoteKeyBytes = 64
)

// utf8BOM is the byte-order mark npm strips before JSON.parse.
const utf8BOM = "\xEF\xBB\xBF"

// manifest is what the plan needs from package.json, read the way npm reads
// it: JSON.parse semantics (exact-case keys, the last duplicate wins).
type manifest struct {
	// scripts holds the string-valued entries of the "scripts" object.
	scripts map[string]string
	// scriptsKind is the JSON kind of the "scripts" value: "" when absent,
	// else "object", "string", "number", "boolean", "null" or "array".
	scriptsKind string
	// packageManager is the "packageManager" value when it is a string.
	packageManager    string
	hasPackageManager bool
	// enginesNode is the "engines"."node" value when it is a string.
	enginesNode string
	notes       noteList
}

// noteList collects notes up to MaxManifestNotes and counts the rest.
type noteList struct {
	notes   []string
	dropped int
}

func (l *noteList) add(format string, args ...any) {
	if len(l.notes) >= MaxManifestNotes {
		l.dropped++
		return
	}
	l.notes = append(l.notes, fmt.Sprintf(format, args...))
}

func (l *noteList) list() []string {
	out := l.notes
	if l.dropped > 0 {
		if l.dropped == 1 {
			out = append(out, "1 more note about package.json was left out")
		} else {
			out = append(out, fmt.Sprintf("%d more notes about package.json were left out", l.dropped))
		}
	}
	return out
}

// manifestFrame is one open object or array while walking the tokens.
type manifestFrame struct {
	object  bool
	wantKey bool
	key     string // the current key, for an object
	keys    map[string]struct{}
}

// parseManifest reads package.json bytes. A nil *Gap means m is usable.
// The walk is iterative over json.Decoder tokens, so depth costs no stack,
// and keys are matched byte-exactly (encoding/json's struct decoding would
// take "Scripts" for "scripts").
func parseManifest(data []byte, maxDepth int) (manifest, *Gap) {
	data = bytes.TrimPrefix(data, []byte(utf8BOM))
	m := manifest{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // JSON.parse accepts 1e400; float64 decoding would not

	var stack []manifestFrame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) && len(stack) == 0 {
			return manifest{}, &Gap{Reason: GapManifestUnparseable, Msg: "package.json is empty"}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return manifest{}, unparseable("package.json ends before its JSON value does", nil, dec.InputOffset())
		}
		if err != nil {
			return manifest{}, unparseable("package.json is not valid JSON", err, dec.InputOffset())
		}

		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				break
			}
			stack[len(stack)-1].wantKey = stack[len(stack)-1].object
			continue
		}

		if len(stack) == 0 {
			// The top value: npm requires an object.
			if d, ok := tok.(json.Delim); !ok || d != '{' {
				return manifest{}, &Gap{Reason: GapManifestUnparseable, Msg: "package.json is not a JSON object"}
			}
			stack = append(stack, manifestFrame{object: true, wantKey: true, keys: map[string]struct{}{}})
			continue
		}

		top := &stack[len(stack)-1]
		if top.object && top.wantKey {
			key, ok := tok.(string)
			if !ok { // the decoder guarantees a string key; be certain anyway
				return manifest{}, unparseable("package.json has an object key that is not a string", nil, dec.InputOffset())
			}
			if _, dup := top.keys[key]; dup {
				m.notes.add("duplicate key %s in %s: the last value is used, as npm does", quoteKey(key), framePath(stack))
			}
			if len(stack) == 1 && key != "scripts" && strings.EqualFold(key, "scripts") {
				m.notes.add("key %s is not \"scripts\": npm keys are case-sensitive, so nothing in it runs", quoteKey(key))
			}
			top.keys[key] = struct{}{}
			top.key = key
			top.wantKey = false
			continue
		}

		// tok is a value (scalar or the start of a container) at this place.
		m.observe(stack, tok)
		if d, ok := tok.(json.Delim); ok {
			if len(stack) >= maxDepth {
				return manifest{}, &Gap{Reason: GapManifestUnparseable,
					Msg: fmt.Sprintf("package.json nests deeper than %d levels", maxDepth)}
			}
			f := manifestFrame{object: d == '{', wantKey: d == '{'}
			if f.object {
				f.keys = map[string]struct{}{}
			}
			stack = append(stack, f)
			continue
		}
		top.wantKey = top.object
	}

	// JSON.parse rejects anything but whitespace after the value.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return manifest{}, unparseable("package.json has data after its JSON value", nil, dec.InputOffset())
	}
	m.noteNearMisses()
	return m, nil
}

// observe records a value that starts at the current place: the "scripts",
// "packageManager" and "engines" members of the top object, the members of
// "scripts" and "engines"."node". A later duplicate replaces an earlier
// one entirely.
func (m *manifest) observe(stack []manifestFrame, tok json.Token) {
	switch {
	case len(stack) == 1 && stack[0].key == "scripts":
		m.scriptsKind = jsonKind(tok)
		m.scripts = nil
		if m.scriptsKind == "object" {
			m.scripts = map[string]string{}
		}
	case len(stack) == 1 && stack[0].key == "packageManager":
		s, ok := tok.(string)
		m.packageManager, m.hasPackageManager = s, ok
		if !ok {
			m.notes.add("packageManager is %s, not a string: it is ignored", article(jsonKind(tok)))
		}
	case len(stack) == 1 && stack[0].key == "engines":
		m.enginesNode = ""
	case len(stack) == 2 && stack[0].key == "engines" && stack[1].object && stack[1].key == "node":
		s, ok := tok.(string)
		m.enginesNode = s
		if !ok {
			m.notes.add("engines.node is %s, not a string: it is ignored", article(jsonKind(tok)))
		}
	case len(stack) == 2 && stack[0].key == "scripts" && stack[1].object:
		name := stack[1].key
		if s, ok := tok.(string); ok {
			m.scripts[name] = s
			return
		}
		delete(m.scripts, name)
		m.notes.add("scripts.%s is %s, not a string: npm ignores it, and so does gilf", noteKey(name), article(jsonKind(tok)))
	}
}

// noteNearMisses records keys that differ from the ones npm reads only by
// case: npm ignores them, so gilf does too, but a reader should know.
func (m *manifest) noteNearMisses() {
	keys := slices.Sorted(maps.Keys(m.scripts))
	for _, name := range ScriptNames {
		for _, key := range keys {
			if key != name && strings.EqualFold(key, name) {
				m.notes.add("scripts.%s is not scripts.%s: script names are case-sensitive, so it is not run", noteKey(key), name)
			}
		}
	}
}

// jsonKind names the JSON kind that tok starts.
func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "object"
		}
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "value"
}

func article(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "null":
		return "null"
	}
	return "a " + kind
}

// framePath names the object a key sits in, for a note.
func framePath(stack []manifestFrame) string {
	if len(stack) == 1 {
		return "the top-level object"
	}
	parts := make([]string, 0, len(stack)-1)
	for _, f := range stack[:len(stack)-1] {
		if f.object {
			parts = append(parts, noteKey(f.key))
		} else {
			parts = append(parts, "[]")
		}
	}
	p := strings.Join(parts, ".")
	if len(p) > 2*maxNoteKeyBytes {
		p = "…" + p[len(p)-2*maxNoteKeyBytes:]
		p = strings.ToValidUTF8(p, "")
	}
	return p
}

// quoteKey quotes an untrusted key for a note: escaped, and cut short.
func quoteKey(key string) string {
	return fmt.Sprintf("%q", truncateUTF8(key, maxNoteKeyBytes))
}

// noteKey shows a key inside a dotted path: plain when it is a simple name,
// quoted otherwise.
func noteKey(key string) string {
	if key != "" && len(key) <= maxNoteKeyBytes && isPlainKey(key) {
		return key
	}
	return quoteKey(key)
}

func isPlainKey(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == ':') {
			return false
		}
	}
	return true
}

// truncateUTF8 cuts s to at most n bytes on a rune boundary, marking a cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// unparseable builds the gap for invalid JSON. The decoder's message names
// at most one offending character; it is still sanitized and capped, and
// nothing else of the file is quoted.
func unparseable(what string, err error, offset int64) *Gap {
	msg := what
	if err != nil {
		msg += ": " + err.Error()
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		msg += fmt.Sprintf(" (at byte %d)", se.Offset)
	case offset >= 0:
		msg += fmt.Sprintf(" (at byte %d)", offset)
	}
	return &Gap{Reason: GapManifestUnparseable, Msg: publicMessage(msg)}
}

// publicMessage makes text safe for a gap message: valid UTF-8, no control
// characters, at most MaxGapMessageBytes.
func publicMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
	if len(s) > MaxGapMessageBytes {
		s = truncateUTF8(s, MaxGapMessageBytes-len("…"))
	}
	return s
}
