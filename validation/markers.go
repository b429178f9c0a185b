package validation

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxIntegrityIssues is how many integrity problems the parser describes
// one by one; beyond it they are only counted.
const MaxIntegrityIssues = 8

// CaptureOptions say how step output is kept.
type CaptureOptions struct {
	// MaxOutputBytes is what is kept of each step's output (head + tail);
	// zero means DefaultMaxOutputBytes.
	MaxOutputBytes int
	// Secrets are redacted from every step's output before it is kept.
	Secrets []Secret
	// Now, when set, times each step from its START marker to its END
	// marker as they arrive.
	Now func() time.Time
}

// ErrParserFinished is returned by Write after Finish.
var ErrParserFinished = errors.New("marker parser: write after finish")

type markerStepState uint8

const (
	markerPending markerStepState = iota
	markerOpen
	markerEnded   // closed by its END marker
	markerUnended // started, never properly ended
)

// markerStep is the parser's view of one runnable planned step.
type markerStep struct {
	plan     int // index into Plan.Steps
	state    markerStepState
	exit     int
	started  time.Time
	duration time.Duration
	raw      int64 // bytes of output as read, before redaction
	red      *Redactor
	capture  *Capture
}

// MarkerParser reads the combined output of a marker shell (BuildShell) and
// reports how each planned step ended. It is an io.Writer; memory stays
// bounded whatever the stream's length: one held line of at most
// MaxMarkerLineBytes, and per started step a Capture of MaxOutputBytes
// plus the Redactor's hold-back.
//
// Grammar: a marker is a whole line, exactly
//
//	__GILF_VALIDATION_START__:<nonce>-<step>
//	__GILF_VALIDATION_END__:<nonce>-<step>:<exit>
//
// for a runnable step of the plan, with exit a decimal 0–255 without sign
// or leading zeros. One trailing carriage return is tolerated (a pty turns
// "\n" into "\r\n"). Anything else — a marker in mid-line, a wrong or
// missing nonce, a tag of no runnable step, trailing bytes — is plain
// output of the step that is open.
//
// Markers are printed by code the pull request controls, so they are
// checked, not believed: a START out of plan order, a duplicate START or
// END, an END before its START or for a step that is not the open one, a
// malformed exit status on an otherwise valid END, a step started after a
// failed install, and a step left without END at Finish each make the
// integrity string non-empty, and the run inconclusive.
//
// Output of a step is what comes between its START line and its END line,
// less the one newline the shell prints before END. Output outside every
// step (before the first START, between steps, after the last END) is
// dropped and counted (Unattributed). Output is redacted, then captured.
type MarkerParser struct {
	plan     Plan
	tags     map[string]int // marker tag → index into steps
	steps    []markerStep   // runnable steps, in plan order
	cur      int            // index of the open step, or -1
	next     int            // index of the step whose START comes next
	heldNL   bool           // a newline held back from the open step
	failed   bool           // install ended with a non-zero exit
	matcher  *secretMatcher
	maxOut   int
	now      func() time.Time
	scan     markerScanner
	issues   []string
	more     int   // integrity issues beyond MaxIntegrityIssues
	unattrib int64 // output bytes outside every step
	markers  int64 // bytes of marker lines, their newlines and the shell's newline before END
	done     bool
	newline  [1]byte // "\n", kept here so writing it does not allocate
	results  []StepResult
	integ    string
}

var _ markerSink = (*MarkerParser)(nil)

// NewMarkerParser returns a parser for the output of BuildShell(plan, nonce).
func NewMarkerParser(plan Plan, nonce string, opts CaptureOptions) *MarkerParser {
	p := &MarkerParser{
		plan:    plan,
		tags:    map[string]int{},
		cur:     -1,
		matcher: compileSecrets(opts.Secrets),
		maxOut:  opts.MaxOutputBytes,
		now:     opts.Now,
		newline: [1]byte{'\n'},
	}
	if p.maxOut <= 0 {
		p.maxOut = DefaultMaxOutputBytes
	}
	for i, s := range plan.Steps {
		if s.Inconclusive != "" {
			continue
		}
		tag := MarkerTag(nonce, s.Name)
		if _, dup := p.tags[tag]; dup {
			continue // a plan never repeats a step; the first one is marked
		}
		p.tags[tag] = len(p.steps)
		p.steps = append(p.steps, markerStep{plan: i})
	}
	p.scan = newMarkerScanner(p)
	return p
}

