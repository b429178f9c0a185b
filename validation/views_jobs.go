package validation

import "time"

// JobAttempt is one attempt at a job: a worker's claim and how it ended.
// Attempts count from 1 within each re-run of the job.
type JobAttempt struct {
	Rerun   int
	Attempt int
	Owner   string // the worker that claimed it
	Started time.Time
	Ended   time.Time // zero while it runs
	// Result is the state the job went to as the attempt ended: done,
	// queued (to be retried), failed, dead, superseded or cancelled; ""
	// while it runs.
	Result string
	Error  string // the attempt's own error; "" when it had none
	Reason string // the job's reason as the attempt ended
}

// JobDetail is one job with every attempt recorded for it, newest first,
// and its runs' ids, newest first.
type JobDetail struct {
	JobView
	History []JobAttempt
	Runs    []int64
}
