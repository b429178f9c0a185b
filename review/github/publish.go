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

// Marker is the hidden comment that identifies the review of one job.
func Marker(jobID string) string { return "<!-- gilf:job=" + jobID + " -->" }

// Publication is what gilf posts for one job: one review and one check
// run on HeadSHA.
type Publication struct {
	JobID   string // [A-Za-z0-9._-]{1,64}; carried as the review marker and the check run's external_id
	HeadSHA string
	Body    string // the review body; the marker is added when missing
	Event   string // EventComment or EventRequestChanges
	// Check run.
	Conclusion string // success, failure, neutral, action_required
	Title      string
	Summary    string
}

func (p Publication) validate() error {
	var errs []error
	if !jobIDRe.MatchString(p.JobID) {
		errs = append(errs, fmt.Errorf("job id %q", p.JobID))
	}
	if p.HeadSHA == "" {
		errs = append(errs, errors.New("empty head sha"))
	}
	if p.Event != EventComment && p.Event != EventRequestChanges {
		errs = append(errs, fmt.Errorf("review event %q", p.Event))
	}
	switch p.Conclusion {
	case ConclusionSuccess, ConclusionFailure, ConclusionNeutral, ConclusionActionRequired:
	default:
		errs = append(errs, fmt.Errorf("check conclusion %q", p.Conclusion))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("publication: %w: %w", ErrInvalidInput, err)
	}
	return nil
}

// Posted says what Publish created (or found from an earlier attempt).
type Posted struct {
	ReviewID   int64
	CheckRunID int64
	// Found is true for each item that an earlier attempt had already
	// posted (nothing was posted twice).
	ReviewFound, CheckRunFound bool
}

