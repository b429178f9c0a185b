package review

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Check-run statuses while a job runs.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
)

// CheckProgress is the job's check run before it completes: created
// queued when the job is claimed, moved to in_progress with StartedAt
// when validation starts, its summary updated at each step.
type CheckProgress struct {
	HeadSHA   string
	Status    string // StatusQueued or StatusInProgress
	StartedAt time.Time
	Title     string
	Summary   string
	// DetailsURL is the dashboard's page of the run, "" when none.
	DetailsURL string
}

// ProgressPublisher is a Publisher that can also show a job's progress
// on its check run. Progress is idempotent (the check run is found again
// by the job's PublicationID) and never moves a completed check run back.
type ProgressPublisher interface {
	Progress(ctx context.Context, j Job, p CheckProgress) error
}

// CheckFinisher completes a job's check run alone — no review, and no
// re-read of the head — so that no check run is left in progress: for a
// head that moved on during validation, or a job that gave up.
type CheckFinisher interface {
	FinishCheck(ctx context.Context, j Job, p Publication) error
}

// ProgressTimeout bounds one progress update: progress is best effort and
// never holds a validation up.
const ProgressTimeout = 30 * time.Second

// progressReporter sends check-run progress from a goroutine of its own,
// so the executor's Progress callback never blocks: a newer update
// replaces one not yet sent. Errors are logged; a validation never fails
// for want of a progress update.
type progressReporter struct {
	pub  ProgressPublisher
	job  Job
	log  *slog.Logger
	base CheckProgress

	mu      sync.Mutex
	pending *CheckProgress
	wake    chan struct{}
	done    chan struct{}
	steps   []validation.Step
}

func newProgressReporter(ctx context.Context, pub ProgressPublisher, j Job, base CheckProgress, log *slog.Logger) *progressReporter {
	r := &progressReporter{pub: pub, job: j, log: log, base: base, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go r.loop(context.WithoutCancel(ctx))
	return r
}

func (r *progressReporter) loop(ctx context.Context) {
	defer close(r.done)
	for range r.wake {
		r.mu.Lock()
		p := r.pending
		r.pending = nil
		r.mu.Unlock()
		if p == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, ProgressTimeout)
		if err := r.pub.Progress(cctx, r.job, *p); err != nil {
			r.log.Warn("check run progress not updated", logkey.Status, p.Status, logkey.Err, err)
		}
		cancel()
	}
}

// send queues p, replacing an update not yet sent.
func (r *progressReporter) send(p CheckProgress) {
	r.mu.Lock()
	r.pending = &p
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// started is executors.Request.Progress: the check run's summary names
// the step now running.
func (r *progressReporter) started(step string, at time.Time) {
	p := r.base
	p.Status = StatusInProgress
	p.Summary = stepProgress(r.steps, step, at)
	r.send(p)
}

// close sends what is pending and waits for it, so the completion is
// never overtaken by a late progress update.
func (r *progressReporter) close() {
	close(r.wake)
	<-r.done
}

// stepProgress is the summary while step runs: every step of the plan,
// with the one running marked.
func stepProgress(steps []validation.Step, running string, at time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Running %s (started %s).\n\n", code(running), at.UTC().Format(time.RFC3339))
	seen := false
	for _, s := range steps {
		state := "waiting"
		switch {
		case s.Inconclusive != "":
			state = "not run (inconclusive)"
		case s.Name == running:
			state, seen = "running", true
		case !seen:
			state = "finished"
		}
		fmt.Fprintf(&b, "- %s — %s\n", code(s.Name), state)
	}
	return b.String()
}
