package cmdrun

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// DiagnosticTailBytes is how much of a command's last output is kept
// (redacted, control characters escaped) to explain a command that
// failed before printing any marker.
const DiagnosticTailBytes = 2048

// MarkerEvent is a START or END line for a runnable planned step, as the
// Observer saw it go by. The MarkerParser stays the authority on results;
// events only drive Progress and the host's per-step deadline.
type MarkerEvent struct {
	Step  int // index into Plan.Steps
	Start bool
	At    time.Time
}

// Observer passes the command's output to the marker parser and watches
// it for marker lines. It holds at most one line of
// validation.MaxMarkerLineBytes and a bounded tail of raw output for
// diagnosing a command that broke before printing any marker.
type Observer struct {
	parser io.Writer
	tags   map[string]int // marker tag → plan step index
	events chan MarkerEvent

	mu        sync.Mutex
	line      []byte
	long      bool // the current line is longer than a marker can be
	seen      map[string]bool
	anyStart  bool // a line starting with the START prefix, forged or not
	open      int  // plan index of the step whose START came last without END, or -1
	tail      []byte
	tailLimit int
}

// NewObserver returns an Observer that feeds parser and keeps the last
// tailLimit bytes of output.
func NewObserver(plan validation.Plan, nonce string, parser io.Writer, tailLimit int) *Observer {
	o := &Observer{
		parser:    parser,
		tags:      map[string]int{},
		seen:      map[string]bool{},
		open:      -1,
		tailLimit: tailLimit,
	}
	for i, s := range plan.Steps {
		if s.Inconclusive == "" {
			if _, dup := o.tags[validation.MarkerTag(nonce, s.Name)]; !dup {
				o.tags[validation.MarkerTag(nonce, s.Name)] = i
			}
		}
	}
	// Each tag yields at most one START and one END event, so sends never
	// block.
	o.events = make(chan MarkerEvent, 2*len(o.tags))
	return o
}

// Write feeds the parser and scans for markers. It never fails: output
// the parser refuses (after Finish) is a bug of ours, not the command's.
func (o *Observer) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.parser.Write(b); err != nil {
		return 0, err
	}
	o.keepTail(b)
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if !o.long {
			if len(o.line)+len(chunk) > validation.MaxMarkerLineBytes+1 {
				o.long, o.line = true, o.line[:0]
			} else {
				o.line = append(o.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !o.long {
			o.scanLine(bytes.TrimSuffix(o.line, []byte{'\r'}))
		}
		o.line, o.long = o.line[:0], false
		b = b[i+1:]
	}
	return n, nil
}

// Events delivers the observer's marker events; give it to Spec.Events.
func (o *Observer) Events() <-chan MarkerEvent { return o.events }

func (o *Observer) scanLine(l []byte) {
	switch {
	case bytes.HasPrefix(l, []byte(validation.MarkerStart)):
		o.anyStart = true
		tag := string(l[len(validation.MarkerStart):])
		if i, ok := o.tags[tag]; ok && !o.seen["S"+tag] {
			o.seen["S"+tag] = true
			o.open = i
			o.events <- MarkerEvent{Step: i, Start: true, At: time.Now()}
		}
	case bytes.HasPrefix(l, []byte(validation.MarkerEnd)):
		rest := string(l[len(validation.MarkerEnd):])
		c := strings.LastIndexByte(rest, ':')
		if c < 0 {
			return
		}
		tag := rest[:c]
		if i, ok := o.tags[tag]; ok && !o.seen["E"+tag] {
			o.seen["E"+tag] = true
			if o.open == i {
				o.open = -1
			}
			o.events <- MarkerEvent{Step: i, At: time.Now()}
		}
	}
}

func (o *Observer) keepTail(b []byte) {
	if len(b) >= o.tailLimit {
		o.tail = append(o.tail[:0], b[len(b)-o.tailLimit:]...)
		return
	}
	o.tail = append(o.tail, b...)
	if over := len(o.tail) - o.tailLimit; over > 0 {
		o.tail = append(o.tail[:0], o.tail[over:]...)
	}
}

// State returns what the Observer saw; call it after the command's
// output is closed.
func (o *Observer) State() (anyStart bool, open int, tail string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.anyStart, o.open, string(o.tail)
}
