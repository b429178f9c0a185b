package github

import (
	"errors"
	"fmt"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Sentinel errors; the typed errors below match them with errors.Is.
var (
	// ErrStaleHead: the pull request's head moved on; the result is
	// recorded, not posted.
	ErrStaleHead = errors.New("pull request head moved on")
	// ErrHeadRepoMissing: head.repo is null (the fork was deleted).
	ErrHeadRepoMissing = errors.New("pull request head repository is missing")
	// ErrNoInstallation: the job has no installation id, so no token can
	// be minted.
	ErrNoInstallation = errors.New("no github app installation for this repository")
	// ErrRedirectRefused: a tarball redirect led to a host that is not
	// allowed.
	ErrRedirectRefused = errors.New("tarball redirect to a host that is not allowed")
	// ErrNotAFile: a base-branch path is a directory, symlink or submodule.
	ErrNotAFile = errors.New("not a regular file")
	// ErrTooLarge: a base-branch file or a tarball is over its cap.
	ErrTooLarge = errors.New("too large")
	// ErrInvalidInput: a publication the client refuses to send.
	ErrInvalidInput = errors.New("invalid input")
)

// TransientError is a failure worth retrying later: retries were used up
// on 5xx or network errors, or a rate limit asks for a wait longer than
// Retry.MaxWait. RetryAfter, when set, is the least wait before the job
// should run again. The job is rescheduled; no worker blocks on it.
type TransientError struct {
	Op         string
	RetryAfter time.Duration
	Err        error
}

func (e *TransientError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s: retry after %s: %v", e.Op, e.RetryAfter, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

func (e *TransientError) Unwrap() error { return e.Err }

// StaleHeadError says the head moved from Want to Got. It matches
// ErrStaleHead.
type StaleHeadError struct {
	Want, Got string
}

func (e *StaleHeadError) Error() string {
	return fmt.Sprintf("pull request head moved on: result is for %s, head is now %s", e.Want, e.Got)
}

func (e *StaleHeadError) Is(target error) bool { return target == ErrStaleHead }

// HeadRepoMissingError is returned by PullRequest when head.repo is null.
// PR holds everything else that was read, so the caller can still apply
// policy and record the refusal.
type HeadRepoMissingError struct {
	PR PullRequest
}

func (e *HeadRepoMissingError) Error() string {
	return fmt.Sprintf("pull request #%d: head repository is missing (the fork was deleted)", e.PR.Number)
}

func (e *HeadRepoMissingError) Is(target error) bool { return target == ErrHeadRepoMissing }

// Refusal is the refusal the pipeline records for this pull request.
func (e *HeadRepoMissingError) Refusal() *validation.Refusal {
	return validation.Refuse(validation.CodeHeadRepositoryMissing,
		"the pull request's head repository no longer exists (the fork was deleted), so there is nothing to check out")
}
