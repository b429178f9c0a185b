package github

// One summary per pull request, edited in place.
//
// gilf keeps at most one summary review visible on a pull request: the
// first job creates it (event COMMENT) and every later job edits it in
// place (PUT …/pulls/{n}/reviews/{id}) to show the newest head's result,
// with the earlier heads folded into a collapsed history. Why a review and
// not an issue comment: a review's body can be edited just the same, the
// SPEC says gilf "posts a review", and a review is what can carry inline
// comments on the diff later; an issue comment can do neither of the
// last two.
//
// The summary review is always a COMMENT, so editing it never changes a
// merge block. When the caller asks for REQUEST_CHANGES, a separate short
// review requests changes (idempotent by its own marker), and every
// publication dismisses the earlier jobs' REQUEST_CHANGES reviews, so a
// later head that passes never leaves a stale block behind.
//
// The body gilf writes:
//
//	<!-- gilf:summary -->
//	<!-- gilf:job=<job id> -->
//	<!-- gilf:head sha=<sha> title=<query-escaped verdict title> -->
//	<Publication.Body>
//
//	<!-- gilf:history-begin -->
//	<details><summary>Earlier heads (N)</summary>
//
//	- `abc1234` <title> (job <id>) <!-- gilf:history sha=… job=… title=… -->
//	…
//
//	</details>
//
// The hidden lines carry what the next edit needs to read back (the
// current head becomes the first history line). Only gilf's bot can edit
// its review, but the body is still parsed defensively: bounded in size,
// only lines that match exactly, at most MaxSummaryHistory of them, and
// any "<!-- gilf:" in Publication.Body (which quotes untrusted output) is
// neutralized so it cannot pose as one of these lines.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/internal/logkey"
)

const (
	// SummaryMarker identifies gilf's summary review of a pull request.
	SummaryMarker = "<!-- gilf:summary -->"
	// MaxSummaryHistory caps the earlier heads the summary lists; the
	// oldest are dropped first (and before the current result is cut
	// to fit MaxReviewBodyBytes).
	MaxSummaryHistory = 20
	// maxHistoryTitleBytes keeps one history line short.
	maxHistoryTitleBytes = 200
	// shortSHALen is how much of a head sha a history line shows.
	shortSHALen = 7
	// reviewChangesRequested is the state of a REQUEST_CHANGES review.
	reviewChangesRequested = "CHANGES_REQUESTED"

	historyBegin  = "<!-- gilf:history-begin -->"
	markerPrefix  = "<!-- gilf:"
	neutralPrefix = "<!-- gilf&#58;" // still a hidden comment, no longer a marker
)

// ChangesMarker identifies the REQUEST_CHANGES review of one job.
func ChangesMarker(jobID string) string { return "<!-- gilf:changes=" + jobID + " -->" }

var (
	jobLineRe     = regexp.MustCompile(`^<!-- gilf:job=([A-Za-z0-9._-]{1,64}) -->$`)
	headLineRe    = regexp.MustCompile(`^<!-- gilf:head sha=(\S{1,200}) title=(\S{0,1000}) -->$`)
	historyLineRe = regexp.MustCompile(`<!-- gilf:history sha=(\S{1,200}) job=([A-Za-z0-9._-]{1,64}) title=(\S{0,1000}) -->$`)
	changesRe     = regexp.MustCompile(`^<!-- gilf:changes=([A-Za-z0-9._-]{1,64}) -->`)
	// shaRe: a head that is read back must look like a commit id.
	shaRe = regexp.MustCompile(`^[0-9A-Za-z]{1,64}$`)
)

// headResult is one head's result as the summary records it.
type headResult struct {
	sha, job, title string
	// sem is the head the semantic review covered (conversation.go);
	// only the current head's is written.
	sem string
}

