package review

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// This file renders the validation record of SPEC §3.5: executor, tier,
// package manager, platform, the per-step table, step output, notes and
// evidence.

func tierWords(t validation.Tier) string {
	switch t {
	case validation.TierReadOnly:
		return "no network, hidden home, read-only root, cgroup limits"
	case validation.TierNoNetwork:
		return "private root, read-only checkout except the workspace, private home and process space, no network; no cgroup limits"
	case validation.TierNone:
		return "no namespaces: process and path hardening only"
	case validation.TierRemote:
		return "a remote machine gilf does not observe"
	}
	return ""
}

func writeRecord(b *strings.Builder, rec validation.Record, opts RenderOptions, lim limits) {
	b.WriteString("### Validation record\n\n| | |\n|---|---|\n")
	row := func(k, v string) { b.WriteString("| " + k + " | " + v + " |\n") }
	row("Outcome", code(string(rec.Outcome)))
	if rec.Executor != "" {
		row("Executor", code(rec.Executor))
	} else {
		row("Executor", "none chosen")
	}
	if rec.IsolationTier != "" {
		tier := code(string(rec.IsolationTier))
		if w := tierWords(rec.IsolationTier); w != "" {
			tier += ": " + w
		}
		row("Isolation tier", tier)
	} else {
		row("Isolation tier", "none established (nothing ran)")
	}
	if rec.PackageManager != "" {
		pm := code(string(rec.PackageManager))
		if v := rec.Platform.PackageManagerVersion; v != "" {
			pm += " " + inline(v)
		}
		row("Package manager", pm)
	}
	if p := platformWords(rec.Platform); p != "" {
		row("Platform", p)
	}
	if !rec.Started.IsZero() {
		when := rec.Started.UTC().Format(time.RFC3339)
		if !rec.Finished.IsZero() && !rec.Finished.Before(rec.Started) {
			when += ", took " + duration(rec.Finished.Sub(rec.Started))
		}
		row("Started", when)
	}
	if rec.ReportedByExecutor {
		row("Statuses", "reported by the executor (printed markers), not observed by gilf")
	}
	if rec.Integrity != "" {
		row("Integrity", inline(rec.Integrity))
	}
	if rec.Redactions > 0 {
		row("Redactions", fmt.Sprintf("%d secret %s redacted from the output", rec.Redactions, plural(rec.Redactions, "value", "values")))
	}
	if n := len(rec.SecretsWithheld); n > 0 && opts.Operator {
		names := make([]string, n)
		for i, s := range rec.SecretsWithheld {
			names[i] = code(s)
		}
		row("Secrets withheld", strings.Join(names, ", ")+" (names only; values never entered the sandbox)")
	} else if n > 0 {
		// A count: the names are the worker's, in its log and the
		// stored record.
		row("Secrets withheld", fmt.Sprintf("%d worker %s kept out of the sandbox", n, plural(n, "secret", "secrets")))
	}
	b.WriteString("\n")
	writeSteps(b, rec.Steps)
	writeEgress(b, rec.Steps)
	writeOutputs(b, rec, lim)
	notes := slices.Clone(rec.Notes)
	for _, n := range opts.Notes {
		if !opts.Operator {
			n = publicWords(n, opts.Internals)
		}
		notes = append(notes, n)
	}
	writeNotes(b, notes)
	writeEvidence(b, rec.Steps, opts.Evidence)
}

func platformWords(p validation.Platform) string {
	var parts []string
	if p.OS != "" || p.Arch != "" {
		parts = append(parts, inline(strings.Trim(p.OS+"/"+p.Arch, "/")))
	}
	if p.Kernel != "" { // only for the operator: publicRecord leaves it out
		parts = append(parts, "kernel "+inline(p.Kernel))
	}
	if p.Node != "" {
		parts = append(parts, "node "+inline(p.Node))
	}
	return strings.Join(parts, " · ")
}

