package github

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	gh "github.com/google/go-github/v84/github"
)

// Review events gilf posts.
const (
	EventComment        = "COMMENT"
	EventRequestChanges = "REQUEST_CHANGES"
)

// Check-run conclusions gilf posts.
const (
	ConclusionSuccess        = "success"
	ConclusionFailure        = "failure"
	ConclusionNeutral        = "neutral"
	ConclusionActionRequired = "action_required"
	ConclusionSkipped        = "skipped"
)

// reviewsPerPage and checkRunsPerPage size the listings that look for an
// earlier post; maxListPages bounds them.
const (
	reviewsPerPage   = 100
	checkRunsPerPage = 100
	maxListPages     = 30
)

// truncatedNote ends a body or summary that was cut to GitHub's limit.
const truncatedNote = "\n\n…(truncated to GitHub's size limit)"

var jobIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Marker is the hidden comment that identifies the job whose result the
// summary review shows.
func Marker(jobID string) string { return "<!-- gilf:job=" + jobID + " -->" }

// Publication is what gilf posts for one job: the pull request's one
// summary review (edited in place, see summary.go) and the completion of
// the job's check run on HeadSHA.
type Publication struct {
	JobID   string // [A-Za-z0-9._-]{1,64}; carried as the review marker and the check run's external_id
	HeadSHA string
	Body    string // the summary; the markers are added (a job marker already in it is moved to the top)
	// Event is EventComment or EventRequestChanges. The summary review is
	// always a COMMENT; EventRequestChanges adds a separate short review
	// that requests changes (the caller decides the operator opt-in).
	Event string
	// NoReview posts no review and dismisses none: only the check run
	// is completed (a skipped draft). Event may be empty then.
	NoReview bool
	// Check run.
	Conclusion string // success, failure, neutral, action_required, skipped
	Title      string
	Summary    string // clipped to MaxCheckSummaryBytes
	Text       string // clipped to MaxCheckTextBytes
	DetailsURL string // empty: GitHub shows the App's page
	// Annotations are sent in this order, MaxAnnotationsPerRequest at a
	// time; one GitHub would refuse (no path, line or message, an
	// unknown level) is left out and logged.
	Annotations []Annotation
	// SemanticHead, when set (a full commit id), is the head the
	// semantic review has covered so far: a hidden header line of the
	// summary, read back by SemanticHead for the next incremental review.
	SemanticHead string
	// Comments are posted as one more COMMENT review of this job, inline
	// on the diff at HeadSHA (comments.go), at most MaxReviewComments of
	// them; none is posted when empty (or with NoReview).
	Comments []ReviewComment
}

func (p Publication) validate() error {
	var errs []error
	if !jobIDRe.MatchString(p.JobID) {
		errs = append(errs, fmt.Errorf("job id %q", p.JobID))
	}
	if p.HeadSHA == "" {
		errs = append(errs, errors.New("empty head sha"))
	}
	if !(p.NoReview && p.Event == "") && p.Event != EventComment && p.Event != EventRequestChanges {
		errs = append(errs, fmt.Errorf("review event %q", p.Event))
	}
	switch p.Conclusion {
	case ConclusionSuccess, ConclusionFailure, ConclusionNeutral, ConclusionActionRequired, ConclusionSkipped:
	default:
		errs = append(errs, fmt.Errorf("check conclusion %q", p.Conclusion))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("publication: %w: %w", ErrInvalidInput, err)
	}
	return nil
}

