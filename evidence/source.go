package evidence

import (
	"fmt"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// FromOutput builds an artifact from a step's captured output. The
// executor kept a head and a tail far larger than any body budget, so the
// body's head comes from out.Head and its tail from out.Tail: the result is
// the body the streaming Builder gives for the same stream. When the output
// was not truncated, Head followed by Tail is the whole stream. FullBytes
// and FullSHA256 are the executor's out.Bytes and out.SHA256.
func FromOutput(kind Kind, step, name string, out validation.Output, budget int) Artifact {
	budget = Options{BodyBudget: budget}.budget()
	head, tail := []byte(out.Head), []byte(out.Tail)
	var total int64
	if !out.Truncated {
		whole := make([]byte, 0, len(head)+len(tail))
		whole = append(append(whole, head...), tail...)
		head, tail = whole, whole
		total = int64(len(whole))
	} else {
		total = max(out.Bytes, int64(len(head)+len(tail)))
		if len(tail) == 0 {
			tail = head[:0]
		}
	}
	// Only the first and last budget bytes can reach the body.
	if len(head) > budget {
		head = head[:budget]
	}
	if len(tail) > budget {
		tail = tail[len(tail)-budget:]
	}
	a := assemble(head, tail, total, budget)
	a.Kind, a.Step, a.Name = kind, step, name
	// The executor's count and hash describe the stream as it was read
	// (before redaction); they are the record of the full output.
	if out.Bytes > 0 || out.SHA256 != "" {
		a.FullBytes = out.Bytes
	}
	a.FullSHA256 = out.SHA256
	return a
}

// hasOutput reports whether the executor captured any output for a step.
func hasOutput(r validation.StepResult) bool {
	return r.Output.Bytes > 0 || r.Output.Head != "" || r.Output.Tail != ""
}

// ran reports whether a step was started at all.
func ran(r validation.StepResult) bool {
	return r.Status != validation.StatusNotRun && r.Status != validation.StatusInconclusive
}

// FromStepResult builds the artifact for one step: its output under the
// step's kind (install → log) when output was captured, otherwise a
// summary log of what the executor observed. ok is false for steps that
// never ran (not run, inconclusive): they have nothing to show.
func FromStepResult(r validation.StepResult, budget int) (a Artifact, ok bool) {
	if !ran(r) {
		return Artifact{}, false
	}
	if hasOutput(r) {
		return FromOutput(KindFor(r), r.Name, r.Name+".log", r.Output, budget), true
	}
	a = textArtifact(KindLog, r.Name, r.Name+"-summary.txt", summaryText([]validation.StepResult{r}), budget)
	return a, true
}

// BuildArtifacts builds the artifacts of a run: one per step that ran.
// When no step has captured output (the executor returned only
// summaries), a run-wide summary log is added.
func BuildArtifacts(results []validation.StepResult, budget int) []Artifact {
	var out []Artifact
	full := false
	for _, r := range results {
		a, ok := FromStepResult(r, budget)
		if !ok {
			continue
		}
		full = full || hasOutput(r)
		out = append(out, a)
	}
	if !full && len(results) > 0 {
		out = append(out, SummaryLog(results, budget))
	}
	return out
}

// SummaryLog is a run-wide log of how each step ended, for executors that
// report summaries rather than transcripts.
func SummaryLog(results []validation.StepResult, budget int) Artifact {
	return textArtifact(KindLog, "", "summary.txt", summaryText(results), budget)
}

func textArtifact(kind Kind, step, name, text string, budget int) Artifact {
	b := NewBuilder(kind, step, name, budget)
	b.add([]byte(text))
	return b.Artifact()
}

func summaryText(results []validation.StepResult) string {
	var sb strings.Builder
	sb.WriteString("gilf validation summary (no full transcript was captured)\n")
	for _, r := range results {
		fmt.Fprintf(&sb, "\nstep: %s\nstatus: %s\n", r.Name, r.Status)
		if len(r.Argv) > 0 {
			fmt.Fprintf(&sb, "command: %q\n", r.Argv)
		}
		if r.ExitCode != nil {
			fmt.Fprintf(&sb, "exit code: %d\n", *r.ExitCode)
		}
		if r.Signal != "" {
			fmt.Fprintf(&sb, "signal: %s\n", r.Signal)
		}
		fmt.Fprintf(&sb, "duration ms: %d\n", r.DurationMs)
		if r.Reason != "" {
			fmt.Fprintf(&sb, "reason: %q\n", r.Reason)
		}
		fmt.Fprintf(&sb, "output bytes: %d\n", r.Output.Bytes)
		if r.Output.SHA256 != "" {
			fmt.Fprintf(&sb, "output sha256: %s\n", r.Output.SHA256)
		}
		if r.Reported {
			sb.WriteString("status reported by the executor's markers\n")
		}
	}
	return sb.String()
}
