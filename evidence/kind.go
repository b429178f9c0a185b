package evidence

import (
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// Kind names what an artifact holds. The list is closed: a key's kind
// segment is always one of these.
type Kind string

const (
	KindTestOutput      Kind = "test-output"
	KindTypecheckOutput Kind = "typecheck-output"
	KindLintOutput      Kind = "lint-output"
	KindBuildOutput     Kind = "build-output"
	KindLog             Kind = "log"
	KindTrace           Kind = "trace"
	KindScreenshot      Kind = "screenshot"
)

// Kinds lists every kind, in the order the review shows them.
func Kinds() []Kind {
	return []Kind{
		KindTestOutput, KindTypecheckOutput, KindLintOutput, KindBuildOutput,
		KindLog, KindTrace, KindScreenshot,
	}
}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindTestOutput, KindTypecheckOutput, KindLintOutput, KindBuildOutput,
		KindLog, KindTrace, KindScreenshot:
		return true
	}
	return false
}

// KindForStep maps a plan step name to the kind of its output artifact.
// The install step, and any name outside the plan's fixed list, is a log.
func KindForStep(step string) Kind {
	switch step {
	case validation.StepTest:
		return KindTestOutput
	case validation.StepTypecheck:
		return KindTypecheckOutput
	case validation.StepLint:
		return KindLintOutput
	case validation.StepBuild:
		return KindBuildOutput
	}
	return KindLog
}

// KindFor maps a step result to the kind of its output artifact.
func KindFor(r validation.StepResult) Kind { return KindForStep(r.Name) }

func checkKind(k Kind) error {
	if !k.Valid() {
		return fmt.Errorf("unknown artifact kind %q", string(k))
	}
	return nil
}
