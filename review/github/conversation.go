package github

// The conversation on a pull request beyond the summary: each inline
// finding carries a hidden fingerprint marker so a later run finds its
// thread (ReviewThreads, graphql.go) instead of posting it again; replies
// in a thread; answers to commands (issue comments, reactions); the
// commenter's permission; and the compare API for incremental review.
//
// The fingerprint marker is added here, after the comment's untrusted
// body was neutralized, so no text a model or a pull request wrote can
// pose as one:
//
//	<!-- gilf:finding=<16 hex digits> -->

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	gh "github.com/google/go-github/v84/github"
)

var (
	fingerprintRe = regexp.MustCompile(`^[0-9a-f]{16}$`)
	// commitRe is a full commit id (SHA-1 or SHA-256).
	commitRe = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// findingMarkerRe finds a fingerprint marker on a line of its own.
var findingMarkerRe = regexp.MustCompile(`(?m)^<!-- gilf:finding=([0-9a-f]{16}) -->$`)

// FindingMarker is the hidden line that carries a finding's fingerprint.
func FindingMarker(fp string) string { return "<!-- gilf:finding=" + fp + " -->" }

// FindingOf returns the fingerprint a comment body carries, "" when none.
func FindingOf(body string) string {
	if m := findingMarkerRe.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// NoteMarker is a hidden line that makes a reply gilf posts in a thread
// idempotent: key names what the reply says (e.g. "moved=12@<sha>").
func NoteMarker(key string) string { return "<!-- gilf:note=" + key + " -->" }

var noteMarkerRe = regexp.MustCompile(`(?m)^<!-- gilf:note=([A-Za-z0-9=@._:-]{1,80}) -->$`)

// NoteOf returns the note key a reply gilf posted carries, "" when none.
func NoteOf(body string) string {
	if m := noteMarkerRe.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// MaxReplyBytes caps a reply or an issue comment gilf posts.
const MaxReplyBytes = 16 << 10

// ReplyInThread posts body as a reply to review comment commentID of the
// pull request, with NoteMarker(key) appended. The body is gilf's own
// text; any "<!-- gilf:" in it is neutralized all the same.
func (c *Client) ReplyInThread(ctx context.Context, r Repo, number int, commentID int64, key, body string) error {
	g, err := c.forRepo(r)
	if err != nil {
		return err
	}
	text := clip(strings.ReplaceAll(body, markerPrefix, neutralPrefix), MaxReplyBytes) + "\n\n" + NoteMarker(key)
	err = c.call(ctx, "reply in review thread", func(ctx context.Context) (*gh.Response, error) {
		_, resp, err := g.PullRequests.CreateCommentInReplyTo(ctx, r.Owner, r.Name, number, text, commentID)
		return resp, err
	})
	if err != nil {
		return fmt.Errorf("%s#%d: %w", r, number, err)
	}
	return nil
}

// CommentOnPR posts an issue comment on the pull request (the answer to
// a command), clipped to MaxReplyBytes.
func (c *Client) CommentOnPR(ctx context.Context, r Repo, number int, body string) error {
	g, err := c.forRepo(r)
	if err != nil {
		return err
	}
	text := clip(strings.ReplaceAll(body, markerPrefix, neutralPrefix), MaxReplyBytes)
	err = c.call(ctx, "comment on pull request", func(ctx context.Context) (*gh.Response, error) {
		_, resp, err := g.Issues.CreateComment(ctx, r.Owner, r.Name, number, &gh.IssueComment{Body: gh.Ptr(text)})
		return resp, err
	})
	if err != nil {
		return fmt.Errorf("%s#%d: %w", r, number, err)
	}
	return nil
}

// ReactionEyes is the reaction gilf leaves on a command it accepted.
const ReactionEyes = "eyes"

// React adds a reaction to an issue comment. GitHub answers 200 for a
// reaction that already exists, so a retry adds nothing.
func (c *Client) React(ctx context.Context, r Repo, commentID int64, content string) error {
	g, err := c.forRepo(r)
	if err != nil {
		return err
	}
	err = c.call(ctx, "react to comment", func(ctx context.Context) (*gh.Response, error) {
		_, resp, err := g.Reactions.CreateIssueCommentReaction(ctx, r.Owner, r.Name, commentID, content)
		return resp, err
	})
	if err != nil {
		return fmt.Errorf("%s comment %d: %w", r, commentID, err)
	}
	return nil
}

// Permission levels of the collaborator permission API.
const (
	PermissionAdmin = "admin"
	PermissionWrite = "write"
	PermissionRead  = "read"
	PermissionNone  = "none"
)

// Permission is user's permission on the repository (GET
// /repos/{o}/{r}/collaborators/{user}/permission): admin, write (maintain
// included), read (triage included) or none. A user GitHub does not know
// as a collaborator (404) has none.
func (c *Client) Permission(ctx context.Context, r Repo, user string) (string, error) {
	g, err := c.forRepo(r)
	if err != nil {
		return "", err
	}
	if user == "" || strings.ContainsAny(user, "/?#%") {
		return "", fmt.Errorf("permission of %q: %w", user, ErrInvalidInput)
	}
	var level string
	err = c.call(ctx, "get collaborator permission", func(ctx context.Context) (*gh.Response, error) {
		p, resp, err := g.Repositories.GetPermissionLevel(ctx, r.Owner, r.Name, user)
		if err == nil {
			level = p.GetPermission()
		}
		return resp, err
	})
	if statusOf(err) == http.StatusNotFound {
		return PermissionNone, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s permission of %s: %w", r, user, err)
	}
	return level, nil
}

// CanWrite says whether a permission level is write or higher.
func CanWrite(level string) bool { return level == PermissionAdmin || level == PermissionWrite }

// Comparison statuses of the compare API.
const (
	CompareAhead     = "ahead"     // head is base plus commits: base is an ancestor
	CompareIdentical = "identical" // the same commit
	CompareBehind    = "behind"
	CompareDiverged  = "diverged" // a force-push or a rebase
)

// comparePerPage is the compare API's file page size; maxCompareFiles
// bounds what is read (GitHub itself lists at most 300 files).
const (
	comparePerPage  = 100
	maxCompareFiles = 300
)

// Comparison is what changed from base to head.
type Comparison struct {
	Status string
	Files  []ChangedFile
	// Truncated: more files changed than were listed.
	Truncated bool
}

// Compare reads GET /repos/{o}/{r}/compare/{base}...{head}: the status
// (ahead when base is an ancestor of head) and the changed files with
// their patches.
func (c *Client) Compare(ctx context.Context, r Repo, base, head string) (Comparison, error) {
	g, err := c.forRepo(r)
	if err != nil {
		return Comparison{}, err
	}
	if !commitRe.MatchString(base) || !commitRe.MatchString(head) {
		return Comparison{}, fmt.Errorf("compare %q...%q: %w", base, head, ErrInvalidInput)
	}
	var out Comparison
	opts := &gh.ListOptions{PerPage: comparePerPage, Page: 1}
	for len(out.Files) < maxCompareFiles {
		var cmp *gh.CommitsComparison
		var next int
		err := c.call(ctx, "compare commits", func(ctx context.Context) (*gh.Response, error) {
			var resp *gh.Response
			var err error
			cmp, resp, err = g.Repositories.CompareCommits(ctx, r.Owner, r.Name, base, head, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return Comparison{}, fmt.Errorf("%s compare %s...%s: %w", r, shortSHA(base), shortSHA(head), err)
		}
		out.Status = cmp.GetStatus()
		for _, f := range cmp.Files {
			out.Files = append(out.Files, ChangedFile{Name: f.GetFilename(), Previous: f.GetPreviousFilename(), Status: f.GetStatus(), Patch: f.GetPatch()})
		}
		if next == 0 || len(cmp.Files) == 0 {
			return out, nil
		}
		opts.Page = next
	}
	out.Truncated = true
	return out, nil
}

// semanticLineRe is the summary's hidden line naming the head the
// semantic review last covered (see Publication.SemanticHead).
var semanticLineRe = regexp.MustCompile(`(?m)^<!-- gilf:semantic sha=([0-9a-f]{40}|[0-9a-f]{64}) -->$`)

// semanticLine is the hidden header line of Publication.SemanticHead.
func semanticLine(sha string) string {
	if !commitRe.MatchString(sha) {
		return ""
	}
	return "<!-- gilf:semantic sha=" + sha + " -->\n"
}

// SemanticHead reads the head the semantic review last covered from the
// pull request's summary review ("" when there is none, or no head was
// reviewed yet). Only the header gilf wrote is read: the body below it
// has every gilf marker neutralized.
func (c *Client) SemanticHead(ctx context.Context, r Repo, number int) (string, error) {
	g, err := c.forRepo(r)
	if err != nil {
		return "", err
	}
	reviews, err := c.ourReviews(ctx, g, r, number)
	if err != nil {
		return "", fmt.Errorf("%s#%d: %w", r, number, err)
	}
	rv := findSummary(reviews)
	if rv == nil {
		return "", nil
	}
	return semanticHeadOf(rv.GetBody()), nil
}

// semanticHeadOf reads the semantic line among a summary's header lines
// (before the first line that is not a hidden gilf line).
func semanticHeadOf(body string) string {
	body = body[:min(len(body), 4096)]
	var header strings.Builder
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, markerPrefix) {
			break
		}
		header.WriteString(line)
	}
	if m := semanticLineRe.FindStringSubmatch(header.String()); m != nil {
		return m[1]
	}
	return ""
}
