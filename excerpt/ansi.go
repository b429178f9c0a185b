package excerpt

import "unicode/utf8"

// StripANSI removes ANSI/VT escape sequences from s: CSI sequences (SGR
// colours among them), OSC, DCS, SOS, PM and APC strings up to BEL or ST
// (or the end of the line, so that an unterminated one cannot swallow the
// rest of the output), charset selections and any other ESC sequence, and a
// lone ESC. A carriage return that does not end a line overwrites it, as a
// terminal would show a progress line: only the text after the last one
// stays. Other control characters except tab and newline are dropped, and
// invalid UTF-8 becomes U+FFFD. The result never contains ESC.
func StripANSI(s string) string {
	b := make([]byte, 0, len(s))
	lineStart := 0 // offset in b of the current line's first byte
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			i = skipEscape(s, i)
			continue
		case c == '\r':
			i++
			if i < len(s) && s[i] == '\n' || i == len(s) {
				continue // a line ending, not an overwrite
			}
			b = b[:lineStart] // the text after the \r overwrites the line
			continue
		case c == '\n':
			b = append(b, c)
			lineStart = len(b)
			i++
			continue
		case c == '\t':
			b = append(b, c)
			i++
			continue
		case c < 0x20 || c == 0x7f:
			i++
			continue
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b = utf8.AppendRune(b, utf8.RuneError)
		case r >= 0x80 && r <= 0x9f: // C1 controls, 8-bit CSI among them
		default:
			b = append(b, s[i-size:i]...)
		}
	}
	return string(b)
}

// skipEscape returns the offset just past the escape sequence that starts
// with the ESC at s[i].
func skipEscape(s string, i int) int {
	i++ // ESC
	if i >= len(s) {
		return i
	}
	switch c := s[i]; {
	case c == '[': // CSI: parameters, intermediates, one final byte
		i++
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_': // strings ended by BEL or ST
		i++
		for i < len(s) {
			switch s[i] {
			case 0x07:
				return i + 1
			case '\n':
				return i
			case 0x1b:
				if i+1 < len(s) && s[i+1] == '\\' {
					return i + 2
				}
				return i
			}
			i++
		}
		return i
	case c >= 0x20 && c <= 0x2f: // intermediates (charset selects), then a final byte
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
			i++
		}
		return i
	case c >= 0x30 && c <= 0x7e: // a two-byte sequence: ESC 7, ESC M, ESC =
		return i + 1
	default: // a lone ESC
		return i
	}
}
