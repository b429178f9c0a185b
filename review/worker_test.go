package review

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// memQueue is an in-memory Queue that records what the worker did; the
// store-backed queue is tested over real SQLite in cmd/gilf.
type memQueue struct {
	mu        sync.Mutex
	jobs      []Job
	hbErr     func(n int) error
	heartbeat int
	completed []Result
	retried   []error
	abandoned chan Job      // told of abandoned jobs, when set
	done      chan struct{} // closed after the first Complete or Retry
	once      sync.Once
}

func newMemQueue(jobs ...Job) *memQueue { return &memQueue{jobs: jobs, done: make(chan struct{})} }

func (q *memQueue) Claim(ctx context.Context, owner string, lease time.Duration) (Claim, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return Claim{}, false, nil
	}
	j := q.jobs[0]
	q.jobs = q.jobs[1:]
	return Claim{Job: j, Token: 1}, true, nil
}

func (q *memQueue) Heartbeat(ctx context.Context, c Claim, lease time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.heartbeat++
	if q.hbErr != nil {
		return q.hbErr(q.heartbeat)
	}
	return nil
}

func (q *memQueue) Complete(ctx context.Context, c Claim, res Result) error {
	q.mu.Lock()
	q.completed = append(q.completed, res)
	q.mu.Unlock()
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *memQueue) Retry(ctx context.Context, c Claim, cause error) error {
	q.mu.Lock()
	q.retried = append(q.retried, cause)
	q.mu.Unlock()
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *memQueue) Abandoned(ctx context.Context, c Claim) {
	if q.abandoned != nil {
		q.abandoned <- c.Job
	}
}

type runnerFunc func(ctx context.Context, j Job) (Result, error)

func (f runnerFunc) Run(ctx context.Context, j Job) (Result, error) { return f(ctx, j) }

func startWorker(t *testing.T, q Queue, r Runner, lease, drain time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{Queue: q, Runner: r, Owner: "test", Concurrency: 2, Lease: lease,
		PollInterval: 10 * time.Millisecond, Drain: drain, Logger: slog.New(slog.DiscardHandler)}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(10 * time.Second):
			t.Fatal("worker did not stop within 10s")
		}
	}
}

func waitDone(t *testing.T, q *memQueue) {
	t.Helper()
	select {
	case <-q.done:
	case <-time.After(10 * time.Second):
		t.Fatal("job did not end within 10s")
	}
}

func TestWorkerCompletesAndRetries(t *testing.T) {
	t.Run("result is completed", func(t *testing.T) {
		q := newMemQueue(Job{ID: 1})
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			return Result{Posted: true}, nil
		}), time.Minute, time.Second)
		waitDone(t, q)
		stop()
		if len(q.completed) != 1 || !q.completed[0].Posted || len(q.retried) != 0 {
			t.Errorf("completed=%v retried=%v", q.completed, q.retried)
		}
	})
	t.Run("infrastructure error is retried", func(t *testing.T) {
		q := newMemQueue(Job{ID: 2})
		boom := errors.New("sandbox API down")
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			return Result{}, boom
		}), time.Minute, time.Second)
		waitDone(t, q)
		stop()
		if len(q.retried) != 1 || !errors.Is(q.retried[0], boom) || len(q.completed) != 0 {
			t.Errorf("completed=%v retried=%v", q.completed, q.retried)
		}
	})
	t.Run("panic is retried, worker survives", func(t *testing.T) {
		q := newMemQueue(Job{ID: 3})
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			panic("executor bug")
		}), time.Minute, time.Second)
		waitDone(t, q)
		stop()
		if len(q.retried) != 1 {
			t.Errorf("retried=%v", q.retried)
		}
	})
}