// Write parses a piece of the stream. It fails only after Finish.
func (p *MarkerParser) Write(b []byte) (int, error) {
	if p.done {
		return 0, ErrParserFinished
	}
	p.scan.write(b)
	return len(b), nil
}

// Unattributed is how many output bytes fell outside every step.
func (p *MarkerParser) Unattributed() int64 { return p.unattrib }

// Finish ends the stream and returns one StepResult per plan step, in plan
// order, with Reported set, and the integrity problems found, joined with
// "; " (empty when the markers were consistent). An END with exit 0 is
// passed, any other exit failed with ExitCode; a step started but never
// ended is failed without ExitCode (and an integrity problem); a step never
// started is not_run; an inconclusive step is inconclusive with the plan's
// reason. Cwd is left for the executor; Duration is set only with
// CaptureOptions.Now. Calling Finish again returns the same values.
func (p *MarkerParser) Finish() ([]StepResult, string) {
	if p.done {
		return p.results, p.integ
	}
	p.done = true
	p.scan.finish()
	if p.cur >= 0 {
		s := &p.steps[p.cur]
		p.issue("step %q has a START marker but no END marker", p.stepName(s))
		p.closeUnended(s)
	}
	byPlan := make(map[int]*markerStep, len(p.steps))
	for i := range p.steps {
		byPlan[p.steps[i].plan] = &p.steps[i]
	}
	p.results = make([]StepResult, len(p.plan.Steps))
	for i, ps := range p.plan.Steps {
		r := StepResult{
			Name:      ps.Name,
			Argv:      slices.Clone(ps.Argv),
			TimeoutMs: ps.Timeout.Milliseconds(),
			Network:   ps.Network,
			Reported:  true,
		}
		s := byPlan[i]
		switch {
		case ps.Inconclusive != "":
			r.Status, r.Reason = StatusInconclusive, ps.Inconclusive
		case s == nil: // a repeated step name: only the first is marked
			r.Status, r.Reason = StatusNotRun, "not run: the plan repeats this step"
		case s.state == markerPending && p.failed:
			r.Status, r.Reason = StatusNotRun, "not run: the install step failed"
		case s.state == markerPending:
			r.Status, r.Reason = StatusNotRun, "not run: the executor reported no start for this step"
		case s.state == markerUnended:
			r.Status = StatusFailed
			r.Reason = "the step started but did not report how it ended"
		case s.exit == 0:
			r.Status, r.ExitCode = StatusPassed, new(0)
		case ps.Timeout > 0 && s.exit == ShellTimeoutStatus:
			r.Status, r.ExitCode = StatusTimedOut, new(s.exit)
			r.Reason = fmt.Sprintf("timed out after %s (exit %d from the shell's timeout)", ps.Timeout, s.exit)
		default:
			r.Status, r.ExitCode = StatusFailed, new(s.exit)
		}
		if s != nil && s.state != markerPending {
			r.Output = s.capture.Output()
			r.Output.Redactions = s.red.Redactions()
			r.Duration = s.duration
			r.DurationMs = s.duration.Milliseconds()
		}
		p.results[i] = r
	}
	p.integ = strings.Join(p.issues, "; ")
	if p.more > 0 {
		p.integ += fmt.Sprintf("; and %d more", p.more)
	}
	return p.results, p.integ
}

// text implements markerSink: plain output goes to the open step.
func (p *MarkerParser) text(b []byte) {
	if len(b) == 0 {
		return
	}
	if p.cur < 0 {
		p.unattrib += int64(len(b))
		return
	}
	s := &p.steps[p.cur]
	if p.heldNL {
		p.heldNL = false
		p.stepWrite(s, p.newline[:])
	}
	if b[len(b)-1] == '\n' {
		// It may be the newline the shell prints before END: hold it.
		b = b[:len(b)-1]
		p.heldNL = true
	}
	p.stepWrite(s, b)
}