// Publish re-reads the pull request head and, when it still is
// p.HeadSHA, posts the review and the check run. A moved head gives a
// *StaleHeadError (errors.Is ErrStaleHead) and posts nothing. Each post is
// idempotent: an earlier one is found by the job marker (review) or the
// external_id (check run) before posting and before any retry.
func (c *Client) Publish(ctx context.Context, r Repo, number int, p Publication) (Posted, error) {
	if err := p.validate(); err != nil {
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
	out.ReviewID, out.ReviewFound, err = c.PostReview(ctx, r, number, p)
	if err != nil {
		return out, err
	}
	out.CheckRunID, out.CheckRunFound, err = c.PostCheckRun(ctx, r, p)
	if err != nil {
		return out, err
	}
	return out, nil
}

// PostReview posts one pull request review for p (commit_id, body with
// the job marker, event) unless one carrying the marker exists. It
// returns the review id and whether it was found rather than posted.
func (c *Client) PostReview(ctx context.Context, r Repo, number int, p Publication) (id int64, found bool, err error) {
	if err := p.validate(); err != nil {
		return 0, false, err
	}
	g, err := c.forRepo(r)
	if err != nil {
		return 0, false, err
	}
	marker := Marker(p.JobID)
	body := p.Body
	if !strings.Contains(body, marker) {
		body = marker + "\n" + body
	}
	body = clip(body, MaxReviewBodyBytes)
	landed := func(ctx context.Context) (bool, error) {
		var err error
		id, err = c.findReview(ctx, g, r, number, marker)
		return id != 0, err
	}
	err = c.post(ctx, "post review", landed, func(ctx context.Context) (*gh.Response, error) {
		rv, resp, err := g.PullRequests.CreateReview(ctx, r.Owner, r.Name, number, &gh.PullRequestReviewRequest{
			CommitID: gh.Ptr(p.HeadSHA),
			Body:     gh.Ptr(body),
			Event:    gh.Ptr(p.Event),
		})
		if err == nil {
			id = rv.GetID()
		}
		return resp, err
	})
	if errors.Is(err, errLanded) {
		c.log.Info("review already posted; not posting again", "repo", r.String(), "pr", number, "review_id", id)
		return id, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%s#%d: %w", r, number, err)
	}
	return id, false, nil
}

func (c *Client) findReview(ctx context.Context, g *gh.Client, r Repo, number int, marker string) (int64, error) {
	opts := &gh.ListOptions{PerPage: reviewsPerPage, Page: 1}
	for range maxListPages {
		var page []*gh.PullRequestReview
		var next int
		err := c.call(ctx, "list reviews", func(ctx context.Context) (*gh.Response, error) {
			var resp *gh.Response
			var err error
			page, resp, err = g.PullRequests.ListReviews(ctx, r.Owner, r.Name, number, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return 0, err
		}
		for _, rv := range page {
			if c.ours(rv.GetUser()) && strings.Contains(rv.GetBody(), marker) {
				return rv.GetID(), nil
			}
		}
		if next == 0 {
			return 0, nil
		}
		opts.Page = next
	}
	return 0, nil
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

// PostCheckRun creates one completed check run named Config.CheckName on
// p.HeadSHA with external_id p.JobID, unless one exists.
func (c *Client) PostCheckRun(ctx context.Context, r Repo, p Publication) (id int64, found bool, err error) {
	if err := p.validate(); err != nil {
		return 0, false, err
	}
	g, err := c.forRepo(r)
	if err != nil {
		return 0, false, err
	}
	landed := func(ctx context.Context) (bool, error) {
		var err error
		id, err = c.findCheckRun(ctx, g, r, p)
		return id != 0, err
	}
	title := clipLine(firstLine(p.Title), MaxCheckTitleBytes)
	if title == "" {
		title = c.cfg.CheckName + ": " + p.Conclusion
	}
	err = c.post(ctx, "post check run", landed, func(ctx context.Context) (*gh.Response, error) {
		cr, resp, err := g.Checks.CreateCheckRun(ctx, r.Owner, r.Name, gh.CreateCheckRunOptions{
			Name:        c.cfg.CheckName,
			HeadSHA:     p.HeadSHA,
			ExternalID:  gh.Ptr(p.JobID),
			Status:      gh.Ptr("completed"),
			Conclusion:  gh.Ptr(p.Conclusion),
			CompletedAt: &gh.Timestamp{Time: c.clock.Now().UTC()},
			Output: &gh.CheckRunOutput{
				Title:   gh.Ptr(title),
				Summary: gh.Ptr(clip(p.Summary, MaxCheckSummaryBytes)),
			},
		})
		if err == nil {
			id = cr.GetID()
		}
		return resp, err
	})
	if errors.Is(err, errLanded) {
		c.log.Info("check run already posted; not posting again", "repo", r.String(), "head_sha", p.HeadSHA, "check_run_id", id)
		return id, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%s check run: %w", r, err)
	}
	return id, false, nil
}

func (c *Client) findCheckRun(ctx context.Context, g *gh.Client, r Repo, p Publication) (int64, error) {
	opts := &gh.ListCheckRunsOptions{CheckName: gh.Ptr(c.cfg.CheckName), Filter: gh.Ptr("all"), AppID: gh.Ptr(c.cfg.AppID), ListOptions: gh.ListOptions{PerPage: checkRunsPerPage, Page: 1}}
	for range maxListPages {
		var res *gh.ListCheckRunsResults
		var next int
		err := c.call(ctx, "list check runs", func(ctx context.Context) (*gh.Response, error) {
			var resp *gh.Response
			var err error
			res, resp, err = g.Checks.ListCheckRunsForRef(ctx, r.Owner, r.Name, p.HeadSHA, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return 0, err
		}
		for _, cr := range res.CheckRuns {
			if cr.GetExternalID() == p.JobID && (cr.App == nil || cr.GetApp().GetID() == c.cfg.AppID) {
				return cr.GetID(), nil
			}
		}
		if next == 0 {
			return 0, nil
		}
		opts.Page = next
	}
	return 0, nil
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
