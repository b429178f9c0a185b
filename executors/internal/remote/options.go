package remote

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// DurationOption is one duration setting of an executor: its name for
// messages, where it is, and its default.
type DurationOption struct {
	Name string
	V    *time.Duration
	Def  time.Duration
}

// DefaultDurations sets each zero option to its default and returns one
// error per negative option ("<prefix> <name> <value> is negative"),
// which it leaves as it is.
func DefaultDurations(prefix string, opts ...DurationOption) []error {
	var errs []error
	for _, d := range opts {
		switch {
		case *d.V < 0:
			errs = append(errs, fmt.Errorf("%s %s %v is negative", prefix, d.Name, *d.V))
		case *d.V == 0:
			*d.V = d.Def
		}
	}
	return errs
}

// Logger is l, or a logger that discards everything when l is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// SecretNames lists the names of secrets, each once, sorted; secrets
// without a name are left out.
func SecretNames(secrets []validation.Secret) []string {
	var names []string
	for _, s := range secrets {
		if s.Name != "" && !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names
}

// Limits every remote sandbox executor shares.
const (
	// MaxShellBytes bounds one step's shell, which travels as one command
	// argument (Linux's MAX_ARG_STRLEN is 128 KiB); longer is refused.
	MaxShellBytes = 64 << 10
	// KillAttempts is how often destroying a sandbox is tried when the
	// provider answers with a temporary error.
	KillAttempts = 3
	// SetupOutputBytes is how much of the setup command's output is kept
	// to read the platform and explain a failure.
	SetupOutputBytes = 8 << 10
)
