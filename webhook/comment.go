package webhook

import (
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// Commands in comments (issue 33): an issue_comment created on a pull
// request whose first line is addressed to gilf ("/gilf <command>" or
// "@<slug> <command>") is recorded as queued, with no job: the command
// worker reads it back from the store, checks the commenter's permission
// on GitHub (intake makes no API call) and acts. Every other comment —
// edited or deleted, on an issue, by a bot (gilf itself included), not
// addressed to gilf — is recorded and ignored.

// rules are what the action table needs besides the payload.
type rules struct {
	// appID is gilf's own App id (0: not configured, so no re-run is
	// ours).
	appID int64
	// commands: comments may give commands; slug is the App's slug for
	// the @-form ("" accepts "/gilf" only).
	commands bool
	slug     string
}

// issueRef is what intake reads of an issue_comment's issue.
type issueRef struct {
	Number int
	// IsPR: the issue is a pull request (issue.pull_request is present
	// and not null).
	IsPR bool
}

// commentRef is what intake reads of a comment.
type commentRef struct {
	ID   int64
	Body string
	User *userRef
}

type userRef struct {
	Login, Type string
}

func (r *issueRef) member(s *scanner, key []byte, depth int) (bool, error) {
	i, err := pick(key, "number", "pull_request")
	if err != nil {
		return false, err
	}
	switch i {
	case 0:
		return true, s.integer(&r.Number)
	case 1:
		r.IsPR = s.peek() != 'n'
		return true, s.skip(depth)
	}
	return false, s.skip(depth)
}

func (c *commentRef) member(s *scanner, key []byte, depth int) (bool, error) {
	i, err := pick(key, "id", "body", "user")
	if err != nil {
		return false, err
	}
	switch i {
	case 0:
		return true, s.integer64(&c.ID)
	case 1:
		return true, s.str(&c.Body)
	case 2:
		return true, objectPtr(s, depth, &c.User, (*userRef).member)
	}
	return false, s.skip(depth)
}

func (u *userRef) member(s *scanner, key []byte, depth int) (bool, error) {
	i, err := pick(key, "login", "type")
	if err != nil {
		return false, err
	}
	switch i {
	case 0:
		return true, s.str(&u.Login)
	case 1:
		return true, s.str(&u.Type)
	}
	return false, s.skip(depth)
}

// classifyComment is the action table of issue_comment.
func classifyComment(p payload, r rules) decision {
	ignore := func(reason string) decision {
		return decision{status: validation.DeliveryIgnored, reason: reason, code: 202}
	}
	switch {
	case !r.commands:
		return ignore("commands in comments are off")
	case p.Action != "created":
		return ignore("issue_comment action " + quoteAction(p.Action) + " is not acted on")
	case p.Issue == nil || !p.Issue.IsPR:
		return ignore("a comment on an issue, not a pull request")
	case p.Comment == nil || p.Comment.User == nil:
		return invalid("comment or its user missing")
	case p.Comment.User.Type == "Bot":
		return ignore("a comment by a bot")
	}
	cmd, ok := validation.ParseCommand(p.Comment.Body, r.slug)
	switch {
	case !ok:
		return ignore("a comment that is not a gilf command")
	case p.Repository == nil || !validRepo(p.Repository.FullName):
		return invalid("repository full_name missing or malformed")
	case p.Issue.Number <= 0 || p.Comment.ID <= 0:
		return invalid("issue number or comment id missing")
	case p.Installation == nil || p.Installation.ID == 0:
		return ignore("a command, but the payload names no installation")
	}
	return decision{status: validation.DeliveryQueued, code: 202,
		reason: fmt.Sprintf("command %s by @%s (comment %d)", cmd.Name, safeLogin(p.Comment.User.Login), p.Comment.ID)}
}

// safeLogin bounds a login for a reason line (GitHub's are ≤ 39 bytes of
// [A-Za-z0-9-]).
func safeLogin(s string) string {
	if len(s) > 39 {
		s = s[:39]
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '[' || c == ']') {
			return "?"
		}
	}
	return s
}
