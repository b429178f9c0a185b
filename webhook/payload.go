package webhook

import (
	"fmt"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// payload holds only the fields intake needs; the raw body is stored
// whole. See decode.go for how it is read.
type payload struct {
	Action       string
	Number       int
	Installation *idRef
	Repository   *repoRef
	PullRequest  *prRef
	// BaseChanged is true when changes.base is present and not null: an
	// edited pull request whose base branch moved.
	BaseChanged         bool
	RepositoriesRemoved []repoRef
	// CheckRun and CheckSuite are the objects of check_run and
	// check_suite events.
	CheckRun   *checkRef
	CheckSuite *checkRef
	// Issue and Comment are issue_comment's (comment.go).
	Issue   *issueRef
	Comment *commentRef
}

// checkRef is what intake reads of a check run or a check suite (a suite
// has no external_id).
type checkRef struct {
	ID         int64
	ExternalID string
	HeadSHA    string
	AppID      int64 // app.id; 0 when the app is missing or null
}

type prRef struct {
	Number    int
	Draft     bool
	UpdatedAt string
	HeadSHA   string
	HeadRepo  *repoRef
	BaseRef   string
}

type idRef struct {
	ID int64
}

type repoRef struct {
	FullName string
}

// Limits on the strings intake keeps from a payload.
const (
	// MaxRepoNameLen bounds "owner/name" (GitHub allows 39 + 1 + 100).
	MaxRepoNameLen = 140
	// MaxRefLen bounds a base branch name (git allows more; GitHub's UI
	// stops well before).
	MaxRefLen = 255
)

// isJobAction reports the pull_request actions that ask for a review of
// the current head. Drafts are queued too: the pipeline reads the
// repository's review.drafts and decides. A label change asks again so
// execution.labels filters are evaluated anew (the store re-runs a job
// whose last run was skipped).
func isJobAction(action string) bool {
	switch action {
	case "opened", "synchronize", "reopened", "ready_for_review", "labeled", "unlabeled":
		return true
	}
	return false
}

// decision is what intake does with one delivery.
type decision struct {
	status validation.DeliveryStatus
	reason string
	job    *validation.JobSpec
	cancel *validation.Cancellation
	rerun  *validation.Rerun
	code   int // the HTTP status of a success
}

// actsOn reports the events whose payload intake reads; every other event
// is recorded and ignored (ping is answered).
func actsOn(event string) bool {
	switch event {
	case "pull_request", "installation", "installation_repositories", "check_run", "check_suite", "issue_comment":
		return true
	}
	return false
}

// classify is the action table. It is pure: the same event, payload and
// rules always give the same decision.
func classify(event string, p payload, r rules) decision {
	switch event {
	case "ping":
		return decision{status: validation.DeliveryRecorded, reason: "ping", code: 200}
	case "installation":
		switch p.Action {
		case "deleted", "suspend":
			return cancelDecision(p, nil, "installation "+p.Action)
		}
		return decision{status: validation.DeliveryRecorded, reason: "installation " + p.Action, code: 202}
	case "installation_repositories":
		if p.Action == "removed" {
			repos := make([]string, 0, len(p.RepositoriesRemoved))
			for _, r := range p.RepositoriesRemoved {
				repos = append(repos, r.FullName)
			}
			if len(repos) == 0 {
				return decision{status: validation.DeliveryRecorded, reason: "no repositories listed as removed", code: 202}
			}
			return cancelDecision(p, repos, "repository removed from installation")
		}
		return decision{status: validation.DeliveryRecorded, reason: "installation_repositories " + p.Action, code: 202}
	case "pull_request":
		return classifyPR(p)
	case "check_run", "check_suite":
		return classifyRerun(event, p, r.appID)
	case "issue_comment":
		return classifyComment(p, r)
	}
	return decision{status: validation.DeliveryIgnored, reason: "event " + event + " is not acted on", code: 202}
}

// closedDecision cancels the unfinished jobs of a closed pull request: a
// review of a closed (or merged) pull request is wasted sandbox time. A
// reopen makes its job runnable again.
func closedDecision(p payload) decision {
	if p.PullRequest == nil || p.Repository == nil || !validRepo(p.Repository.FullName) {
		return decision{status: validation.DeliveryIgnored, reason: "pull request closed", code: 202}
	}
	d := cancelDecision(p, []string{p.Repository.FullName}, "pull request closed")
	if d.cancel != nil {
		d.cancel.PR = p.PullRequest.Number
	}
	return d
}

func cancelDecision(p payload, repos []string, reason string) decision {
	if p.Installation == nil || p.Installation.ID == 0 {
		return decision{status: validation.DeliveryRecorded, reason: reason + ", but the payload names no installation", code: 202}
	}
	return decision{
		status: validation.DeliveryRecorded, reason: reason, code: 202,
		cancel: &validation.Cancellation{InstallationID: p.Installation.ID, Repos: repos, Reason: reason},
	}
}

func classifyPR(p payload) decision {
	if p.Action == "closed" {
		return closedDecision(p)
	}
	act := isJobAction(p.Action)
	if p.Action == "edited" {
		if !p.BaseChanged {
			return decision{status: validation.DeliveryIgnored, reason: "edited without a base branch change", code: 202}
		}
		act = true
	}
	if !act {
		return decision{status: validation.DeliveryIgnored, reason: "pull_request action " + quoteAction(p.Action) + " is not acted on", code: 202}
	}
	pr := p.PullRequest
	switch {
	case pr == nil:
		return invalid("pull_request object missing")
	case p.Repository == nil || !validRepo(p.Repository.FullName):
		return invalid("repository full_name missing or malformed")
	case !validSHA(pr.HeadSHA):
		return invalid("head sha is not 40 or 64 lower-case hex digits")
	case len(pr.BaseRef) > MaxRefLen:
		return invalid("base ref too long")
	}
	number := pr.Number
	if number == 0 {
		number = p.Number
	}
	if number <= 0 {
		return invalid("pull request number missing")
	}
	if pr.HeadRepo == nil || pr.HeadRepo.FullName == "" {
		return decision{status: validation.DeliverySkipped, reason: "head repository missing (the fork was deleted)", code: 202}
	}
	var inst int64
	reason := ""
	if p.Installation != nil {
		inst = p.Installation.ID
	}
	if inst == 0 {
		reason = "payload carries no installation; the job will end " + string(validation.CodeInstallationMissing)
	}
	updated, err := time.Parse(time.RFC3339, pr.UpdatedAt)
	if err != nil {
		updated = time.Time{} // unordered: the newest arrival wins
	}
	return decision{
		status: validation.DeliveryQueued, reason: reason, code: 202,
		job: &validation.JobSpec{
			Repo: p.Repository.FullName, PR: number, HeadSHA: pr.HeadSHA, HeadRepo: pr.HeadRepo.FullName,
			BaseRef: pr.BaseRef, InstallationID: inst, Trigger: p.Action, PRUpdatedAt: updated,
		},
	}
}

// checkOf is the check run or check suite an event is about, nil when
// none.
func checkOf(event string, p payload) *checkRef {
	switch event {
	case "check_run":
		return p.CheckRun
	case "check_suite":
		return p.CheckSuite
	}
	return nil
}

func invalid(reason string) decision {
	return decision{status: validation.DeliveryInvalid, reason: reason, code: 400}
}

// quoteAction keeps an unknown action printable and short.
func quoteAction(a string) string {
	if len(a) > 64 {
		a = a[:64]
	}
	return fmt.Sprintf("%q", a)
}

func validSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validRepo accepts "owner/name" with GitHub's characters.
func validRepo(s string) bool {
	if len(s) < 3 || len(s) > MaxRepoNameLen {
		return false
	}
	slash := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '/':
			if slash >= 0 {
				return false
			}
			slash = i
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return slash > 0 && slash < len(s)-1
}
