package webhook

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// decodePayload reads the fields intake needs from a delivery body in one
// pass, without building values for anything else (a pull_request payload
// is mostly URLs and user objects intake never looks at). It validates the
// whole document as encoding/json does and gives the same values for the
// fields it reads — FuzzDecodeMatchesEncodingJSON holds it to that — with
// two deliberate differences, both errors: a wanted key that appears twice
// in one object, and a key that only case-folds to a wanted one (GitHub
// sends neither; encoding/json would silently merge or match them).
// Every error wraps ErrBadPayload.
//
// What it buys, measured with BenchmarkDecode on the real 25 KB
// pull_request payload (three runs on the shared 2-CPU machine at load
// 10–15, each beside encoding/json in the same run): 25–100 µs a delivery
// against encoding/json's 210–500 µs (0.06–0.34×), where a whole durable
// intake costs the machine 0.5–1 ms of CPU a delivery (bench/intake.sh);
// without plainRun's and ws's eight-bytes-at-a-time (SWAR) loops it is
// 0.3–1.2× encoding/json: the SWAR loops are what make it worth keeping.
func decodePayload(body []byte) (payload, error) {
	s := scanner{b: body}
	var p payload
	if err := s.top(&p); err != nil {
		return payload{}, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	return p, nil
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

var (
	errSyntax      = errors.New("invalid JSON")
	errType        = errors.New("unexpected JSON type")
	errDepth       = errors.New("JSON nested too deeply")
	errDuplicate   = errors.New("duplicate key")
	errFoldedKey   = errors.New("key differs from an expected one only in case")
	errNumberRange = errors.New("number out of range")
)

type scanner struct {
	b []byte
	i int
}

func (s *scanner) syntax(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, s.i)
}

func (s *scanner) ws() {
	for s.i < len(s.b) && s.b[s.i] <= ' ' {
		// Indentation comes in runs of spaces: eight at a time, while a
		// byte is left after them (so s.b[s.i] below stays in range).
		for s.i+8 < len(s.b) && binary.LittleEndian.Uint64(s.b[s.i:]) == swarOnes*' ' {
			s.i += 8
		}
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) top(p *payload) error {
	var err error
	switch s.peek() {
	case 'n':
		err = s.literal("null")
	case '{':
		err = s.object(1, p.member)
	default:
		if err = s.skip(0); err == nil {
			err = fmt.Errorf("%w: payload is not an object", errType)
		}
	}
	if err != nil {
		return err
	}
	if s.peek() != 0 {
		return s.syntax("data after the top-level value")
	}
	return nil
}

// object walks the members of the object at s.i; member decodes or skips
// each value. depth counts the object itself.
func (s *scanner) object(depth int, member func(s *scanner, key []byte, depth int) (bool, error)) error {
	if depth > maxDepth {
		return errDepth
	}
	s.i++ // '{'
	if s.peek() == '}' {
		s.i++
		return nil
	}
	var seenBuf [8][]byte
	seen := seenBuf[:0]
	for {
		if s.peek() != '"' {
			return s.syntax("expected a key")
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.syntax("expected ':'")
		}
		s.i++
		used, err := member(s, key, depth)
		if err != nil {
			return err
		}
		if used {
			for _, k := range seen {
				if bytes.Equal(k, key) {
					return fmt.Errorf("%w %q", errDuplicate, k)
				}
			}
			seen = append(seen, key)
		}
		if more, err := s.next('}'); !more || err != nil {
			return err
		}
	}
}

// next reads what follows a member or an element: a ',' (more) or the
// container's closing byte, end. Anything else is a syntax error.
func (s *scanner) next(end byte) (more bool, err error) {
	switch s.peek() {
	case ',':
		s.i++
		return true, nil
	case end:
		s.i++
		return false, nil
	}
	if end == '}' {
		return false, s.syntax("expected ',' or '}'")
	}
	return false, s.syntax("expected ',' or ']'")
}

// match reports whether key is want, and fails when it only case-folds to
// it (encoding/json would match it; GitHub never sends it).
func match(key []byte, want string) (bool, error) {
	if string(key) == want {
		return true, nil
	}
	if bytes.EqualFold(key, []byte(want)) {
		return false, fmt.Errorf("%w: %q", errFoldedKey, key)
	}
	return false, nil
}

// pick finds which of keys the key is; -1 when none.
func pick(key []byte, keys ...string) (int, error) {
	for i, k := range keys {
		ok, err := match(key, k)
		if err != nil || ok {
			return i, err
		}
	}
	return -1, nil
}

func (p *payload) member(s *scanner, key []byte, depth int) (bool, error) {
	i, err := pick(key, "action", "number", "installation", "repository", "pull_request", "changes", "repositories_removed",
		"check_run", "check_suite", "issue", "comment")
	if err != nil {
		return false, err
	}
	switch i {
	case 0:
		return true, s.str(&p.Action)
	case 1:
		return true, s.integer(&p.Number)
	case 2:
		return true, objectPtr(s, depth, &p.Installation, (*idRef).member)
	case 3:
		return true, objectPtr(s, depth, &p.Repository, (*repoRef).member)
	case 4:
		return true, objectPtr(s, depth, &p.PullRequest, (*prRef).member)
	case 5:
		return true, s.objectOrNull(depth, func(s *scanner, key []byte, depth int) (bool, error) {
			return only(s, key, depth, "base", func() error {
				p.BaseChanged = s.peek() != 'n'
				return s.skip(depth)
			})
		})
	case 6:
		return true, s.repoList(depth, &p.RepositoriesRemoved)
	case 7:
		return true, objectPtr(s, depth, &p.CheckRun, (*checkRef).member)
	case 8:
		return true, objectPtr(s, depth, &p.CheckSuite, (*checkRef).member)
	case 9:
		return true, objectPtr(s, depth, &p.Issue, (*issueRef).member)
	case 10:
		return true, objectPtr(s, depth, &p.Comment, (*commentRef).member)
	}
	return false, s.skip(depth)
}

// member reads a check run's or check suite's own fields; the nested
// objects (a check run's check_suite, pull_requests, output) are skipped.
func (c *checkRef) member(s *scanner, key []byte, depth int) (bool, error) {
	i, err := pick(key, "id", "external_id", "head_sha", "app")
	if err != nil {
		return false, err
	}
	switch i {
	case 0:
		return true, s.integer64(&c.ID)
	case 1:
		return true, s.str(&c.ExternalID)
	case 2:
		return true, s.str(&c.HeadSHA)
	case 3:
		return true, s.objectOrNull(depth, func(s *scanner, key []byte, depth int) (bool, error) {
			return only(s, key, depth, "id", func() error { return s.integer64(&c.AppID) })
		})
	}
	return false, s.skip(depth)
}

func (r *idRef) member(s *scanner, key []byte, depth int) (bool, error) {
	return only(s, key, depth, "id", func() error { return s.integer64(&r.ID) })
}

func (r *repoRef) member(s *scanner, key []byte, depth int) (bool, error) {
	return only(s, key, depth, "full_name", func() error { return s.str(&r.FullName) })
}

// only is the member function of an object of which one member is read,
// name, by read; every other is skipped.
func only(s *scanner, key []byte, depth int, name string, read func() error) (bool, error) {
	ok, err := match(key, name)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, s.skip(depth)
	}
	return true, read()
}

func (pr *prRef) member(s *scanner, key []byte, depth int) (bool, error) {
	i, err := pick(key, "number", "draft", "updated_at", "head", "base")
	if err != nil {
		return false, err
	}
	switch i {
	case 0:
		return true, s.integer(&pr.Number)
	case 1:
		return true, s.boolean(&pr.Draft)
	case 2:
		return true, s.str(&pr.UpdatedAt)
	case 3:
		return true, s.objectOrNull(depth, func(s *scanner, key []byte, depth int) (bool, error) {
			i, err := pick(key, "sha", "repo")
			switch {
			case err != nil:
				return false, err
			case i == 0:
				return true, s.str(&pr.HeadSHA)
			case i == 1:
				return true, objectPtr(s, depth, &pr.HeadRepo, (*repoRef).member)
			}
			return false, s.skip(depth)
		})
	case 4:
		return true, s.objectOrNull(depth, func(s *scanner, key []byte, depth int) (bool, error) {
			return only(s, key, depth, "ref", func() error { return s.str(&pr.BaseRef) })
		})
	}
	return false, s.skip(depth)
}

// objectPtr decodes an object into *dst (allocated on first use), or sets
// it nil on null, as encoding/json does for a pointer field.
func objectPtr[T any](s *scanner, depth int, dst **T, member func(*T, *scanner, []byte, int) (bool, error)) error {
	if s.peek() == 'n' {
		*dst = nil
		return s.literal("null")
	}
	if s.peek() != '{' {
		return s.typeErr("object")
	}
	if *dst == nil {
		*dst = new(T)
	}
	v := *dst
	return s.object(depth+1, func(s *scanner, key []byte, depth int) (bool, error) { return member(v, s, key, depth) })
}

// objectOrNull decodes an object value; null leaves everything as it was.
func (s *scanner) objectOrNull(depth int, member func(*scanner, []byte, int) (bool, error)) error {
	switch s.peek() {
	case 'n':
		return s.literal("null")
	case '{':
		return s.object(depth+1, member)
	}
	return s.typeErr("object")
}

// repoList decodes an array of {full_name} objects; null empties it.
func (s *scanner) repoList(depth int, dst *[]repoRef) error {
	switch s.peek() {
	case 'n':
		*dst = nil
		return s.literal("null")
	case '[':
	default:
		return s.typeErr("array")
	}
	if depth+1 > maxDepth {
		return errDepth
	}
	s.i++
	list := []repoRef{}
	if s.peek() == ']' {
		s.i++
		*dst = list
		return nil
	}
	for {
		var r repoRef
		switch s.peek() {
		case 'n':
			if err := s.literal("null"); err != nil {
				return err
			}
		case '{':
			if err := s.object(depth+2, r.member); err != nil {
				return err
			}
		default:
			return s.typeErr("object")
		}
		list = append(list, r)
		more, err := s.next(']')
		if err != nil {
			return err
		}
		if !more {
			*dst = list
			return nil
		}
	}
}

// typeErr reports a wrong type; the value is still checked for syntax so
// a syntax error anywhere wins, as in encoding/json.
func (s *scanner) typeErr(want string) error {
	at := s.i
	if err := s.skip(0); err != nil {
		return err
	}
	return fmt.Errorf("%w: want %s at offset %d", errType, want, at)
}

func (s *scanner) str(dst *string) error {
	switch s.peek() {
	case 'n':
		return s.literal("null")
	case '"':
		v, err := s.stringValue()
		if err != nil {
			return err
		}
		*dst = v
		return nil
	}
	return s.typeErr("string")
}

func (s *scanner) boolean(dst *bool) error {
	switch s.peek() {
	case 'n':
		return s.literal("null")
	case 't':
		*dst = true
		return s.literal("true")
	case 'f':
		*dst = false
		return s.literal("false")
	}
	return s.typeErr("boolean")
}

func (s *scanner) integer(dst *int) error {
	var v int64
	set, err := s.int64Value(&v)
	if set {
		*dst = int(v)
	}
	return err
}

func (s *scanner) integer64(dst *int64) error {
	_, err := s.int64Value(dst)
	return err
}

func (s *scanner) int64Value(dst *int64) (bool, error) {
	c := s.peek()
	if c == 'n' {
		return false, s.literal("null")
	}
	if c != '-' && (c < '0' || c > '9') {
		return false, s.typeErr("number")
	}
	start := s.i
	if err := s.number(); err != nil {
		return false, err
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return false, fmt.Errorf("%w: %s", errNumberRange, s.b[start:s.i])
	}
	*dst = v
	return true, nil
}

// key reads an object key: sliced from the body when plain, unquoted by
// encoding/json otherwise.
func (s *scanner) key() ([]byte, error) {
	start := s.i
	plain, err := s.skipString()
	if err != nil {
		return nil, err
	}
	if plain {
		return s.b[start+1 : s.i-1], nil
	}
	var v string
	if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
		return nil, fmt.Errorf("%w: %w", errSyntax, err)
	}
	return []byte(v), nil
}

