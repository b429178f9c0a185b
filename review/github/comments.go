package github

// Inline comments on the changed lines.
//
// A job's semantic review findings are posted as one review of their
// own (event COMMENT) whose comments[] sit on the diff. Its short body
// starts with a hidden marker naming the job, so a retry (or a second
// Publish of the same job) finds it and does not post it again:
//
//	<!-- gilf:comments=<job id> -->
//	**gilf's semantic review**: N comments on the changed lines.
//
// A review is created whole or not at all, so the one lookup of the
// marker is enough; there is nothing partial to resume.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/internal/logkey"
)

// Comment sides GitHub accepts; gilf comments on the new version of a
// file (RIGHT).
const (
	SideRight = "RIGHT"
	SideLeft  = "LEFT"
)

const (
	// MaxReviewComments caps the inline comments of one job; the rest
	// are dropped (in order) and counted in the review's body.
	MaxReviewComments = 50
	// MaxReviewCommentBytes caps one comment's body: a finding is a few
	// sentences, and fifty of them stay far below what GitHub accepts
	// in one request.
	MaxReviewCommentBytes = 8 << 10
)

// CommentsMarker identifies the review that carries one job's inline
// comments.
func CommentsMarker(jobID string) string { return "<!-- gilf:comments=" + jobID + " -->" }

// ReviewComment is one inline comment on a line of the pull request's
// diff at Publication.HeadSHA.
type ReviewComment struct {
	Path string // the file, relative to the repository root
	Line int    // 1 or more: the line of the file on Side
	Side string // SideRight (the default when empty) or SideLeft
	// Body is untrusted text, sanitized by the caller; any "<!-- gilf:"
	// in it is neutralized here and it is clipped to
	// MaxReviewCommentBytes.
	Body string
	// Fingerprint, when set (16 lower-case hex digits), is added as a
	// hidden FindingMarker line after the body, so a later run finds the
	// finding's thread (conversation.go); any other value is left out.
	Fingerprint string
}

// sendable says whether GitHub would accept c on a diff: a path, a line,
// a known side and a body. (Whether the line is in the diff is the
// caller's to know; GitHub answers 422 for the whole review otherwise.)
func (c ReviewComment) sendable() bool {
	switch c.Side {
	case "", SideRight, SideLeft:
	default:
		return false
	}
	return c.Path != "" && c.Line >= 1 && strings.TrimSpace(c.Body) != ""
}

func (c ReviewComment) wire() *gh.DraftReviewComment {
	side := c.Side
	if side == "" {
		side = SideRight
	}
	return &gh.DraftReviewComment{
		Path: gh.Ptr(c.Path),
		Line: gh.Ptr(c.Line),
		Side: gh.Ptr(side),
		Body: gh.Ptr(c.wireBody()),
	}
}

// wireBody is the body as sent: neutralized, clipped, and ending with the
// fingerprint marker when there is one.
func (c ReviewComment) wireBody() string {
	body := strings.ReplaceAll(c.Body, markerPrefix, neutralPrefix)
	if !fingerprintRe.MatchString(c.Fingerprint) {
		return clip(body, MaxReviewCommentBytes)
	}
	m := "\n\n" + FindingMarker(c.Fingerprint)
	return clip(body, MaxReviewCommentBytes-len(m)) + m
}

// sendableComments keeps, in order, the comments GitHub would accept, at
// most MaxReviewComments of them; unsendable counts those GitHub would
// refuse, over those beyond the cap. A pure function of the input, so
// every attempt posts the same review.
func sendableComments(cs []ReviewComment) (keep []ReviewComment, unsendable, over int) {
	for _, c := range cs {
		switch {
		case !c.sendable():
			unsendable++
		case len(keep) == MaxReviewComments:
			over++
		default:
			keep = append(keep, c)
		}
	}
	return keep, unsendable, over
}

// commentsBody is the short body of the comments review.
func commentsBody(jobID string, posted, over int) string {
	noun := "comments"
	if posted == 1 {
		noun = "comment"
	}
	body := fmt.Sprintf("%s\n**gilf's semantic review**: %d %s on the changed lines.", CommentsMarker(jobID), posted, noun)
	if over > 0 {
		body += fmt.Sprintf("\n\n%d more left out: gilf posts at most %d inline comments per head.", over, MaxReviewComments)
	}
	return body
}

// findComments returns the id of jobID's comments review, or 0.
func findComments(reviews []*gh.PullRequestReview, jobID string) int64 {
	marker := CommentsMarker(jobID)
	for _, rv := range reviews {
		if strings.HasPrefix(rv.GetBody(), marker) {
			return rv.GetID()
		}
	}
	return 0
}

// postComments posts p's inline comments as one COMMENT review unless
// one with the job's comments marker exists. reviews is the listing read
// at the start of this publication; every retry reads it again.
func (c *Client) postComments(ctx context.Context, g *gh.Client, r Repo, number int, p Publication, reviews []*gh.PullRequestReview, out *Posted) error {
	keep, unsendable, over := sendableComments(p.Comments)
	if unsendable > 0 {
		c.log.Warn("inline comments GitHub would refuse are not sent", logkey.Repo, r.String(), logkey.PR, number, logkey.HeadSHA, p.HeadSHA, "dropped", unsendable)
	}
	if len(keep) == 0 {
		return nil
	}
	if id := findComments(reviews, p.JobID); id != 0 {
		out.CommentsReviewID, out.CommentsReviewFound = id, true
		return nil
	}
	if over > 0 {
		c.log.Info("inline comments over the cap are not sent", logkey.Repo, r.String(), logkey.PR, number, logkey.HeadSHA, p.HeadSHA, "dropped", over)
	}
	wire := make([]*gh.DraftReviewComment, 0, len(keep))
	for _, cm := range keep {
		wire = append(wire, cm.wire())
	}
	body := commentsBody(p.JobID, len(keep), over)
	err := c.post(ctx, "post inline comments review", afterFirst(func(ctx context.Context) (bool, error) {
		rs, err := c.ourReviews(ctx, g, r, number)
		out.CommentsReviewID = findComments(rs, p.JobID)
		return out.CommentsReviewID != 0, err
	}), func(ctx context.Context) (*gh.Response, error) {
		rv, resp, err := g.PullRequests.CreateReview(ctx, r.Owner, r.Name, number, &gh.PullRequestReviewRequest{
			CommitID: gh.Ptr(p.HeadSHA),
			Body:     gh.Ptr(body),
			Event:    gh.Ptr(EventComment),
			Comments: wire,
		})
		if err == nil {
			out.CommentsReviewID = rv.GetID()
		}
		return resp, err
	})
	if errors.Is(err, errLanded) {
		out.CommentsReviewFound = true
		return nil
	}
	if err == nil {
		out.CommentsSent = len(keep)
	}
	return err
}
