package local

import (
	"time"

	"github.com/gilf-review/gilf/validation"
)

// phaseClock times a run's phases one after another, on the monotonic
// clock: each mark ends the phase that began at the previous one.
type phaseClock struct {
	last   time.Time
	phases []validation.Phase
}

func newPhaseClock() *phaseClock { return &phaseClock{last: time.Now()} }

// mark ends the current phase, naming it.
func (c *phaseClock) mark(name string) {
	now := time.Now()
	c.phases = append(c.phases, validation.Phase{Name: name, Ms: now.Sub(c.last).Milliseconds()})
	c.last = now
}
