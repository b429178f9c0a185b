package validation

import (
	"fmt"
	"slices"
	"strings"
)

// MaxScriptBytes is the longest script a plan runs: the longest single
// argument Linux passes to exec (MAX_ARG_STRLEN, 128 KiB, counts the
// terminating NUL). npm hands the script to `sh -c` as one argument, so a
// longer one can only fail with E2BIG, which says nothing about the code.
const MaxScriptBytes = 128<<10 - 1

// Reasons a script is inconclusive before it runs.
const (
	reasonNPMDefaultTest = "npm's default test script: it prints \"Error: no test specified\" and exits 1, so it tests nothing"
	reasonOnlySucceeds   = "the script can only succeed: it runs nothing but %s"
	reasonTooLong        = "script too long: %d bytes, over the %d-byte limit of one exec argument (Linux MAX_ARG_STRLEN)"
)

// InconclusiveReason says why a package.json script can prove nothing
// before it is run, or returns "" when it may. Matching is conservative: a
// script is called inconclusive only when a small, quote-aware reading
// shows it is npm's default test (`echo "Error: no test specified" &&
// exit 1`, in any quoting or spacing) or a list of commands that can only
// succeed (`true`, `:`, `exit`, `exit 0`, `echo …`) joined by `&&`, `;` or
// newlines. Anything the reading does not fully understand — a pipe, a
// redirect, `$`, a backquote, a backslash, a glob — counts as real work.
// echo, true, `:` and exit are shell builtins, so a dependency's binary in
// node_modules/.bin cannot stand in for them.
func InconclusiveReason(script string) string {
	if len(script) > MaxScriptBytes {
		return fmt.Sprintf(reasonTooLong, len(script), MaxScriptBytes)
	}
	cmds, ok := splitSimpleCommands(script)
	if !ok || len(cmds) == 0 {
		return ""
	}
	if isNPMDefaultTest(cmds) {
		return reasonNPMDefaultTest
	}
	var used []string
	for _, c := range cmds {
		name, ok := noOpName(c.words)
		if !ok {
			return ""
		}
		if !slices.Contains(used, name) {
			used = append(used, name)
		}
	}
	return fmt.Sprintf(reasonOnlySucceeds, strings.Join(used, ", "))
}

// simpleCommand is one command of a list, with the operator that joins it
// to the previous one ("" for the first).
type simpleCommand struct {
	op    string
	words []string
}

// splitSimpleCommands reads script as a list of simple commands joined by
// `&&`, `;` or newlines, with words in single or double quotes. ok is false
// for anything else: the caller then treats the script as real work.
func splitSimpleCommands(script string) (cmds []simpleCommand, ok bool) {
	var s commandSplitter
	for i := 0; i < len(script); i++ {
		if i, ok = s.read(script, i); !ok {
			return nil, false
		}
	}
	s.endWord()
	if len(s.cur.words) > 0 {
		if !s.endCommand("") {
			return nil, false
		}
		return s.cmds, true
	}
	// The script ended without a command after the last operator: fine
	// after `;` or a newline, a syntax error after `&&`.
	return s.cmds, s.pending != "&&"
}

// commandSplitter is splitSimpleCommands' state: the commands read so
// far, the one being read and its word.
type commandSplitter struct {
	cmds    []simpleCommand
	cur     simpleCommand
	word    strings.Builder
	inWord  bool
	pending string // operator seen, waiting for its command
}

// read takes in the byte of script at i (and what it starts: a quoted
// word, an operator), returning the index of the last byte it took; ok
// is false when the script is not a list of simple commands.
func (s *commandSplitter) read(script string, i int) (last int, ok bool) {
	c := script[i]
	switch {
	case c == ' ' || c == '\t':
		s.endWord()
	case c == '\n' && len(s.cur.words) == 0 && !s.inWord:
		// A blank line, or a line break after `&&` or `;`: sh reads on.
	case c == '\n' || c == ';':
		return i, s.endCommand(";") // false: `;` with no command before it
	case c == '&':
		if i+1 >= len(script) || script[i+1] != '&' {
			return i, false // background job
		}
		return i + 1, s.endCommand("&&")
	case c == '\'' || c == '"':
		return s.quoted(script, i)
	case plainShellByte(c):
		s.word.WriteByte(c)
		s.inWord = true
	default:
		return i, false
	}
	return i, true
}

// quoted reads the quoted part of a word that starts at script[i], its
// opening quote, and returns the index of its closing quote.
func (s *commandSplitter) quoted(script string, i int) (last int, ok bool) {
	q := script[i]
	end := strings.IndexByte(script[i+1:], q)
	if end < 0 {
		return i, false
	}
	body := script[i+1 : i+1+end]
	if q == '"' && strings.ContainsAny(body, "$`\\") {
		return i, false // expansion or escapes: real work, maybe
	}
	s.word.WriteString(body)
	s.inWord = true
	return i + end + 1, true
}

func (s *commandSplitter) endWord() {
	if s.inWord {
		s.cur.words = append(s.cur.words, s.word.String())
		s.word.Reset()
		s.inWord = false
	}
}

// endCommand ends the command being read at operator op; false when
// there is none.
func (s *commandSplitter) endCommand(op string) bool {
	s.endWord()
	if len(s.cur.words) == 0 {
		// An operator with no command before it (`; true`, `true;;`,
		// `&& true`) is a syntax error in sh.
		return false
	}
	s.cur.op = s.pending
	s.cmds = append(s.cmds, s.cur)
	s.cur = simpleCommand{}
	s.pending = op
	return true
}

// plainShellByte is a byte that means nothing special to sh outside quotes.
// Bytes of multi-byte UTF-8 characters are plain.
func plainShellByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c >= 0x80:
		return true
	}
	return strings.IndexByte("-_.,:/+@%^", c) >= 0
}

// isNPMDefaultTest matches npm's default test script
// `echo "Error: no test specified" && exit 1` in any quoting or spacing.
func isNPMDefaultTest(cmds []simpleCommand) bool {
	if len(cmds) != 2 || (cmds[1].op != "&&" && cmds[1].op != ";") {
		return false
	}
	echo, exit := cmds[0].words, cmds[1].words
	if len(echo) < 2 || echo[0] != "echo" || len(exit) != 2 || exit[0] != "exit" || exit[1] != "1" {
		return false
	}
	msg := strings.Join(strings.Fields(strings.Join(echo[1:], " ")), " ")
	return strings.EqualFold(msg, "Error: no test specified")
}

// noOpName returns the name of a command that can only succeed.
func noOpName(words []string) (string, bool) {
	switch words[0] {
	case "true", ":", "echo":
		return words[0], true
	case "exit":
		if len(words) == 1 || (len(words) == 2 && words[1] == "0") {
			return strings.Join(words, " "), true
		}
	}
	return "", false
}
