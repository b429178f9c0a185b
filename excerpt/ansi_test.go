package excerpt

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStripANSI(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"empty", "", ""},
		{"sgr colour", "\x1b[31mred\x1b[39m and \x1b[1;32mbold green\x1b[0m", "red and bold green"},
		{"sgr reset without parameters", "\x1b[mx", "x"},
		{"256 colours and truecolor", "\x1b[38;5;196ma\x1b[48;2;1;2;3mb", "ab"},
		{"cursor and erase", "\x1b[2K\x1b[1Gline\x1b[?25l\x1b[?25h", "line"},
		{"osc hyperlink with bel", "\x1b]8;;https://example.com\x07link\x1b]8;;\x07 after", "link after"},
		{"osc title with st", "\x1b]0;title\x1b\\text", "text"},
		{"osc unterminated stops at the line's end", "\x1b]0;title\nnext", "\nnext"},
		{"dcs string", "\x1bPq#0;2;0;0;0\x1b\\x", "x"},
		{"charset select", "\x1b(Bx\x1b)0y", "xy"},
		{"two-byte escapes", "\x1b7a\x1b8\x1bMb\x1b=c", "abc"},
		{"lone esc at the end", "abc\x1b", "abc"},
		{"esc before a control", "a\x1b\nb", "a\nb"},
		{"unterminated csi", "x\x1b[31", "x"},
		{"csi with an invalid byte drops up to it", "\x1b[31\x01m", "m"},
		{"c1 csi rune", "a\u009b31mb", "a31mb"},
		{"progress overwritten by cr", "10%\r50%\r100%\ndone", "100%\ndone"},
		{"crlf is a line ending", "a\r\nb\r\n", "a\nb\n"},
		{"cr at the very end", "a\r", "a"},
		{"cr keeps earlier lines", "one\ntwo\rTWO\nthree", "one\nTWO\nthree"},
		{"coloured progress", "\x1b[32m1/3\x1b[0m\r\x1b[32m3/3\x1b[0m\n", "3/3\n"},
		{"controls dropped, tab kept", "a\a\bb\tc\x00d\x7fe", "ab\tcde"},
		{"invalid utf-8", "a\xffb\xc3", "a\uFFFDb\uFFFD"},
		{"multibyte kept", "✖ ● ❯ › ⎯ café", "✖ ● ❯ › ⎯ café"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StripANSI(tt.in)
			if got != tt.want {
				t.Errorf("StripANSI(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStripANSIHostile(t *testing.T) {
	inputs := map[string]string{
		"1 MB of ESC [":         strings.Repeat("\x1b[", 1<<19),
		"1 MB of CR":            strings.Repeat("ab\r", 1<<18),
		"1 MB unterminated OSC": "\x1b]" + strings.Repeat("x", 1<<20),
		"1 MB of invalid bytes": strings.Repeat("\xff\xfe\x1b", 1<<18),
		"ESC ESC ESC":           strings.Repeat("\x1b", 1<<20),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			got := StripANSI(in)
			if strings.ContainsRune(got, 0x1b) || !utf8.ValidString(got) {
				t.Errorf("result has ESC or is not UTF-8")
			}
			if len(got) > 3*len(in) {
				t.Errorf("result is %d bytes from %d", len(got), len(in))
			}
		})
	}
}
