package review

import (
	"github.com/gilf-review/gilf/excerpt"

	"fmt"
	"html"
	"strings"
	"unicode/utf8"
)

// This file holds the text rules of the review body. Everything that did
// not come from gilf's own words is untrusted: step output, script bodies,
// messages that quote package.json, versions printed inside a sandbox.
// Untrusted text is made safe in two ways:
//
//   - block text (output, finding bodies) goes in a fence longer than any
//     backtick run inside it, so it cannot close the fence;
//   - inline text (reasons, notes, titles) has its markdown and HTML
//     escaped and its newlines folded.
//
// Both also get the same rules: invalid UTF-8 becomes U+FFFD; control
// characters and bidi or invisible format characters are shown as escapes
// (`\x1b`, `\u202e`). Inline text also has its @mentions and #references
// neutralised with a zero-width space (a backslash does not stop a GitHub
// mention). Block text is not touched there: GitHub links no mention or
// reference inside a code block, which its fence guarantees it stays in,
// and a character inserted into `@polka/url` would break copy and paste.

const zwsp = "\u200b"

// visibleRune returns the visible escape of a rune that must not reach the
// page as is, or "" when r may stay.
func visibleRune(r rune) string {
	switch {
	case r == '\n' || r == '\t':
		return ""
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r)
	case r >= 0x80 && r <= 0x9f: // C1 controls
		return fmt.Sprintf(`\u%04x`, r)
	case r >= 0x202a && r <= 0x202e, // bidi embeddings and overrides
		r >= 0x2066 && r <= 0x2069,                               // bidi isolates
		r == 0x200e || r == 0x200f || r == 0x061c,                // direction marks
		r == 0x200b || r == 0x200c || r == 0x2060 || r == 0xfeff: // invisible
		return fmt.Sprintf(`\u%04x`, r)
	}
	return ""
}

// sanitize applies the rules every untrusted string gets: valid UTF-8,
// CRLF folded to LF, controls and bidi made visible, mentions and
// references neutralised.
func sanitize(s string) string { return sanitizeText(s, true) }

// sanitizeText is sanitize, neutralising mentions and references only
// when neutralise is set (inline text; block text sits in a fence).
func sanitizeText(s string, neutralise bool) string {
	s = strings.ToValidUTF8(s, "\ufffd")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s) + len(s)/16)
	var prev rune = '\n'
	start := 0 // s[start:i] is safe and not yet written
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && (c != '@' && c != '#' || !neutralise) {
			prev = rune(c)
			i++
			continue // the common case: plain printable ASCII
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		v := visibleRune(r)
		switch {
		case v != "":
			b.WriteString(s[start:i])
			b.WriteString(v)
			start = i + size
			prev = 'x'
		case r == '#' && refFollows(s[i+1:]):
			// #123 and owner/repo#123 link and notify another thread.
			b.WriteString(s[start:i])
			b.WriteString(zwsp)
			start = i
			prev = r
		case r == '@' && mentionFollows(s[i+1:]) && !isWordRune(prev):
			// @user and @org/team ping people; emails (a@b) do not.
			b.WriteString(s[start : i+1])
			b.WriteString(zwsp)
			start = i + 1
			prev = r
		default:
			prev = r
		}
		i += size
	}
	b.WriteString(s[start:])
	return b.String()
}

// sanitizeOutput is sanitize for what a step printed, which goes in a
// fence: terminal escapes are removed first (colours become plain text),
// then the rest is made visible; mentions are left as printed (inert in
// a code block).
func sanitizeOutput(s string) string { return sanitizeText(excerpt.StripANSI(s), false) }

