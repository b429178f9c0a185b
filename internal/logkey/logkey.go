// Package logkey holds the attribute keys gilf's log lines share, one
// spelling each (go-githubapp's LogKey… constants), so that a search by
// key finds every line about a delivery, a job or an executor. A key only
// one package's lines use, for a detail of its own, may stay a literal
// there; TestKeysAreConstants keeps every key named here out of literals.
package logkey

// What a line is about: the delivery, the job, the run and what ran it.
const (
	DeliveryID     = "delivery_id" // X-GitHub-Delivery
	Event          = "event"       // X-GitHub-Event
	Action         = "action"      // the payload's action
	InstallationID = "installation_id"
	Repo           = "repo" // owner/name
	PR             = "pr"
	HeadSHA        = "head_sha"
	JobID          = "job_id"
	JobState       = "job_state"
	Rerun          = "rerun"
	Attempt        = "attempt"
	RunID          = "run_id"
	CheckRunID     = "check_run_id"
	ReviewID       = "review_id"
	Executor       = "executor"
	SandboxID      = "sandbox_id"
	Step           = "step"
	Outcome        = "outcome"
	RefusalCode    = "refusal_code"
)

// What happened, and where.
const (
	Err        = "err" // the error, never "error"
	Reason     = "reason"
	Status     = "status"
	Detail     = "detail"
	Count      = "count"
	Wait       = "wait"        // before a retry
	DurationMS = "duration_ms" // milliseconds
	Host       = "host"
	Port       = "port"
	Dir        = "dir"
	Key        = "key"     // an evidence object's
	Manager    = "manager" // a package manager
	Version    = "version" // of a tool, of a migration
)