func (p *MarkerParser) stepWrite(s *markerStep, b []byte) {
	if len(b) == 0 {
		return
	}
	s.raw += int64(len(b))
	// The Redactor writes only into a Capture, which never fails; were it
	// to, the output is incomplete and the run cannot be trusted.
	if _, err := s.red.Write(b); err != nil {
		p.issue("capturing the output of step %q failed: %v", p.stepName(s), err)
	}
}

// line implements markerSink: it reports whether b is a marker and, if so,
// applies it.
func (p *MarkerParser) line(b []byte, terminated bool) bool {
	n := int64(len(b))
	if terminated {
		n++
	}
	b = bytes.TrimSuffix(b, []byte{'\r'})
	var ok bool
	switch {
	case bytes.HasPrefix(b, []byte(MarkerStart)):
		i, planned := p.tags[string(b[len(MarkerStart):])]
		ok = planned && p.start(i)
	case bytes.HasPrefix(b, []byte(MarkerEnd)):
		rest := b[len(MarkerEnd):]
		c := bytes.LastIndexByte(rest, ':')
		if c < 0 {
			return false
		}
		i, planned := p.tags[string(rest[:c])]
		if !planned {
			return false
		}
		exit, valid := parseExitStatus(rest[c+1:])
		if !valid {
			p.issue("END marker of step %q has a malformed exit status", p.stepName(&p.steps[i]))
			return false
		}
		ok = p.end(i, exit)
	}
	if ok {
		p.markers += n
	}
	return ok
}

func (p *MarkerParser) start(i int) bool {
	s := &p.steps[i]
	name := p.stepName(s)
	switch {
	case p.failed:
		p.issue("step %q started after the install step failed", name)
		return false
	case s.state != markerPending:
		p.issue("duplicate START marker for step %q", name)
		return false
	}
	if p.cur >= 0 {
		open := &p.steps[p.cur]
		p.issue("START marker for step %q while step %q is still open", name, p.stepName(open))
		p.closeUnended(open)
	}
	if i != p.next && p.next < len(p.steps) {
		p.issue("step %q started out of plan order (expected %q)", name, p.stepName(&p.steps[p.next]))
	} else if i != p.next {
		p.issue("step %q started out of plan order", name)
	}
	s.state = markerOpen
	s.capture = NewCapture(p.maxOut)
	s.red = newRedactor(s.capture, p.matcher)
	if p.now != nil {
		s.started = p.now()
	}
	p.cur, p.next = i, i+1
	return true
}

func (p *MarkerParser) end(i, exit int) bool {
	s := &p.steps[i]
	switch {
	case p.cur == i:
		if p.heldNL {
			p.heldNL = false
			p.markers++ // the shell's own newline before END
		}
		p.flush(s)
		s.state, s.exit = markerEnded, exit
		if p.now != nil {
			s.duration = p.now().Sub(s.started)
		}
		p.cur = -1
		if exit != 0 && p.plan.Steps[s.plan].Name == StepInstall {
			p.failed = true
		}
		return true
	case s.state == markerPending:
		p.issue("END marker for step %q before its START", p.stepName(s))
	default:
		p.issue("duplicate END marker for step %q", p.stepName(s))
	}
	return false
}

// closeUnended closes the open step s without an END marker.
func (p *MarkerParser) closeUnended(s *markerStep) {
	if p.heldNL {
		p.heldNL = false
		p.stepWrite(s, p.newline[:])
	}
	p.flush(s)
	s.state = markerUnended
	if p.now != nil {
		s.duration = p.now().Sub(s.started)
	}
	p.cur = -1
}

func (p *MarkerParser) flush(s *markerStep) {
	if err := s.red.Flush(); err != nil {
		p.issue("capturing the output of step %q failed: %v", p.stepName(s), err)
	}
}

func (p *MarkerParser) stepName(s *markerStep) string { return p.plan.Steps[s.plan].Name }

func (p *MarkerParser) issue(format string, args ...any) {
	if len(p.issues) >= MaxIntegrityIssues {
		p.more++
		return
	}
	p.issues = append(p.issues, fmt.Sprintf(format, args...))
}

// parseExitStatus accepts a decimal 0–255: no sign, no leading zero (but
// "0"), no spaces, nothing after it.
func parseExitStatus(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 3 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 255
}
