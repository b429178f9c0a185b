package egress

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf8"
)

// maxPackumentDepth is the deepest nesting of arrays and objects a
// packument may have: encoding/json's own limit, so that scanIntegrities
// refuses exactly the documents it refuses.
const maxPackumentDepth = 10000

// errPackument is a packument scanIntegrities cannot read: not JSON, or
// not the shape of a packument where the digests are.
var errPackument = errors.New("packument: not a JSON document of the registry's shape")

// scanIntegrities returns the sha512 a packument publishes for each
// version (versions.<version>.dist.integrity), as decoding the first
// JSON value of b with encoding/json into that shape would: the same
// answer, the same documents refused (bad syntax, nesting past
// maxPackumentDepth, a field on that path of another type), names
// matched as encoding/json matches a struct's fields, a later
// duplicate winning as there. FuzzScanIntegrities holds it to that.
//
// It reads the bytes once and skips what it does not need, where
// encoding/json reads the document twice (once to find its end, once to
// decode) through its byte-at-a-time state machine. An install whose
// lockfile names every tarball asks for no packument, so the proxy
// reads one per package, some of them megabytes: in a CPU profile of a
// first pnpm install of a real 500-package lockfile
// (BenchmarkInstallCacheRealRepo), encoding/json took about 1.2 s of
// CPU, on a 2-core worker the package manager runs on as well.
// BenchmarkScanIntegrities (3500 versions, 2.4 MB): encoding/json
// 92–100 MB/s, this 450–530 MB/s; typescript's real abbreviated
// packument (10 MB) 96 ms against 15 ms. BenchmarkInstallCacheRealRepo,
// alternated with encoding/json: pnpm's first install (500 packages) at
// load 2–3.4, gilf's CPU 2.26 s against 2.74 s and first/cold-paired
// 1.09 against 1.20 (each every time ≤ 1.12 against up to 1.27; medians
// of 4); at load 3–5, 2.46 s against 3.09 s of CPU (medians of 7).
// bun's (ds-one), 1.13 s against 1.48 s of CPU.
func scanIntegrities(b []byte) (map[string][]byte, error) {
	s := &packumentScanner{b: b}
	out := map[string][]byte{}
	s.space()
	if s.literal("null") {
		return out, nil
	}
	err := s.object(func(key []byte) error {
		if !s.fieldIs(key, "versions") {
			return s.value()
		}
		return s.versions(&out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// packumentScanner reads a JSON document from b at i; depth is the
// nesting of arrays and objects it is in.
type packumentScanner struct {
	b     []byte
	i     int
	depth int
}

// versions reads the value of "versions": an object of version objects,
// or null (which, as encoding/json sets the map to nil, forgets the
// versions read so far).
func (s *packumentScanner) versions(out *map[string][]byte) error {
	if s.literal("null") {
		*out = map[string][]byte{}
		return nil
	}
	return s.object(func(key []byte) error {
		v, err := s.text(key)
		if err != nil {
			return err
		}
		integrity, err := s.version()
		if err != nil {
			return err
		}
		// A duplicate version replaces the earlier one whole.
		if sum, err := sha512Of(integrity); err == nil {
			(*out)[v] = sum
		} else {
			delete(*out, v)
		}
		return nil
	})
}

// version reads one version's object (or null) and returns its
// dist.integrity ("" when it has none). A later "dist" or "integrity"
// overrides an earlier one only where it sets a value, as decoding into
// a struct does.
func (s *packumentScanner) version() (string, error) {
	var integrity string
	if s.literal("null") {
		return "", nil
	}
	err := s.object(func(key []byte) error {
		if !s.fieldIs(key, "dist") {
			return s.value()
		}
		if s.literal("null") {
			return nil
		}
		return s.object(func(key []byte) error {
			if !s.fieldIs(key, "integrity") {
				return s.value()
			}
			if s.literal("null") {
				return nil
			}
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return errPackument
			}
			tok, err := s.str()
			if err != nil {
				return err
			}
			integrity, err = s.text(tok)
			return err
		})
	})
	return integrity, err
}

// object reads an object at i, calling member with each key's token
// (quotes included) once i is at the key's value, which member must
// read. Anything but an object is refused.
func (s *packumentScanner) object(member func(key []byte) error) error {
	return s.list('{', '}', func() error {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return errPackument
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errPackument
		}
		s.i++
		s.space()
		return member(key)
	})
}

// value skips one JSON value at i, checking its syntax.
func (s *packumentScanner) value() error {
	if s.i >= len(s.b) {
		return errPackument
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func([]byte) error { return s.value() })
	case c == '[':
		return s.list('[', ']', s.value)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case s.literal("true"), s.literal("false"), s.literal("null"):
		return nil
	}
	return errPackument
}

// list reads an array or an object at i, from open to close, calling
// item at each element (or member) to read it.
func (s *packumentScanner) list(open, close byte, item func() error) error {
	if s.i >= len(s.b) || s.b[s.i] != open {
		return errPackument
	}
	if err := s.push(); err != nil {
		return err
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := item(); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return errPackument
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case close:
			s.i++
			s.depth--
			return nil
		default:
			return errPackument
		}
	}
}