// PostReview publishes p's reviews on the pull request (see
// publishReviews) and returns the summary review's id and whether it
// already showed p's job (nothing was sent).
func (c *Client) PostReview(ctx context.Context, r Repo, number int, p Publication) (id int64, found bool, err error) {
	if err := p.validate(); err != nil {
		return 0, false, err
	}
	g, err := c.forRepo(r)
	if err != nil {
		return 0, false, err
	}
	var out Posted
	if err := c.publishReviews(ctx, g, r, number, p, &out); err != nil {
		return out.ReviewID, false, fmt.Errorf("%s#%d: %w", r, number, err)
	}
	return out.ReviewID, out.ReviewFound, nil
}

// publishReviews creates or edits the summary review to show p, posts
// the REQUEST_CHANGES review when p asks for it, dismisses the earlier
// jobs' REQUEST_CHANGES reviews, and posts p's inline comments
// (comments.go).
func (c *Client) publishReviews(ctx context.Context, g *gh.Client, r Repo, number int, p Publication, out *Posted) error {
	reviews, err := c.ourReviews(ctx, g, r, number)
	if err != nil {
		return err
	}
	if err := c.publishSummary(ctx, g, r, number, p, reviews, out); err != nil {
		return err
	}
	if p.Event == EventRequestChanges {
		if err := c.requestChanges(ctx, g, r, number, p, reviews, out); err != nil {
			return err
		}
	}
	if err := c.dismissStale(ctx, g, r, number, p, reviews, out); err != nil {
		return err
	}
	return c.postComments(ctx, g, r, number, p, reviews, out)
}

