package remote

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
)

// MaxErrorBodyBytes bounds how much of an error response is read.
const MaxErrorBodyBytes = 4 << 10

// MaxErrorMessageRunes bounds the provider's message kept in an error.
const MaxErrorMessageRunes = 300

// ReadErrorBody reads at most MaxErrorBodyBytes of an error response and
// returns its code and message. parse reads the provider's error body; it
// returns ok false for a body that is not one (plain text, HTML), whose
// text is then the message. The message is cleaned (CleanMessage); the
// code is as parse returns it. A body that cannot be read gives what was
// read and why as the message.
func ReadErrorBody(resp *http.Response, parse func(body []byte) (code, msg string, ok bool)) (code, msg string) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBodyBytes))
	if err != nil {
		return "", CleanMessage(fmt.Sprintf("%s (error body unreadable: %v)", body, err))
	}
	if code, msg, ok := parse(body); ok {
		return code, CleanMessage(msg)
	}
	return "", CleanMessage(string(body))
}

// APIErrorText is the text of a provider's non-success HTTP answer:
// "<prefix>: <op>: HTTP <status>[ (<code>)][: <msg>]".
func APIErrorText(prefix, op string, status int, code, msg string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: HTTP %d", prefix, op, status)
	if code != "" {
		fmt.Fprintf(&b, " (%s)", code)
	}
	if msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	return b.String()
}

// CleanMessage keeps a provider message fit for an error string: control
// characters and invalid UTF-8 become spaces, runs of space one space,
// and at most MaxErrorMessageRunes runes are kept.
func CleanMessage(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > MaxErrorMessageRunes {
		s = string(r[:MaxErrorMessageRunes]) + "…"
	}
	return s
}
