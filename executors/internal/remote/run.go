package remote

import (
	"context"
	"errors"
	"time"

	"github.com/gilf-review/gilf/executors"
)

// Lifecycle is one run of a remote executor in phases: prepare what the
// run needs on the worker, start the sandbox, run and collect the steps;
// the sandbox is destroyed and the worker's staging removed in every
// outcome. Run calls the phases in order; each executor fills them with
// its own wire calls (Sandbox for a provider's sandbox API, cmdrun's
// Command for a command that drives the compute).
type Lifecycle interface {
	// Prepare stages the run on the worker: the marker shells, the
	// archive or the checkout's copy. An error without Staged.Done means
	// nothing was started (a refusal, a pack failure).
	Prepare(ctx context.Context, res *executors.Result) (Staged, error)
	// Start creates the sandbox. destroy, when not nil, ends it in every
	// outcome, with a context the run's cancellation does not end; an
	// error means nothing is left running.
	Start(ctx context.Context, res *executors.Result) (destroy func() error, err error)
	// Steps runs the plan's steps and collects their results into res.
	// An error made by NotStarted means the run never started.
	Steps(ctx context.Context, res *executors.Result) error
}

// Staged is what Prepare left on the worker.
type Staged struct {
	// Cleanup removes it; nil for nothing to remove.
	Cleanup func() error
	// Done: the result is complete without a sandbox (no step was
	// runnable); Run returns it with Prepare's error.
	Done bool
}

// notStartedError marks a Steps error after which nothing ran.
type notStartedError struct{ err error }

func (e notStartedError) Error() string { return e.err.Error() }
func (e notStartedError) Unwrap() error { return e.err }

// NotStarted marks err, returned by Steps, as a run that never started
// (the command could not be executed): Run returns an empty Result.
func NotStarted(err error) error { return notStartedError{err} }

// Run runs l's phases for one run whose result starts as header
// (executor, tier, secrets withheld, resources). It sets the result's
// times, returns an empty Result with the error of a run that never
// started, and joins the errors of destroying the sandbox and removing
// the worker's staging to the run's, which they fail: they run in every
// outcome, a panic included.
func Run(ctx context.Context, header executors.Result, l Lifecycle) (res executors.Result, err error) {
	res = header
	res.Started = time.Now()
	staged, err := l.Prepare(ctx, &res)
	defer joinCleanup(&err, staged.Cleanup)
	switch {
	case staged.Done:
		res.Finished = time.Now()
		return res, err
	case err != nil:
		return executors.Result{}, err
	}
	defer func() {
		if !res.Started.IsZero() {
			res.Finished = time.Now()
		}
	}()
	destroy, err := l.Start(ctx, &res)
	defer joinCleanup(&err, destroy)
	if err != nil {
		return executors.Result{}, err
	}
	err = l.Steps(ctx, &res)
	var ns notStartedError
	if errors.As(err, &ns) {
		return executors.Result{}, ns.err
	}
	return res, err
}

// joinCleanup runs cleanup, when there is one, and joins its error to
// *err.
func joinCleanup(err *error, cleanup func() error) {
	if cleanup == nil {
		return
	}
	if cerr := cleanup(); cerr != nil {
		*err = errors.Join(*err, cerr)
	}
}