func (c *Client) publishSummary(ctx context.Context, g *gh.Client, r Repo, number int, p Publication, reviews []*gh.PullRequestReview, out *Posted) error {
	cur := headResult{sha: p.HeadSHA, job: p.JobID, title: historyTitle(p.Title), sem: p.SemanticHead}
	body := summaryBody(p.JobID, p.Body)
	sum := findSummary(reviews)
	if sum == nil {
		var landed *gh.PullRequestReview
		err := c.post(ctx, "post summary review", afterFirst(func(ctx context.Context) (bool, error) {
			rs, err := c.ourReviews(ctx, g, r, number)
			landed = findSummary(rs)
			return landed != nil, err
		}), func(ctx context.Context) (*gh.Response, error) {
			rv, resp, err := g.PullRequests.CreateReview(ctx, r.Owner, r.Name, number, &gh.PullRequestReviewRequest{
				CommitID: gh.Ptr(p.HeadSHA),
				Body:     gh.Ptr(renderSummary(cur, body, nil)),
				Event:    gh.Ptr(EventComment),
			})
			if err == nil {
				out.ReviewID = rv.GetID()
			}
			return resp, err
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, errLanded) {
			return err
		}
		sum = landed // an earlier attempt's, or another job's that came first
	}
	out.ReviewID = sum.GetID()
	if showsJob(sum.GetBody(), p.JobID) {
		c.log.Info("summary review already shows this job; not editing it", logkey.Repo, r.String(), logkey.PR, number, logkey.ReviewID, out.ReviewID)
		out.ReviewFound = true
		return nil
	}
	prev, history := parseSummary(sum.GetBody())
	if prev.job != "" {
		history = append([]headResult{prev}, history...)
	}
	newBody := renderSummary(cur, body, history)
	err := c.post(ctx, "edit summary review", afterFirst(func(ctx context.Context) (bool, error) {
		rs, err := c.ourReviews(ctx, g, r, number)
		for _, rv := range rs {
			if rv.GetID() == out.ReviewID {
				return showsJob(rv.GetBody(), p.JobID), err
			}
		}
		return false, err
	}), func(ctx context.Context) (*gh.Response, error) {
		_, resp, err := g.PullRequests.UpdateReview(ctx, r.Owner, r.Name, number, out.ReviewID, newBody)
		return resp, err
	})
	if err != nil && !errors.Is(err, errLanded) {
		return err
	}
	out.ReviewUpdated = true
	return nil
}

// requestChanges posts p's short REQUEST_CHANGES review unless one with
// its marker exists.
func (c *Client) requestChanges(ctx context.Context, g *gh.Client, r Repo, number int, p Publication, reviews []*gh.PullRequestReview, out *Posted) error {
	marker := ChangesMarker(p.JobID)
	find := func(rs []*gh.PullRequestReview) int64 {
		for _, rv := range rs {
			if strings.HasPrefix(rv.GetBody(), marker) {
				return rv.GetID()
			}
		}
		return 0
	}
	if id := find(reviews); id != 0 {
		out.ChangesReviewID, out.ChangesReviewFound = id, true
		return nil
	}
	body := marker + "\n**gilf requests changes** on `" + shortSHA(p.HeadSHA) + "`: " + visibleTitle(p.Title) +
		"\n\nThe details are in gilf's summary review of this pull request. This review is dismissed when a later head passes."
	err := c.post(ctx, "post request-changes review", afterFirst(func(ctx context.Context) (bool, error) {
		rs, err := c.ourReviews(ctx, g, r, number)
		out.ChangesReviewID = find(rs)
		return out.ChangesReviewID != 0, err
	}), func(ctx context.Context) (*gh.Response, error) {
		rv, resp, err := g.PullRequests.CreateReview(ctx, r.Owner, r.Name, number, &gh.PullRequestReviewRequest{
			CommitID: gh.Ptr(p.HeadSHA),
			Body:     gh.Ptr(body),
			Event:    gh.Ptr(EventRequestChanges),
		})
		if err == nil {
			out.ChangesReviewID = rv.GetID()
		}
		return resp, err
	})
	if errors.Is(err, errLanded) {
		out.ChangesReviewFound = true
		return nil
	}
	return err
}

// dismissStale dismisses gilf's REQUEST_CHANGES reviews of other jobs.
// Only a *TransientError fails the publication (it is retried); any
// other refusal (say, a protected branch that lets only some people
// dismiss) is logged and the result still published.
func (c *Client) dismissStale(ctx context.Context, g *gh.Client, r Repo, number int, p Publication, reviews []*gh.PullRequestReview, out *Posted) error {
	msg := "superseded by gilf's result for " + shortSHA(p.HeadSHA)
	for _, rv := range reviews {
		m := changesRe.FindStringSubmatch(rv.GetBody())
		if rv.GetState() != reviewChangesRequested || m == nil || m[1] == p.JobID {
			continue
		}
		id := rv.GetID()
		err := c.post(ctx, "dismiss review", afterFirst(func(ctx context.Context) (bool, error) {
			rs, err := c.ourReviews(ctx, g, r, number)
			for _, x := range rs {
				if x.GetID() == id {
					return x.GetState() != reviewChangesRequested, err
				}
			}
			return err == nil, err // gone
		}), func(ctx context.Context) (*gh.Response, error) {
			_, resp, err := g.PullRequests.DismissReview(ctx, r.Owner, r.Name, number, id, &gh.PullRequestReviewDismissalRequest{Message: gh.Ptr(msg)})
			return resp, err
		})
		var te *TransientError
		switch {
		case err == nil || errors.Is(err, errLanded):
			out.Dismissed = append(out.Dismissed, id)
		case errors.As(err, &te):
			return err
		default:
			c.log.Warn("could not dismiss an earlier request-changes review", logkey.Repo, r.String(), logkey.PR, number, logkey.ReviewID, id, logkey.Err, errorClass(err))
		}
	}
	return nil
}

// ourReviews lists this App's reviews of the pull request, oldest first.
func (c *Client) ourReviews(ctx context.Context, g *gh.Client, r Repo, number int) ([]*gh.PullRequestReview, error) {
	var out []*gh.PullRequestReview
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
			return nil, err
		}
		for _, rv := range page {
			if c.ours(rv.GetUser()) {
				out = append(out, rv)
			}
		}
		if next == 0 {
			break
		}
		opts.Page = next
	}
	return out, nil
}

// findSummary returns the first (oldest) summary review, or nil.
func findSummary(reviews []*gh.PullRequestReview) *gh.PullRequestReview {
	for _, rv := range reviews {
		if strings.Contains(rv.GetBody(), SummaryMarker) {
			return rv
		}
	}
	return nil
}