// stringValue reads the string at s.i. Plain ASCII strings are sliced;
// anything with escapes or non-ASCII bytes is unquoted by encoding/json so
// the result is exactly its (escapes, surrogates, invalid UTF-8).
func (s *scanner) stringValue() (string, error) {
	start := s.i
	plain, err := s.skipString()
	if err != nil {
		return "", err
	}
	raw := s.b[start:s.i]
	if plain {
		return string(raw[1 : len(raw)-1]), nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%w: %w", errSyntax, err)
	}
	return v, nil
}

// SWAR constants: one in every byte, and every byte's high bit.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// plainRun returns the index of the first byte at or after i that may be
// special (see specialWord), eight bytes at a time: long plain runs (a pull
// request body) cost a few operations a word. It may stop early, at a
// plain byte, never past a special one.
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := specialMask(binary.LittleEndian.Uint64(b[i : i+8])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return i
}

// specialWord reports whether any of the eight bytes of x (a word of a
// JSON string) needs skipString's byte-wise look: a quote, a backslash, a
// control character or a non-ASCII byte. It may say true for a word of
// plain bytes (then the byte loop finds nothing special), never false for
// a special one: x-ones·n & ^x & high is nonzero exactly when some byte of
// x is below n, for n <= 0x80.
func specialWord(x uint64) bool { return specialMask(x) != 0 }