func statusLabel(s validation.StepResult) string {
	var l string
	switch s.Status {
	case validation.StatusPassed:
		l = "✅ passed"
	case validation.StatusFailed:
		l = "❌ failed"
	case validation.StatusTimedOut:
		l = "⏱️ timed out"
	case validation.StatusKilled:
		l = "💥 killed"
	case validation.StatusNotRun:
		l = "⏭️ not run"
	case validation.StatusInconclusive:
		l = "❔ inconclusive"
	default:
		l = code(string(s.Status))
	}
	if s.Reported {
		l += " (reported by the executor)"
	}
	if s.Reason != "" && !strings.EqualFold(strings.ReplaceAll(s.Reason, "_", " "), strings.ReplaceAll(string(s.Status), "_", " ")) {
		l += " — " + prose(s.Reason)
	}
	return l
}

func anyRan(steps []validation.StepResult) bool {
	return slices.ContainsFunc(steps, ran)
}

func ran(s validation.StepResult) bool {
	switch s.Status {
	case validation.StatusPassed, validation.StatusFailed, validation.StatusTimedOut, validation.StatusKilled:
		return true
	}
	return false
}

func writeSteps(b *strings.Builder, steps []validation.StepResult) {
	if len(steps) == 0 {
		b.WriteString("No steps were planned.\n\n")
		return
	}
	b.WriteString("| Step | Command | Status | Exit | Duration | Network | Timeout | Output |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, s := range steps {
		exit := "—"
		switch {
		case s.ExitCode != nil:
			exit = fmt.Sprint(*s.ExitCode)
		case s.Signal != "":
			exit = "signal " + inline(s.Signal)
		}
		dur, out := "—", "—"
		if ran(s) {
			dur = duration(s.Duration)
			if s.Duration == 0 && s.DurationMs > 0 {
				dur = duration(time.Duration(s.DurationMs) * time.Millisecond)
			}
			out = outputWords(s.Output)
		}
		timeout := "—"
		if s.TimeoutMs > 0 {
			timeout = duration(time.Duration(s.TimeoutMs) * time.Millisecond)
		}
		network := networkWords(s)
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
			code(s.Name), code(shellJoin(s.Argv)), statusLabel(s), exit, dur, network, timeout, out)
	}
	b.WriteString("\n")
}

// networkWords is a step's network as it happened: the egress record's
// summary when the step ran, else what it would have been given.
func networkWords(s validation.StepResult) string {
	if s.Egress != nil {
		return inline(s.Egress.Summary())
	}
	switch s.Network {
	case "":
		return "—"
	case validation.NetworkRegistry:
		return "registry via proxy (not run)"
	}
	return inline(string(s.Network))
}

// MaxEgressRows bounds how many destinations the review lists per step;
// the record keeps them all.
const MaxEgressRows = 20

// writeEgress lists, per step that had a way out, what it reached and
// what was refused: host, port, counts and bytes, never a path or header.
func writeEgress(b *strings.Builder, steps []validation.StepResult) {
	first := true
	for _, s := range steps {
		e := s.Egress
		if e == nil || e.Network != validation.NetworkRegistry {
			continue
		}
		if first {
			b.WriteString("#### Network\n\n")
			first = false
		}
		fmt.Fprintf(b, "%s: %s; allowed destinations %s.\n\n", code(s.Name), htmlText(string(e.Enforcement)), allowListWords(e.AllowList))
		if !e.Observed && e.Enforcement != validation.EnforcedByWorker {
			b.WriteString("gilf did not observe this step's connections.\n\n")
			continue
		}
		if len(e.Allowed) == 0 && len(e.Denied) == 0 {
			b.WriteString("No connection was made.\n\n")
			continue
		}
		b.WriteString("| Destination | Decision | Connections | Sent | Received |\n|---|---|---|---|---|\n")
		rows := 0
		for _, h := range e.Allowed {
			if rows == MaxEgressRows {
				break
			}
			rows++
			fmt.Fprintf(b, "| %s | allowed | %d | %s | %s |\n", code(hostPort(h.Host, h.Port)), h.Connections, size(h.BytesOut), size(h.BytesIn))
		}
		for _, d := range e.Denied {
			if rows == MaxEgressRows {
				break
			}
			rows++
			fmt.Fprintf(b, "| %s | **denied** (%s) | %d | — | — |\n", code(hostPort(d.Host, d.Port)), code(d.Reason), d.Count)
		}
		if more := len(e.Allowed) + len(e.Denied) - rows; more > 0 || e.DeniedOmitted > 0 {
			fmt.Fprintf(b, "\n_%d more destinations and %d more denials are in the record._\n", max(more, 0), e.DeniedOmitted)
		}
		b.WriteString("\n")
	}
}