// Posted says what Publish created, updated, or found from an earlier
// attempt.
type Posted struct {
	// ReviewID is the pull request's gilf summary review (0 with
	// NoReview).
	ReviewID int64
	// CheckRunID is the job's check run.
	CheckRunID int64
	// ReviewFound: the summary review already showed this job (nothing
	// was sent). CheckRunFound: the check run was already completed
	// (nothing was sent).
	ReviewFound, CheckRunFound bool
	// ReviewUpdated: an existing summary review was edited in place to
	// show this job (else, unless found, it was created).
	ReviewUpdated bool
	// CheckRunCreated: the job had no check run yet (it never started
	// one, or crashed before), so it was created here.
	CheckRunCreated bool
	// AnnotationsSent counts the annotations sent by this call (fewer
	// than len(Annotations) when an earlier attempt sent some).
	AnnotationsSent int
	// ChangesReviewID is the REQUEST_CHANGES review of this job (with
	// EventRequestChanges); ChangesReviewFound says an earlier attempt
	// posted it.
	ChangesReviewID    int64
	ChangesReviewFound bool
	// Dismissed are earlier gilf REQUEST_CHANGES reviews dismissed now.
	Dismissed []int64
	// CommentsReviewID is the review carrying this job's inline
	// comments (0 when it has none); CommentsReviewFound says an earlier
	// attempt posted it; CommentsSent counts the comments this call
	// posted (0 when found).
	CommentsReviewID    int64
	CommentsReviewFound bool
	CommentsSent        int
}

// Publish re-reads the pull request head and, when it still is
// p.HeadSHA, publishes the reviews (summary.go, then the inline
// comments, comments.go) and completes the job's check run
// (checkrun.go). A moved head gives a *StaleHeadError (errors.Is
// ErrStaleHead) and posts nothing. Every step is idempotent: what an
// earlier attempt did is read back (the job marker in the summary, the
// changes and comments markers, the check run's external_id, status and
// output.annotations_count) before anything is sent and before any
// retry, so Publish can be called again after any failure.
func (c *Client) Publish(ctx context.Context, r Repo, number int, p Publication) (Posted, error) {
	if err := p.validate(); err != nil {
		return Posted{}, err
	}
	g, err := c.forRepo(r)
	if err != nil {
		return Posted{}, err
	}
	head, err := c.HeadSHA(ctx, r, number)
	if err != nil {
		return Posted{}, fmt.Errorf("re-read head: %w", err)
	}
	if head != p.HeadSHA {
		return Posted{}, &StaleHeadError{Want: p.HeadSHA, Got: head}
	}
	var out Posted
	if !p.NoReview {
		if err := c.publishReviews(ctx, g, r, number, p, &out); err != nil {
			return out, fmt.Errorf("%s#%d: %w", r, number, err)
		}
	}
	cr, err := c.completeCheckRun(ctx, g, r, p)
	out.CheckRunID, out.CheckRunFound, out.CheckRunCreated, out.AnnotationsSent = cr.id, cr.found, cr.created, cr.sent
	if err != nil {
		return out, fmt.Errorf("%s check run: %w", r, err)
	}
	return out, nil
}

// ours says whether a review author is this App: the configured bot
// login, or else any bot account (a person quoting the marker in their
// own review must not suppress gilf's).
func (c *Client) ours(u *gh.User) bool {
	if c.cfg.BotLogin != "" {
		return strings.EqualFold(u.GetLogin(), c.cfg.BotLogin)
	}
	return u.GetType() == "Bot"
}

// afterFirst wraps a landed check for a request just decided on from a
// fresh read: the first attempt goes ahead, every retry looks first.
func afterFirst(landed func(ctx context.Context) (bool, error)) func(ctx context.Context) (bool, error) {
	first := true
	return func(ctx context.Context) (bool, error) {
		if first {
			first = false
			return false, nil
		}
		return landed(ctx)
	}
}

// clip cuts s to at most max bytes on a rune boundary, ending with a note
// when it cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(truncatedNote)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if cut == 0 && max < len(truncatedNote) {
		cut = max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut]
	}
	return s[:cut] + truncatedNote
}

// clipLine cuts one line to at most max bytes on a rune boundary, ending
// with "…" when it cut.
func clipLine(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ell = "…"
	cut := max - len(ell)
	if cut < 0 {
		return ""
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}
