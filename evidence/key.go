package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// KeyRoot is the first segment of every key gilf generates.
const KeyRoot = "review-artifacts"

// MaxSegmentBytes bounds one encoded key segment. A longer encoding is
// replaced by its first bytes, "%h" and the SHA-256 of the raw value, so
// keys stay within S3's 1024-byte limit and within file-name limits.
const MaxSegmentBytes = 180

// MaxKeyBytes is S3's limit on a whole key, store prefix included.
const MaxKeyBytes = 1024

// hashedPrefixBytes is how much of an over-long encoding a hashed segment
// keeps for the reader.
const hashedPrefixBytes = MaxSegmentBytes - len("%h") - sha256.Size*2

// Scope names the review the artifacts belong to. gilf fills it from the
// job (repository full name, head SHA, review or job id); none of it is
// trusted to be well-formed.
type Scope struct {
	Repo   string
	SHA    string
	Review string
}

// Key returns review-artifacts/<repo>/<sha>/evidence/<review>/<kind>/<name>
// with every variable segment encoded by EncodeSegment. Different inputs
// give different keys, and no input can add a segment, a "." or ".."
// segment, an empty segment or a control byte.
func Key(scope Scope, kind Kind, name string) (string, error) {
	if err := checkKind(kind); err != nil {
		return "", err
	}
	var errs []error
	for _, f := range []struct{ field, v string }{
		{"repository", scope.Repo}, {"head sha", scope.SHA},
		{"review", scope.Review}, {"artifact name", name},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("evidence key: empty %s", f.field))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return strings.Join([]string{
		KeyRoot,
		EncodeSegment(scope.Repo),
		EncodeSegment(scope.SHA),
		"evidence",
		EncodeSegment(scope.Review),
		string(kind),
		EncodeSegment(name),
	}, "/"), nil
}

// EncodeSegment encodes s as one key segment: bytes outside
// [A-Za-z0-9_.-] are percent-encoded (so "/" and "%" are too), and so is a
// leading ".", so the result is never "." or "..", holds no "/" and no
// control byte. Distinct inputs give distinct outputs: the encoding is
// reversible, and an encoding longer than MaxSegmentBytes is replaced by a
// form containing "%h", which no plain encoding contains, and the SHA-256
// of s.
func EncodeSegment(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainByte(c) && (c != '.' || i > 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	enc := b.String()
	if len(enc) <= MaxSegmentBytes {
		return enc
	}
	cut := hashedPrefixBytes
	if i := strings.LastIndexByte(enc[:cut], '%'); i >= cut-2 {
		cut = i // never split a %XX triple
	}
	sum := sha256.Sum256([]byte(s))
	return enc[:cut] + "%h" + hex.EncodeToString(sum[:])
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.'
}

// ValidKey checks a key (or a store prefix without its trailing slash)
// before a store uses it: relative, no empty, "." or ".." segment, no
// backslash, no control byte, valid UTF-8, at most MaxKeyBytes.
func ValidKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("key is %d bytes, over the %d-byte limit", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return errors.New("key is not valid UTF-8")
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("key %q holds a forbidden byte at %d", key, i)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("key %q has an empty segment", key)
		case ".", "..":
			return fmt.Errorf("key %q has a %q segment", key, seg)
		}
	}
	return nil
}

// CleanPrefix validates a store prefix (GILF_EVIDENCE_S3_PREFIX) and
// returns it with one trailing slash, or "" for none. Surrounding slashes
// are dropped; anything ValidKey refuses is an error.
func CleanPrefix(prefix string) (string, error) {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return "", nil
	}
	if err := ValidKey(p); err != nil {
		return "", fmt.Errorf("evidence prefix %q: %w", prefix, err)
	}
	return p + "/", nil
}