func allowListWords(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	q := make([]string, len(list))
	for i, h := range list {
		q[i] = code(h)
	}
	return strings.Join(q, ", ")
}

func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func outputWords(o validation.Output) string {
	if o.Bytes == 0 {
		return "none"
	}
	w := size(o.Bytes)
	if o.Truncated {
		w += ", truncated"
	}
	if o.Redactions > 0 {
		w += fmt.Sprintf(", %d %s", o.Redactions, plural(o.Redactions, "redaction", "redactions"))
	}
	return w
}

// writeOutputs shows, folded, the output of every step that ran: a
// failed step's whole output (its finding quotes the failures) within a
// larger budget than a passing step's.
func writeOutputs(b *strings.Builder, rec validation.Record, lim limits) {
	first := true
	for i, s := range rec.Steps {
		if !ran(s) || s.Output.Bytes == 0 {
			continue
		}
		if first {
			b.WriteString("#### Step output\n\n")
			first = false
		}
		limit, what := lim.output, "output"
		if badEnding(s.Status) {
			limit, what = lim.failed, "full output"
		}
		fmt.Fprintf(b, "<details><summary>%s %s: %s</summary>\n\n", htmlText(s.Name), what, htmlText(outputWords(s.Output)))
		if limit == 0 {
			b.WriteString("_Output left out to fit the review; it is in the evidence._\n\n</details>\n\n")
			continue
		}
		text, cut := cutMiddle(lim.outputs[i], limit)
		b.WriteString(fence(text))
		if cut {
			b.WriteString("\n_Truncated to fit the review._\n")
		}
		b.WriteString("\n</details>\n\n")
	}
}

// outputText joins what an executor kept of a stream, saying where bytes
// were dropped.
func outputText(o validation.Output) string {
	if !o.Truncated {
		return o.Head + o.Tail
	}
	head := strings.TrimSuffix(o.Head, "\n")
	return head + fmt.Sprintf("\n[… the executor kept only the head and tail of %s of output …]\n", size(o.Bytes)) + o.Tail
}

func writeNotes(b *strings.Builder, notes []string) {
	if len(notes) == 0 {
		return
	}
	b.WriteString("#### Notes\n\n")
	for _, n := range notes {
		b.WriteString("- " + prose(n) + "\n")
	}
	b.WriteString("\n")
}

func writeEvidence(b *strings.Builder, steps []validation.StepResult, ev map[string][]EvidenceLine) {
	if len(ev) == 0 {
		return
	}
	// Steps in plan order, then the run's own, then any other key sorted.
	var keys []string
	seen := map[string]bool{}
	for _, s := range steps {
		if len(ev[s.Name]) > 0 && !seen[s.Name] {
			keys = append(keys, s.Name)
			seen[s.Name] = true
		}
	}
	var rest []string
	for k := range ev {
		if !seen[k] && len(ev[k]) > 0 {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	keys = append(keys, rest...)
	if len(keys) == 0 {
		return
	}
	b.WriteString("#### Evidence\n\n")
	for _, k := range keys {
		for _, e := range ev[k] {
			prefix := "run"
			if k != "" {
				prefix = code(k)
			}
			b.WriteString("- " + prefix + " · " + evidenceRef(e.Kind, e.Name, e.URL, e.Key, e.Note) + "\n")
		}
	}
	b.WriteString("\n")
}