// A lost lease cancels the running job and neither completes nor
// releases it (another worker owns it now); a passing heartbeat error
// does not.
func TestWorkerHeartbeat(t *testing.T) {
	const lease = 300 * time.Millisecond // heartbeat every 100ms
	t.Run("lease lost cancels the job", func(t *testing.T) {
		q := newMemQueue(Job{ID: 1})
		q.hbErr = func(int) error { return ErrLeaseLost }
		q.abandoned = make(chan Job, 1)
		cancelled := make(chan struct{})
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			<-ctx.Done()
			close(cancelled)
			return Result{}, ctx.Err()
		}), lease, time.Second)
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("job not cancelled after its lease was lost")
		}
		select {
		case j := <-q.abandoned:
			if j.ID != 1 {
				t.Errorf("abandoned job %d, want 1", j.ID)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the queue was not told the job was abandoned")
		}
		stop()
		if len(q.completed)+len(q.retried) != 0 {
			t.Errorf("a job with a lost lease was completed=%v or retried=%v", q.completed, q.retried)
		}
	})
	t.Run("one busy heartbeat is survived", func(t *testing.T) {
		q := newMemQueue(Job{ID: 2})
		q.hbErr = func(n int) error {
			if n == 1 {
				return errors.New("database is locked")
			}
			return nil
		}
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			select {
			case <-time.After(4 * lease):
				return Result{Posted: true}, nil
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}), lease, time.Second)
		waitDone(t, q)
		stop()
		if len(q.completed) != 1 {
			t.Errorf("completed=%v retried=%v: a passing heartbeat error must not abandon the job", q.completed, q.retried)
		}
	})
	t.Run("heartbeats failing past the lease abandon the job", func(t *testing.T) {
		q := newMemQueue(Job{ID: 3})
		q.hbErr = func(int) error { return errors.New("database is locked") }
		cancelled := make(chan struct{})
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			<-ctx.Done()
			close(cancelled)
			return Result{}, ctx.Err()
		}), lease, time.Second)
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("job kept running although no heartbeat succeeded for longer than the lease")
		}
		stop()
	})
}

// Shutdown lets a running job finish within the drain, and cancels and
// releases one that does not.
func TestWorkerDrain(t *testing.T) {
	t.Run("finishes within drain", func(t *testing.T) {
		q := newMemQueue(Job{ID: 1})
		started := make(chan struct{})
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			close(started)
			time.Sleep(200 * time.Millisecond)
			return Result{Posted: true}, ctx.Err()
		}), time.Minute, 5*time.Second)
		<-started
		stop()
		if len(q.completed) != 1 {
			t.Errorf("completed=%v retried=%v", q.completed, q.retried)
		}
	})
	t.Run("cancelled after drain", func(t *testing.T) {
		q := newMemQueue(Job{ID: 2})
		started := make(chan struct{})
		stop := startWorker(t, q, runnerFunc(func(ctx context.Context, j Job) (Result, error) {
			close(started)
			<-ctx.Done()
			return Result{}, ctx.Err()
		}), time.Minute, 200*time.Millisecond)
		<-started
		stop()
		if len(q.retried) != 1 || !errors.Is(q.retried[0], context.Canceled) {
			t.Errorf("completed=%v retried=%v: a job cancelled at shutdown is released for a retry", q.completed, q.retried)
		}
	})
}

// countingQueue is a memQueue whose jobs arrive later and which counts
// the claims that found none.
type countingQueue struct {
	*memQueue
	empty chan struct{} // one per claim that found no job
}

func (q *countingQueue) Claim(ctx context.Context, owner string, lease time.Duration) (Claim, bool, error) {
	c, ok, err := q.memQueue.Claim(ctx, owner, lease)
	if !ok && err == nil {
		select {
		case q.empty <- struct{}{}:
		default:
		}
	}
	return c, ok, err
}

// TestWorkerWakeReachesEveryIdleWorker: one wake-up for a batch of jobs
// starts them all on idle workers at once, not one now and the rest at
// the next poll (an hour here).
func TestWorkerWakeReachesEveryIdleWorker(t *testing.T) {
	q := &countingQueue{memQueue: newMemQueue(), empty: make(chan struct{}, 3)}
	started := make(chan int64, 3)
	release := make(chan struct{})
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{Queue: q, Runner: runnerFunc(func(ctx context.Context, j Job) (Result, error) {
		started <- j.ID
		<-release
		return Result{}, nil
	}), Owner: "test", Concurrency: 3, Lease: time.Minute, PollInterval: time.Hour, Drain: time.Second,
		Logger: slog.New(slog.DiscardHandler), Wake: wake}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	defer func() {
		close(release)
		cancel()
		<-errc
	}()
	for range 3 { // every worker found the queue empty and sleeps
		select {
		case <-q.empty:
		case <-time.After(10 * time.Second):
			t.Fatal("the workers did not all claim at start")
		}
	}
	q.mu.Lock()
	q.jobs = []Job{{ID: 1}, {ID: 2}, {ID: 3}}
	q.mu.Unlock()
	wake <- struct{}{}
	for range 3 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("one wake-up did not start every queued job on an idle worker")
		}
	}
}
