package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// Claim is a leased job. Token is the fencing token every state change
// carries: a claim whose lease was taken over can no longer finish.
type Claim struct {
	Job   Job
	Token int64
}

// ErrLeaseLost is what a Queue's Heartbeat returns (wrapped) once another
// worker holds the job or it was superseded or cancelled: the job must
// stop at once. Any other heartbeat error is taken as passing (a busy
// store) until the lease could have expired.
var ErrLeaseLost = errors.New("lease lost")

// Queue is the durable job queue (the store).
type Queue interface {
	// Claim leases the next runnable job; ok is false when none is due.
	Claim(ctx context.Context, owner string, lease time.Duration) (c Claim, ok bool, err error)
	// Heartbeat extends the lease; it fails once the lease was lost.
	Heartbeat(ctx context.Context, c Claim, lease time.Duration) error
	// Complete stores the result and ends the job.
	Complete(ctx context.Context, c Claim, res Result) error
	// Retry releases the job for a later attempt after an infrastructure
	// failure (backoff, or dead after the last attempt).
	Retry(ctx context.Context, c Claim, cause error) error
}

// Abandoner is a Queue told when a job's lease was lost, so it can end
// what the job left behind: the check run of a job superseded by a newer
// head or cancelled (a closed pull request) must not stay in progress. A
// job another worker took over is its to finish.
type Abandoner interface {
	Abandoned(ctx context.Context, c Claim)
}

// StopChecker is a Queue that can say, cheaply, whether a held job was
// stopped — superseded by a newer head, cancelled by an operator or a
// closed pull request — so its running validation is stopped within
// StopCheck rather than at the next heartbeat.
type StopChecker interface {
	Stopped(ctx context.Context, c Claim) (bool, error)
}

// ErrJobStopped ends a job's context when its job was superseded or
// cancelled while it ran.
var ErrJobStopped = errors.New("job superseded or cancelled while it ran")

// Runner runs one job; *Pipeline is the real one.
type Runner interface {
	Run(ctx context.Context, j Job) (Result, error)
}

// Worker defaults.
const (
	DefaultLease        = 2 * time.Minute
	DefaultPollInterval = time.Second
	// DefaultDrain is how long shutdown lets running jobs finish before
	// cancelling them and releasing their leases.
	DefaultDrain = 30 * time.Second
	// DefaultStopCheck is how often a running job's state is read to
	// stop it once superseded or cancelled (a StopChecker queue): one
	// read of one row per running job.
	DefaultStopCheck = 2 * time.Second
)

// Worker claims jobs and runs them, Concurrency at a time.
type Worker struct {
	Queue        Queue
	Runner       Runner
	Owner        string // unique per process: lease owner
	Concurrency  int
	Lease        time.Duration
	PollInterval time.Duration
	Drain        time.Duration
	// StopCheck is how often a running job is checked for a stop
	// (DefaultStopCheck when zero).
	StopCheck time.Duration
	Logger    *slog.Logger
	// Wake, when set, is signalled by intake after a job was committed so
	// an idle worker claims it at once instead of at the next poll.
	Wake <-chan struct{}
}

func (w *Worker) lease() time.Duration { return orDefault(w.Lease, DefaultLease) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Run claims and runs jobs until ctx is cancelled, then stops claiming,
// lets running jobs finish for up to Drain, cancels what remains (their
// leases are released for a retry) and returns once every job goroutine
// has ended.
func (w *Worker) Run(ctx context.Context) error {
	n := max(w.Concurrency, 1)
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	// relay passes a wake-up on: a worker that claimed a job wakes an
	// idle peer, which claims the next one (one wake-up from intake may
	// stand for a batch of jobs), and so on until a claim finds none.
	relay := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx, jobCtx, fmt.Sprintf("%s/%d", w.Owner, i), relay)
		}()
	}
	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(orDefault(w.Drain, DefaultDrain)):
		w.Logger.Warn("drain timeout: cancelling running jobs")
		cancelJobs()
		<-done
	}
	return nil
}

func (w *Worker) loop(ctx, jobCtx context.Context, owner string, relay chan struct{}) {
	poll := orDefault(w.PollInterval, DefaultPollInterval)
	for ctx.Err() == nil {
		c, ok, err := w.Queue.Claim(ctx, owner, w.lease())
		if err != nil {
			if ctx.Err() == nil {
				w.Logger.Error("claim job", logkey.Err, err)
			}
		}
		if err != nil || !ok {
			select {
			case <-ctx.Done():
			case <-time.After(poll):
			case <-w.Wake:
			case <-relay:
			}
			continue
		}
		select {
		case relay <- struct{}{}:
		default: // a peer is already woken
		}
		w.runOne(jobCtx, c)
	}
}

// runOne runs a claimed job with a heartbeat; a lost lease cancels it.
func (w *Worker) runOne(ctx context.Context, c Claim) {
	log := JobLogger(w.Logger, c.Job)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		t := time.NewTicker(w.lease() / 3)
		defer t.Stop()
		var stopC <-chan time.Time
		stopper, canStop := w.Queue.(StopChecker)
		if canStop {
			st := time.NewTicker(orDefault(w.StopCheck, DefaultStopCheck))
			defer st.Stop()
			stopC = st.C
		}
		renewed := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopC:
				stopped, err := stopper.Stopped(ctx, c)
				if err != nil {
					log.Warn("job state not read; the heartbeat will tell", logkey.Err, err)
				}
				if stopped {
					log.Info("job superseded or cancelled; stopping its validation")
					cancel(ErrJobStopped)
					return
				}
			case <-t.C:
				err := w.Queue.Heartbeat(ctx, c, w.lease())
				switch {
				case err == nil:
					renewed = time.Now()
				case errors.Is(err, ErrLeaseLost) || time.Since(renewed) >= w.lease()*2/3:
					// Lost, or unrenewed for long enough that another
					// worker may already have taken the job over.
					log.Error("heartbeat failed; abandoning job", logkey.Err, err)
					cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
					return
				default:
					log.Warn("heartbeat failed; will try again before the lease expires", logkey.Err, err)
				}
			}
		}
	}()
	res, err := w.runSafely(ctx, c.Job)
	lost := context.Cause(ctx)
	cancel(nil)
	<-hbDone
	// Store updates use a fresh context: the job's may be cancelled, and a
	// result that was produced must still be recorded.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer scancel()
	if err != nil || lost != nil && !errors.Is(lost, context.Canceled) {
		res.Shadow.Stop() // the run is not recorded, so neither is its shadow
	}
	switch {
	case lost != nil && !errors.Is(lost, context.Canceled):
		log.Warn("job abandoned", logkey.Err, lost)
		if a, ok := w.Queue.(Abandoner); ok {
			a.Abandoned(sctx, c)
		}
	case err != nil:
		log.Warn("job failed; will retry", logkey.Err, err)
		if rerr := w.Queue.Retry(sctx, c, err); rerr != nil {
			log.Error("release job for retry", logkey.Err, rerr)
		}
	default:
		if cerr := w.Queue.Complete(sctx, c, res); cerr != nil {
			log.Error("complete job", logkey.Err, cerr)
		}
	}
}

func (w *Worker) runSafely(ctx context.Context, j Job) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pipeline panicked: %v", p)
		}
	}()
	return w.Runner.Run(ctx, j)
}