// summaryBody is the publication's body with its own job marker taken
// out (the header carries it) and any other gilf marker neutralized.
func summaryBody(jobID, body string) string {
	m := Marker(jobID)
	if i := strings.Index(body, m); i >= 0 {
		body = body[:i] + strings.TrimPrefix(body[i+len(m):], "\n")
	}
	return strings.ReplaceAll(body, markerPrefix, neutralPrefix)
}

// renderSummary builds the summary review's body: header, body, history
// newest first. Over MaxReviewBodyBytes, the oldest history lines go
// first, then the body is clipped.
func renderSummary(cur headResult, body string, history []headResult) string {
	header := SummaryMarker + "\n" + Marker(cur.job) + "\n" +
		"<!-- gilf:head sha=" + url.QueryEscape(cur.sha) + " title=" + url.QueryEscape(cur.title) + " -->\n" +
		semanticLine(cur.sem)
	history = history[:min(len(history), MaxSummaryHistory)]
	for {
		block := historyBlock(history)
		room := MaxReviewBodyBytes - len(header) - len(block)
		if len(body) <= room || len(history) == 0 {
			return header + clip(body, room) + block
		}
		history = history[:len(history)-1]
	}
}

func historyBlock(history []headResult) string {
	if len(history) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n%s\n<details><summary>Earlier heads (%d)</summary>\n\n", historyBegin, len(history))
	for _, h := range history {
		fmt.Fprintf(&b, "- `%s` %s (job %s) <!-- gilf:history sha=%s job=%s title=%s -->\n",
			shortSHA(h.sha), visibleTitle(h.title), h.job, url.QueryEscape(h.sha), h.job, url.QueryEscape(h.title))
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

// parseSummary reads back the current head and the history of a summary
// body gilf wrote. What it does not recognize, it ignores.
func parseSummary(body string) (cur headResult, history []headResult) {
	body = body[:min(len(body), 2*MaxReviewBodyBytes)]
	lines := strings.SplitN(body, "\n", 4)
	if len(lines) >= 3 && lines[0] == SummaryMarker {
		j, h := jobLineRe.FindStringSubmatch(lines[1]), headLineRe.FindStringSubmatch(lines[2])
		if j != nil && h != nil {
			sha, err1 := url.QueryUnescape(h[1])
			title, err2 := url.QueryUnescape(h[2])
			if err1 == nil && err2 == nil && shaRe.MatchString(sha) {
				cur = headResult{sha: sha, job: j[1], title: historyTitle(title)}
			}
		}
	}
	i := strings.LastIndex(body, "\n"+historyBegin+"\n")
	if i < 0 {
		return cur, nil
	}
	for _, line := range strings.Split(body[i+len(historyBegin)+2:], "\n") {
		if len(history) == MaxSummaryHistory {
			break
		}
		m := historyLineRe.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(line, "- `") {
			continue
		}
		sha, err1 := url.QueryUnescape(m[1])
		title, err2 := url.QueryUnescape(m[3])
		if err1 != nil || err2 != nil || !shaRe.MatchString(sha) {
			continue
		}
		history = append(history, headResult{sha: sha, job: m[2], title: historyTitle(title)})
	}
	return cur, history
}

// showsJob says whether a summary body shows jobID's result: its header
// names the job (or, for a header gilf cannot read, the part above the
// history carries the job's marker).
func showsJob(body, jobID string) bool {
	if cur, _ := parseSummary(body); cur.job != "" {
		return cur.job == jobID
	}
	if i := strings.LastIndex(body, "\n"+historyBegin+"\n"); i >= 0 {
		body = body[:i]
	}
	return strings.Contains(body, Marker(jobID))
}

// historyTitle is a verdict title as one short line.
func historyTitle(s string) string { return clipLine(firstLine(s), maxHistoryTitleBytes) }

// visibleTitle is a title safe to show inline: no HTML.
func visibleTitle(s string) string {
	s = historyTitle(s)
	if s == "" {
		return "(no title)"
	}
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

func shortSHA(sha string) string { return sha[:min(len(sha), shortSHALen)] }
