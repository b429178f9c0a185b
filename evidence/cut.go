package evidence

import "unicode/utf8"

// MaxEscapeSequenceBytes bounds how long an ANSI escape sequence (CSI, OSC,
// DCS, …) may run before the cutter stops treating it as one. Without the
// bound a stray "ESC ]" would make the whole head one unterminated
// sequence and cut it away.
const MaxEscapeSequenceBytes = 4096

const esc = 0x1b

// ansiState is where a small ECMA-48 recogniser stands after some bytes.
type ansiState uint8

const (
	ansiGround   ansiState = iota
	ansiEsc                // after ESC
	ansiInter              // ESC + intermediate bytes, waiting for a final byte
	ansiCSI                // ESC [ parameters…
	ansiString             // ESC ] / P / X / ^ / _ … until BEL or ESC \
	ansiStringEs           // ESC seen inside a string
)

// ansiScanner tracks whether a position falls inside an escape sequence.
// A sequence cancelled by the ESC of another is one unfinished run with
// it: cutting between them would leave the first one open, and a terminal
// would swallow what follows the cut into it.
type ansiScanner struct {
	state ansiState
	start int // index of the ESC that opened the current run
}

// step consumes byte c at index i.
func (s *ansiScanner) step(c byte, i int) {
	if s.state != ansiGround && i-s.start >= MaxEscapeSequenceBytes {
		s.state = ansiGround // too long to be a real sequence
	}
	switch s.state {
	case ansiGround:
		if c == esc {
			s.state, s.start = ansiEsc, i
		}
	case ansiEsc:
		switch {
		case c == '[':
			s.state = ansiCSI
		case c == ']', c == 'P', c == 'X', c == '^', c == '_':
			s.state = ansiString
		case c == esc: // still one unfinished run of sequences
		case c >= 0x20 && c <= 0x2f:
			s.state = ansiInter
		default: // a final byte ends a two-byte sequence; anything else aborts it
			s.state = ansiGround
		}
	case ansiInter:
		switch {
		case c == esc:
			s.state = ansiEsc
		case c >= 0x20 && c <= 0x2f:
		default:
			s.state = ansiGround
		}
	case ansiCSI:
		switch {
		case c == esc:
			s.state = ansiEsc
		case c >= 0x20 && c <= 0x3f:
		default: // final byte 0x40–0x7e, or an abort
			s.state = ansiGround
		}
	case ansiString:
		switch c {
		case 0x07:
			s.state = ansiGround
		case esc:
			s.state = ansiStringEs
		}
	case ansiStringEs:
		switch c {
		case '\\':
			s.state = ansiGround
		case esc:
		default: // the ESC opened a new sequence that aborts the string
			s.state = ansiEsc
			s.step(c, i)
		}
	}
}

// cutHead returns h' <= h such that b[:h'] ends on a rune boundary, outside
// any escape sequence, and not between the CR and LF of a CRLF. b is the
// stream from its first byte; bytes past h are only looked at for CRLF.
func cutHead(b []byte, h int) int {
	h = min(h, len(b))
	var s ansiScanner
	for i := range h {
		s.step(b[i], i)
	}
	if s.state != ansiGround {
		h = s.start
	}
	h = runeStartAtOrBefore(b, h)
	if h > 0 && h < len(b) && b[h-1] == '\r' && b[h] == '\n' {
		h--
	}
	return h
}

// runeStartAtOrBefore moves h back so that b[:h] does not end inside a
// multi-byte rune.
func runeStartAtOrBefore(b []byte, h int) int {
	for i := h - 1; i >= 0 && i >= h-utf8.UTFMax; i-- {
		c := b[i]
		if c&0xc0 == 0x80 {
			continue // continuation byte
		}
		if c >= 0xc0 {
			need := 2
			switch {
			case c >= 0xf0:
				need = 4
			case c >= 0xe0:
				need = 3
			}
			if i+need > h {
				return i
			}
		}
		return h
	}
	return h
}

// cutTail returns t' >= t such that b[t':] starts on a rune boundary,
// outside any escape sequence, and not on the LF of a CRLF. b is a window
// ending at the stream's last byte; the escape state is recovered by
// scanning the window from its start.
func cutTail(b []byte, t int) int {
	t = max(0, min(t, len(b)))
	var s ansiScanner
	for i := range t {
		s.step(b[i], i)
	}
	if s.state != ansiGround {
		for t < len(b) && s.state != ansiGround {
			s.step(b[t], t)
			t++
		}
		if s.state != ansiGround {
			return len(b) // the sequence never ends: keep none of it
		}
	}
	for n := 0; t < len(b) && n < utf8.UTFMax-1 && b[t]&0xc0 == 0x80; n++ {
		t++
	}
	if t > 0 && t < len(b) && b[t-1] == '\r' && b[t] == '\n' {
		t++
	}
	return t
}
