package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Progress settings of gilf validate.
const (
	// progressTick is how often a terminal's status line is redrawn.
	progressTick = time.Second
	// progressPlainEvery is how often a plain (non-terminal) stderr is
	// told that a step is still running.
	progressPlainEvery = 30 * time.Second
)

// progress tells the person running gilf validate which step runs and for
// how long: a redrawn status line on a terminal, plain lines otherwise.
// Step names are gilf's own (install, test, …); nothing from the
// repository is printed here.
type progress struct {
	w   io.Writer
	tty bool

	mu    sync.Mutex
	step  string
	since time.Time
	drawn bool // a terminal status line is on screen
}

func newProgress(w io.Writer, tty bool) *progress { return &progress{w: w, tty: tty} }

// started is the executor's Progress callback; it never blocks for long.
func (p *progress) started(step string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.step, p.since = step, at
	if p.tty {
		p.drawLocked(at)
		return
	}
	fmt.Fprintf(p.w, "gilf: step %s started\n", step)
}

func (p *progress) drawLocked(now time.Time) {
	if p.step == "" {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[Kgilf: %s running %s", p.step, now.Sub(p.since).Truncate(time.Second))
	p.drawn = true
}

// run starts the ticker; the returned func stops it, waits for it and
// clears the status line.
func (p *progress) run() (stop func()) {
	every := progressPlainEvery
	if p.tty {
		every = progressTick
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				p.tick(now)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.drawn {
			fmt.Fprint(p.w, "\r\x1b[K")
			p.drawn = false
		}
		p.step = ""
	}
}

func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.step == "" {
		return
	}
	if p.tty {
		p.drawLocked(now)
		return
	}
	fmt.Fprintf(p.w, "gilf: step %s still running (%s)\n", p.step, now.Sub(p.since).Truncate(time.Second))
}

// summary prints one line per step once the run is over.
func (p *progress) summary(steps []validation.StepResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range steps {
		line := fmt.Sprintf("gilf: %-9s %s", s.Name, s.Status)
		if s.ExitCode != nil && s.Status != validation.StatusPassed {
			line += fmt.Sprintf(" (exit %d)", *s.ExitCode)
		}
		if s.DurationMs > 0 {
			line += fmt.Sprintf(" in %s", (time.Duration(s.DurationMs) * time.Millisecond).Round(10*time.Millisecond))
		}
		fmt.Fprintln(p.w, line)
	}
}
