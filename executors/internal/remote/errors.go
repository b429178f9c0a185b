package remote

import (
	"context"
	"errors"
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

// Sentinels for errors.Is, one set for every sandbox API executor. Every
// error of an executor that is not a refusal is an infrastructure error:
// the job retries it, it is never a test failure.
var (
	// ErrUnauthorized: the provider refused the executor's credential.
	ErrUnauthorized = errors.New("remote sandbox: unauthorized")
	// ErrRateLimited: the provider's rate or capacity limit was reached.
	ErrRateLimited = errors.New("remote sandbox: rate limited")
	// ErrStreamBroken: a process's output stream ended without its end,
	// or with a malformed frame or event.
	ErrStreamBroken = errors.New("remote sandbox: stream broken")
)

// Class is what a provider's classification makes of one of its error
// answers: which sentinels it matches, and whether a retry may succeed.
type Class uint8

const (
	Unauthorized Class = 1 << iota // matches ErrUnauthorized
	RateLimited                    // matches ErrRateLimited
	Temporary                      // retrying later may succeed
)

// Is reports whether an error of class c matches target.
func (c Class) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return c&Unauthorized != 0
	case ErrRateLimited:
		return c&RateLimited != 0
	}
	return false
}

// APIError is a non-success HTTP answer of a provider's API, before any
// stream framing.
type APIError struct {
	// Prefix names the executor in the message ("e2b", "cf-sandbox").
	Prefix string
	// Op names the call ("create sandbox", "upload archive", …).
	Op     string
	Status int
	// Code is the body's machine-readable code when it had one.
	Code string
	// Msg is the body's message, shortened and stripped of control
	// characters.
	Msg string
	// Class is the provider's classification of Status and Code.
	Class Class
}

func (e *APIError) Error() string {
	return APIErrorText(e.Prefix, e.Op, e.Status, e.Code, e.Msg)
}

// Is matches the sentinels of e's Class.
func (e *APIError) Is(target error) bool { return e.Class.Is(target) }

// Temporary reports whether retrying later may succeed.
func (e *APIError) Temporary() bool { return e.Class&Temporary != 0 }

// ErrorReader is how one provider reads and classifies its error
// answers.
type ErrorReader struct {
	Prefix string
	// Parse reads the provider's error body (see ReadErrorBody).
	Parse func(body []byte) (code, msg string, ok bool)
	// Classify classifies an answer by its status and code.
	Classify func(status int, code string) Class
}

// Read reads resp, the non-success answer to op, into an *APIError.
func (r ErrorReader) Read(op string, resp *http.Response) *APIError {
	e := &APIError{Prefix: r.Prefix, Op: op, Status: resp.StatusCode}
	e.Code, e.Msg = ReadErrorBody(resp, r.Parse)
	e.Class = r.Classify(e.Status, e.Code)
	return e
}

// TemporaryAPIError reports whether err is an *APIError worth retrying.
func TemporaryAPIError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Temporary()
}

// StreamError is a process's output stream that broke: cut before its
// end, a truncated or oversized frame, no end event. It matches
// ErrStreamBroken and is always temporary: a broken connection may hold
// on a retry.
type StreamError struct {
	Prefix string // names the executor ("e2b")
	Stream string // names the stream ("process", "exec")
	Op     string // the call, when known
	Reason string
}

func (e *StreamError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("%s: %s stream broken: %s", e.Prefix, e.Stream, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s stream broken: %s", e.Prefix, e.Op, e.Stream, e.Reason)
}

// Is matches ErrStreamBroken.
func (e *StreamError) Is(target error) bool { return target == ErrStreamBroken }

// Temporary is always true.
func (e *StreamError) Temporary() bool { return true }

// StreamFailed is the error of op whose stream read failed with err: ctx's
// error when ctx ended (the cut was the host's), else err with op named
// in a *StreamError that had none.
func StreamFailed(ctx context.Context, prefix, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %s: %w", prefix, op, cerr)
	}
	var se *StreamError
	if errors.As(err, &se) && se.Op == "" {
		se.Op = op
	}
	return err
}

// NotConfiguredError is returned by an executor's New when a required
// setting is missing: the executor is then left out of the configured
// set, Select refuses executor_unconfigured, and nothing runs.
type NotConfiguredError struct {
	Executor string   // "managed-e2b"
	Missing  []string // setting names
}

func (e *NotConfiguredError) Error() string {
	return e.Executor + " is not configured: " + strings.Join(e.Missing, " and ") + " not set"
}