// specialMask has the high bit set of the bytes of x that specialWord
// calls special; its lowest set bit is exactly at the first special byte
// (a borrow only runs from a special byte upward, so only bits above the
// first one can be spurious).
func specialMask(x uint64) uint64 {
	quote := x ^ (swarOnes * '"')
	backslash := x ^ (swarOnes * '\\')
	return ((quote-swarOnes)&^quote | (backslash-swarOnes)&^backslash | (x-swarOnes*0x20)&^x | x) & swarHigh
}

// skipString validates and skips the string at s.i; plain is false when it
// holds escapes or non-ASCII bytes.
func (s *scanner) skipString() (plain bool, err error) {
	s.i++ // '"'
	plain = true
	for s.i < len(s.b) {
		s.i = plainRun(s.b, s.i)
		if s.i >= len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return plain, nil
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return false, s.syntax("unterminated escape")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false, s.syntax("short \\u escape")
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false, s.syntax("bad \\u escape")
					}
				}
				s.i += 6
			default:
				return false, s.syntax("bad escape")
			}
		case c < 0x20:
			return false, s.syntax("control character in string")
		default:
			if c >= 0x80 {
				plain = false
			}
			s.i++
		}
	}
	return false, s.syntax("unterminated string")
}

// number validates and skips a JSON number.
func (s *scanner) number() error {
	b, i := s.b, s.i
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		digits()
	default:
		s.i = i
		return s.syntax("bad number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			s.i = i
			return s.syntax("bad fraction")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			s.i = i
			return s.syntax("bad exponent")
		}
	}
	s.i = i
	return nil
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.syntax("bad literal")
	}
	s.i += len(lit)
	return nil
}

// skip validates and skips any value. depth is the nesting of the value's
// container.
func (s *scanner) skip(depth int) error {
	switch c := s.peek(); {
	case c == '{':
		if depth+1 > maxDepth {
			return errDepth
		}
		s.i++
		if s.peek() == '}' {
			s.i++
			return nil
		}
		for {
			if s.peek() != '"' {
				return s.syntax("expected a key")
			}
			if _, err := s.skipString(); err != nil {
				return err
			}
			if s.peek() != ':' {
				return s.syntax("expected ':'")
			}
			s.i++
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if more, err := s.next('}'); !more || err != nil {
				return err
			}
		}
	case c == '[':
		if depth+1 > maxDepth {
			return errDepth
		}
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if more, err := s.next(']'); !more || err != nil {
				return err
			}
		}
	case c == '"':
		_, err := s.skipString()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 0:
		return s.syntax("unexpected end")
	}
	return s.syntax("unexpected character")
}
