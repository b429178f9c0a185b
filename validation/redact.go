package validation

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MinSecretLength is the shortest secret value that is scanned for. Shorter
// values ("1", "true", a port number) would match ordinary output
// everywhere; they are not secrets worth the false positives (SPEC §7).
const MinSecretLength = 8

// Encodings a secret is recognized in. Each hit reports one of these.
const (
	EncodingRaw            = "raw"
	EncodingBase64         = "base64"          // standard alphabet, padded or not
	EncodingBase64URL      = "base64url"       // URL-safe alphabet, padded or not
	EncodingBase64Embedded = "base64-embedded" // inside a longer base64 stream
	EncodingURL            = "url"             // url.QueryEscape or url.PathEscape
	EncodingHex            = "hex"             // lower or upper case
)

// MaxPathValueBytes bounds a value PathToFile looks at (PATH_MAX).
const MaxPathValueBytes = 4096

// PathToFile reports whether a variable's value is the absolute path of
// an existing regular file: it says where something is (a CA bundle,
// AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt; a key file), not what
// it is, so it is no secret whatever the variable's name, and redacting it
// would cut the path out of every message that names the file. The value
// must be spelled as a clean absolute path (no "..", no doubled or
// trailing slash, no space or control byte) and name a regular file; a
// secret that happens to start with "/" names none.
func PathToFile(v string) bool {
	if len(v) < 2 || len(v) > MaxPathValueBytes || v[0] != '/' || filepath.Clean(v) != v {
		return false
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	st, err := os.Stat(v)
	return err == nil && st.Mode().IsRegular()
}

// SecretHit is one occurrence of a known secret in scanned bytes. It names
// the secret and where it was found, never the value.
type SecretHit struct {
	Name     string `json:"name"`
	Offset   int    `json:"offset"`
	Encoding string `json:"encoding"`
}

// ScanSecrets reports every occurrence of the secrets' values (in every
// encoding the Redactor knows) in b: leftmost first, the longest form at a
// position, non-overlapping. Values shorter than MinSecretLength are not
// scanned.
func ScanSecrets(b []byte, secrets []Secret) []SecretHit {
	m := compileSecrets(secrets)
	if m == nil {
		return nil
	}
	var hits []SecretHit
	for from := 0; from < len(b); {
		pos, p := m.next(b, from, len(b))
		if p == nil {
			break
		}
		hits = append(hits, SecretHit{Name: p.name, Offset: pos, Encoding: p.encoding})
		from = pos + len(p.value)
	}
	return hits
}

// Redactor is an io.Writer that replaces known secret values in the stream
// with `[REDACTED:<name>]` before passing it on. It holds back at most the
// length of the longest form minus one byte, so a value split across two
// writes is still caught; Flush emits what is held back at the end of the
// stream. With no secret long enough to scan it passes writes straight
// through. It is not safe for concurrent use.
//
// What it covers: for each secret value of at least MinSecretLength
// bytes, the Redactor replaces:
//   - the value itself;
//   - its standard and URL-safe base64, padded and unpadded;
//   - the part of its base64 that is fixed whatever surrounds it, at each
//     of the three byte alignments, in both alphabets: this catches the
//     value inside a longer encoded stream (`env | base64`), leaving at
//     most two characters of partial groups on each side;
//   - url.QueryEscape and url.PathEscape forms;
//   - lower- and upper-case hex.
//
// It does not catch a value split by other bytes (base64 wrapped into
// lines, as base64(1) does by default; a value printed across two lines),
// reversed, XORed, compressed or otherwise transformed. Redaction is best
// effort; the real control is that secrets never enter the sandbox.
type Redactor struct {
	w     io.Writer
	m     *secretMatcher // nil: pass-through
	buf   []byte
	count int
}

// NewRedactor returns a Redactor writing to w.
func NewRedactor(w io.Writer, secrets []Secret) *Redactor {
	return newRedactor(w, compileSecrets(secrets))
}

func newRedactor(w io.Writer, m *secretMatcher) *Redactor {
	return &Redactor{w: w, m: m}
}

// Write redacts p into the underlying writer. It reports len(p) unless the
// underlying writer fails.
func (r *Redactor) Write(p []byte) (int, error) {
	if r.m == nil {
		n, err := r.w.Write(p)
		if err != nil {
			return n, fmt.Errorf("redact: %w", err)
		}
		return n, nil
	}
	r.buf = append(r.buf, p...)
	limit := len(r.buf) - (r.m.maxLen - 1)
	if limit <= 0 {
		return len(p), nil
	}
	emitted, err := r.scan(limit)
	r.buf = r.buf[:copy(r.buf, r.buf[emitted:])]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush redacts and writes everything held back. Call it at the end of the
// stream; writing may continue afterwards, but no value is then matched
// across the flush point.
func (r *Redactor) Flush() error {
	if r.m == nil || len(r.buf) == 0 {
		return nil
	}
	_, err := r.scan(len(r.buf))
	r.buf = r.buf[:0]
	return err
}

// Redactions is how many occurrences were replaced so far.
func (r *Redactor) Redactions() int { return r.count }

// scan writes r.buf up to at least limit, redacting every match that starts
// before limit, and returns how many bytes of r.buf were consumed.
func (r *Redactor) scan(limit int) (int, error) {
	from, emitted := 0, 0
	for from < limit {
		pos, p := r.m.next(r.buf, from, limit)
		if p == nil {
			break
		}
		if err := r.emit(r.buf[emitted:pos]); err != nil {
			return emitted, err
		}
		if err := r.emit(p.replacement); err != nil {
			return pos, err
		}
		r.count++
		from = pos + len(p.value)
		emitted = from
	}
	if emitted < limit {
		if err := r.emit(r.buf[emitted:limit]); err != nil {
			return emitted, err
		}
		emitted = limit
	}
	return emitted, nil
}

func (r *Redactor) emit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := r.w.Write(b); err != nil {
		return fmt.Errorf("redact: %w", err)
	}
	return nil
}

// secretPattern is one encoded form of one secret.
type secretPattern struct {
	value       []byte
	name        string
	encoding    string
	replacement []byte
}

// secretMatcher finds any of a fixed set of patterns with the Wu–Manber
// method: it looks at the two bytes that end a window of the shortest
// pattern's length and, unless they occur near the end of some pattern's
// first window, skips ahead by as much as that length minus one. Ordinary
// text is thus mostly jumped over; a candidate position is checked against
// the patterns that start with its first two bytes.
type secretMatcher struct {
	pats    []secretPattern // longest first
	window  int             // min(shortest pattern, maxShift+1)
	shift   [65536]uint8    // two-byte block at the window's end → safe skip
	pair    [65536 / 64]uint64
	buckets map[uint16][]int // first two bytes → indices into pats, longest first
	maxLen  int
}

// maxShift is the largest skip the shift table can hold.
const maxShift = 255

// compileSecrets builds the matcher for secrets, or returns nil when none
// is long enough to scan.
func compileSecrets(secrets []Secret) *secretMatcher {
	seen := map[string]bool{}
	var pats []secretPattern
	for _, s := range secrets {
		if len(s.Value) < MinSecretLength {
			continue
		}
		for _, f := range secretForms(s.Value) {
			if len(f.value) < MinSecretLength || seen[f.value] {
				continue
			}
			seen[f.value] = true
			pats = append(pats, secretPattern{
				value:       []byte(f.value),
				name:        s.Name,
				encoding:    f.encoding,
				replacement: []byte("[REDACTED:" + s.Name + "]"),
			})
		}
	}
	if len(pats) == 0 {
		return nil
	}
	// Longest first, so that at one position the fullest form wins (the
	// padded base64 over its unpadded prefix).
	slices.SortStableFunc(pats, func(a, b secretPattern) int { return len(b.value) - len(a.value) })
	m := &secretMatcher{
		pats:    pats,
		window:  min(len(pats[len(pats)-1].value), maxShift+1),
		buckets: map[uint16][]int{},
		maxLen:  len(pats[0].value),
	}
	for i := range m.shift {
		m.shift[i] = uint8(m.window - 1)
	}
	for i, p := range pats {
		k := uint16(p.value[0])<<8 | uint16(p.value[1])
		m.pair[k>>6] |= 1 << (k & 63)
		m.buckets[k] = append(m.buckets[k], i)
		// A block ending at index j of the pattern's first window means a
		// match may start window-1-j bytes further on.
		for j := 1; j < m.window; j++ {
			blk := uint16(p.value[j-1])<<8 | uint16(p.value[j])
			m.shift[blk] = min(m.shift[blk], uint8(m.window-1-j))
		}
	}
	return m
}

// next returns the leftmost match that starts in [from, limit) and lies
// wholly inside b, the longest one at that position; or -1, nil.
func (m *secretMatcher) next(b []byte, from, limit int) (int, *secretPattern) {
	// No pattern fits in fewer than window bytes.
	limit = min(limit, len(b)-m.window+1)
	for i := from; i < limit; {
		end := i + m.window
		if s := m.shift[uint16(b[end-2])<<8|uint16(b[end-1])]; s > 0 {
			i += int(s)
			continue
		}
		k := uint16(b[i])<<8 | uint16(b[i+1])
		if m.pair[k>>6]&(1<<(k&63)) != 0 {
			for _, pi := range m.buckets[k] {
				p := &m.pats[pi]
				if len(p.value) <= len(b)-i && bytes.Equal(b[i:i+len(p.value)], p.value) {
					return i, p
				}
			}
		}
		i++
	}
	return -1, nil
}

type secretForm struct{ encoding, value string }

// secretForms lists the encodings of v that are redacted.
func secretForms(v string) []secretForm {
	raw := []byte(v)
	forms := []secretForm{
		{EncodingRaw, v},
		{EncodingBase64, base64.StdEncoding.EncodeToString(raw)},
		{EncodingBase64, base64.RawStdEncoding.EncodeToString(raw)},
		{EncodingBase64URL, base64.URLEncoding.EncodeToString(raw)},
		{EncodingBase64URL, base64.RawURLEncoding.EncodeToString(raw)},
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for o := range 3 {
			forms = append(forms, secretForm{EncodingBase64Embedded, base64Core(enc, raw, o)})
		}
	}
	return append(forms,
		secretForm{EncodingURL, url.QueryEscape(v)},
		secretForm{EncodingURL, url.PathEscape(v)},
		secretForm{EncodingHex, hex.EncodeToString(raw)},
		secretForm{EncodingHex, strings.ToUpper(hex.EncodeToString(raw))},
	)
}

// base64Core returns the characters of v's encoding that do not depend on
// the bytes around it when v starts at byte offset o (mod 3) of a longer
// encoded stream: those whose six bits all come from v.
func base64Core(enc *base64.Encoding, v []byte, o int) string {
	padded := make([]byte, o, o+len(v))
	s := enc.EncodeToString(append(padded, v...))
	start := (8*o + 5) / 6
	end := 8 * (o + len(v)) / 6
	return s[start:end]
}