// push enters an array or object.
func (s *packumentScanner) push() error {
	s.depth++
	if s.depth > maxPackumentDepth {
		return errors.New("packument: nested deeper than maxPackumentDepth")
	}
	return nil
}

// plainByte marks the bytes a string may hold as they are: not a quote,
// a backslash, a control character or the start of a multi-byte one.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string at i and returns its token, quotes included.
func (s *packumentScanner) str() ([]byte, error) {
	start := s.i
	s.i++
	for {
		// Eight bytes at a time while none is a quote, a backslash
		// or a control character (most of a packument is strings: a
		// byte at a time was half the scan).
		for s.i+8 <= len(s.b) && !specialWord(binary.LittleEndian.Uint64(s.b[s.i:])) {
			s.i += 8
		}
		for s.i < len(s.b) && plainByte[s.b[s.i]] {
			s.i++
		}
		if s.i >= len(s.b) {
			return nil, errPackument
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start:s.i], nil
		case c == '\\':
			if err := s.escape(); err != nil {
				return nil, err
			}
		case c < 0x20:
			return nil, errPackument
		default: // a byte of a multi-byte character, as it comes
			s.i++
		}
	}
}

// specialWord reports whether any of the eight bytes of w is a quote, a
// backslash or below 0x20 (the bit tricks of "Bit Twiddling Hacks":
// a byte is zero, or less than n, where a borrow reaches its top bit).
func specialWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(x uint64) uint64 { return (x - ones) & ^x & highs }
	return (zero(w^(ones*'"')) | zero(w^(ones*'\\')) | (w-ones*0x20)&^w&highs) != 0
}

// escape reads an escape sequence at i.
func (s *packumentScanner) escape() error {
	if s.i+1 >= len(s.b) {
		return errPackument
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
		if s.i+6 > len(s.b) {
			return errPackument
		}
		for _, c := range s.b[s.i+2 : s.i+6] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return errPackument
			}
		}
		s.i += 6
		return nil
	}
	return errPackument
}

// number reads a number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *packumentScanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return errPackument
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return errPackument
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return errPackument
		}
	}
	return nil
}

// digits skips decimal digits at i and returns how many.
func (s *packumentScanner) digits() int {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// literal skips word (true, false, null) when it is at i.
func (s *packumentScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// space skips JSON's white space at i.
func (s *packumentScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// text is the string a string token (quotes included) stands for. One
// with escapes or other than ASCII is decoded by encoding/json itself,
// so that it reads as there (invalid UTF-8 replaced, surrogates paired).
func (s *packumentScanner) text(tok []byte) (string, error) {
	inner := tok[1 : len(tok)-1]
	for _, c := range inner {
		if !plainByte[c] {
			var v string
			if err := json.Unmarshal(tok, &v); err != nil {
				return "", err
			}
			return v, nil
		}
	}
	return string(inner), nil
}

// fieldIs reports whether a key's token names the struct field name (a
// lower-case ASCII word) as encoding/json matches a key to a field:
// equal, or equal once both are folded (foldName).
func (s *packumentScanner) fieldIs(tok []byte, name string) bool {
	inner := tok[1 : len(tok)-1]
	plain := true
	for _, c := range inner {
		plain = plain && plainByte[c]
	}
	if plain {
		// foldName upper-cases ASCII letters only.
		if len(inner) != len(name) {
			return false
		}
		for i, c := range inner {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != name[i] {
				return false
			}
		}
		return true
	}
	key, err := s.text(tok)
	if err != nil {
		return false
	}
	return string(foldName([]byte(key))) == string(foldName([]byte(name)))
}

// foldName is encoding/json's folding of a field name: ASCII letters
// upper-cased, other characters mapped to the upper case of their lower
// case (so the Kelvin sign matches k, and ſ matches s).
func foldName(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return out
}
