package store

import (
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Read models of the dashboard (SPEC §8). The store fills them and the
// dashboard reads them through its own interface: the dashboard imports
// the store's contract, never the other way. Nil pointers mean "unknown",
// never zero.

// RunQuery selects runs, newest first. Zero fields do not filter.
type RunQuery struct {
	Repo     string             // owner/name, exact
	Outcome  validation.Outcome // exact
	Executor string             // exact
	From     time.Time
	To       time.Time // exclusive
	// Job, when set, keeps the runs of that job only.
	Job int64
	// Before is the pagination cursor: only runs with a lower id.
	Before int64
	Limit  int // at most MaxRunPage; 0 means DefaultRunPage
}

// Page sizes of RunQuery.
const (
	DefaultRunPage = 50
	MaxRunPage     = 200
)

// PageLimit is q.Limit bounded to (0, MaxRunPage].
func (q RunQuery) PageLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultRunPage
	case q.Limit > MaxRunPage:
		return MaxRunPage
	}
	return q.Limit
}

// RunPage is one page of runs. Next is the Before of the next (older)
// page; 0 when this page is the last.
type RunPage struct {
	Runs []RunSummary
	Next int64
}

// RunSummary is one run as a list shows it.
type RunSummary struct {
	ID       int64
	JobID    int64
	Repo     string
	PR       int
	HeadSHA  string
	Outcome  validation.Outcome
	Reason   string
	Refusal  validation.Code // empty when the run was not refused
	Executor string
	Tier     validation.Tier
	Started  time.Time
	Finished time.Time
	Findings int
	// USD is the known cost of the run's spans, every lane (the semantic
	// review's model too); nil when no span had a price.
	USD *float64
}

// RunView is one run with everything it produced.
type RunView struct {
	RunSummary
	Record    validation.Record // the validation record, whole
	Artifacts []ArtifactView
	Shadow    *ShadowView // nil when no shadow lane ran
}

// ArtifactView is one evidence upload. URL is empty when the evidence
// store gives none; Status is "persisted" or "failed".
type ArtifactView struct {
	Key    string
	Kind   string
	Bytes  int64
	SHA256 string
	Status string
	URL    string
	Err    string
}

// ShadowView is the shadow lane's comparison with the primary lane.
type ShadowView struct {
	Executor    string
	Outcome     validation.Outcome // empty when the lane errored or timed out
	Err         string
	StepsAgreed int
	StepsTotal  int
	Wall        time.Duration
	USD         *float64
	Steps       []ShadowStep
}

// ShadowStep compares one step of the two lanes.
type ShadowStep struct {
	Step    string            `json:"step"`
	Primary validation.Status `json:"primary"`
	Shadow  validation.Status `json:"shadow"`
	Agree   bool              `json:"agree"`
}

// CostDay is the cost of one executor's lane on one UTC day.
type CostDay struct {
	Day      string // 2006-01-02, UTC
	Executor string
	Lane     Lane // primary, shadow or semantic
	Spans    int
	Priced   int      // spans with a known cost
	USD      *float64 // sum of known costs; nil when no span had one
	Seconds  float64  // wall time of all spans
	// InputTokens and OutputTokens sum the semantic lane's token counts
	// (0 for an executor's lane).
	InputTokens  int64
	OutputTokens int64
}

// JobQuery selects jobs by state, most recently updated first.
type JobQuery struct {
	States []string // empty: queued, running and dead
	Limit  int      // 0 means DefaultRunPage, at most MaxRunPage
}

// JobView is one job of the queue.
type JobView struct {
	ID            int64
	Repo          string
	PR            int
	HeadSHA       string
	State         string
	Reason        string
	Attempts      int
	Reruns        int
	LastError     string
	NextAttemptAt time.Time
	LeaseOwner    string    // empty unless running
	LeaseExpires  time.Time // zero unless running
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// RefusalCount is how often a refusal code ended a run.
type RefusalCount struct {
	Code validation.Code
	Runs int
	Last time.Time // the newest such run's finish
}

// ShadowPair is how a primary executor and its shadow agreed.
type ShadowPair struct {
	Primary        string
	Shadow         string
	Runs           int // runs with a shadow lane
	OutcomesAgreed int // the shadow ended with the primary's outcome
	Errors         int // the shadow lane errored or timed out
	StepsAgreed    int
	StepsTotal     int
}

// RepoCostDay is the cost of one executor's lane for one repository on
// one UTC day: the row of the costs grouped by repository.
type RepoCostDay struct {
	Repo string // owner/name of the job the spans belong to
	CostDay
}

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