// isWordRune is GitHub's \w: a mention needs a non-word rune before its @.
func isWordRune(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

func mentionFollows(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

func refFollows(s string) bool {
	return s != "" && s[0] >= '0' && s[0] <= '9'
}

// longestRun is the longest run of c in s.
func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// fence puts untrusted block text in a code fence no line of it can close.
// The text must already be sanitized (so it holds no control characters).
func fence(s string) string {
	ticks := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	s = strings.TrimRight(s, "\n")
	return ticks + "text\n" + s + "\n" + ticks + "\n"
}

// inline makes untrusted text safe to sit in a paragraph, a list item or a
// table cell: sanitized, one line, markdown and HTML inert.
func inline(s string) string {
	return finishInline(escapeInline(sanitize(s)))
}

// prose is inline for text that may mark code with single backticks
// ("`npm run test` failed"): each pair becomes a code span, everything
// else is escaped. Text with an odd number of backticks is escaped whole.
func prose(s string) string {
	parts := strings.Split(sanitize(s), "`")
	if len(parts)%2 == 0 {
		return inline(s)
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 && strings.TrimSpace(p) != "" {
			b.WriteString(codeSpan(p))
			continue
		}
		if i%2 == 1 {
			p = "`" + p + "`"
		}
		b.WriteString(escapeInline(p))
	}
	return finishInline(b.String())
}

// escapeInline escapes sanitized text for inline markdown.
func escapeInline(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\n', '\t':
			b.WriteByte(' ')
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\\', '`', '*', '_', '[', ']', '|', '~', '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// finishInline trims escaped inline text, keeps a leading marker from
// starting a heading or list, and stops autolinks.
func finishInline(s string) string {
	out := strings.TrimSpace(s)
	if out != "" && strings.ContainsRune("#-+=", rune(out[0])) {
		out = `\` + out
	}
	// No autolinks from untrusted text: a URL to another issue would
	// cross-reference it, any other is a link the bot did not choose.
	return strings.NewReplacer("://", ":"+zwsp+"//", "www.", "www"+zwsp+".").Replace(out)
}

// code renders untrusted text as one inline code span, safe in a table
// cell: sanitized, one line, delimited by more backticks than it holds,
// pipes escaped for the table parser.
func code(s string) string {
	return codeSpan(sanitize(s))
}

// codeSpan is code for text already sanitized.
func codeSpan(s string) string {
	s = strings.NewReplacer("\n", `\n`, "\t", " ", "|", `\|`).Replace(s)
	if s == "" {
		return "—"
	}
	ticks := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return ticks + s + ticks
}

// shellJoin shows an argv the way a person would type it.
func shellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

// cutMiddle keeps at most limit bytes of s, a quarter from the head and
// the rest from the tail (the end of a failing run is where the failure
// is), cut on rune boundaries with a line saying what was cut.
func cutMiddle(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	if limit <= 0 {
		return fmt.Sprintf("[gilf cut all %d characters of this text to fit the review]", len(s)), true
	}
	headN := runeStart(s, limit/4)
	tailN := runeStart(s, len(s)-(limit-limit/4))
	// Prefer whole lines when a line break is near.
	if i := strings.LastIndexByte(s[:headN], '\n'); i >= 0 && i+1 > headN/2 {
		headN = i + 1
	}
	if i := strings.IndexByte(s[tailN:], '\n'); i >= 0 && i < (limit-limit/4)/4 && tailN+i+1 < len(s) {
		tailN += i + 1
	}
	cut := tailN - headN
	head := strings.TrimSuffix(s[:headN], "\n")
	return head + fmt.Sprintf("\n[… gilf cut %d characters here to fit the review …]\n", cut) + s[tailN:], true
}

// runeStart moves i back to the start of the rune it is inside.
func runeStart(s string, i int) int {
	i = max(0, min(i, len(s)))
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// htmlText makes untrusted text safe inside an HTML element.
func htmlText(s string) string {
	return html.EscapeString(strings.ReplaceAll(sanitize(s), "\n", " "))
}

// safeMarker keeps what may appear inside the hidden HTML comment.
func safeMarker(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		}
	}
	out := b.String()
	for strings.Contains(out, "--") { // "--" may not appear in a comment
		out = strings.ReplaceAll(out, "--", "-")
	}
	return strings.Trim(out, "-.")
}
