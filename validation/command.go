package validation

import (
	"strings"
	"unicode"
)

// Commands a pull-request comment can give gilf (issue 33): its first line
// is "/gilf <command>" or "@<app slug> <command>".
const (
	CommandRerun   = "rerun"   // validate the head again, as Re-run does
	CommandReview  = "review"  // the semantic review of the whole pull request again
	CommandExplain = "explain" // post one step's full excerpt
	CommandHelp    = "help"
	// CommandUnknown is a comment addressed to gilf with a word it does
	// not know: answered with the help.
	CommandUnknown = "unknown"
)

// CommandPrefix is the slash form every installation answers to.
const CommandPrefix = "/gilf"

// MaxCommandLineBytes bounds the first line read as a command; a longer
// one is not a command.
const MaxCommandLineBytes = 200

// Command is a parsed command.
type Command struct {
	Name string // one of the Command* names
	// Arg is what follows the command word (explain's step), trimmed.
	Arg string
	// Word is the command word as written (for CommandUnknown's answer).
	Word string
}

// ParseCommand reads a comment's first line as a command addressed to
// gilf: "/gilf <command> [arg]" or "@<slug> <command> [arg]" (slug is the
// App's, without "[bot]"; empty accepts the slash form only), in any
// letter case. ok is false when the comment is not addressed to gilf.
// "/gilf" alone is help.
func ParseCommand(body, slug string) (Command, bool) {
	line, _, _ := strings.Cut(strings.TrimLeftFunc(body, unicode.IsSpace), "\n")
	line = strings.TrimSpace(line)
	if len(line) > MaxCommandLineBytes {
		return Command{}, false
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return Command{}, false
	}
	to := strings.ToLower(fields[0])
	if to != CommandPrefix && (slug == "" || to != "@"+strings.ToLower(slug)) {
		return Command{}, false
	}
	if len(fields) == 1 {
		return Command{Name: CommandHelp, Word: CommandHelp}, true
	}
	c := Command{Word: fields[1], Arg: strings.Join(fields[2:], " ")}
	switch w := strings.ToLower(fields[1]); w {
	case CommandRerun, CommandReview, CommandExplain, CommandHelp:
		c.Name = w
	default:
		c.Name = CommandUnknown
	}
	return c, true
}

// Statuses of a command delivery after intake queued it: the command
// worker holds it (running), then answered it (done: whatever it said,
// a refusal included) or dropped it unanswered (ignored).
const (
	DeliveryRunning DeliveryStatus = "running"
	DeliveryDone    DeliveryStatus = "done"
)
