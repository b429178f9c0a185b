package review

// One finding, one thread (issue 33). Every inline comment gilf posts
// carries a fingerprint: its path, its normalised title and the code of
// the line it points at. Before posting, the pull request's review threads
// are read back from GitHub (the fingerprint is a hidden marker in each
// thread's first comment), so the state lives on GitHub and survives a
// store reset:
//
//   - a finding whose fingerprint already has a thread is not posted
//     again; when its line moved, its thread gets one short reply;
//   - a thread of gilf's whose finding the model no longer reports (and,
//     in an incremental review, whose code the new commits changed) is
//     resolved, and the summary says so;
//   - a thread a person has replied to is never resolved silently: it
//     gets one reply saying the finding no longer shows, and stays open.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"unicode"

	"github.com/gilf-review/gilf/internal/logkey"
)

// Thread is one review thread of the pull request as the conversation
// reads it.
type Thread struct {
	ID        string // what Resolve takes
	CommentID int64  // the first comment's id, what Reply takes
	// Fingerprint is the finding's, "" for a thread gilf did not open.
	Fingerprint string
	Path        string
	Line        int // 0 when GitHub lost the line (outdated)
	Outdated    bool
	Resolved    bool
	// HumanReplied: someone other than gilf and other bots commented in
	// the thread.
	HumanReplied bool
	// Title is the first line of gilf's comment (the finding's title).
	Title string
	// Notes are the keys of the notes gilf already replied in the thread.
	Notes map[string]bool
}

// Conversation reads and settles the pull request's review threads.
type Conversation interface {
	Threads(ctx context.Context, j Job) ([]Thread, error)
	Resolve(ctx context.Context, j Job, threadID string) error
	// Reply posts body in the thread of commentID; key names the note
	// (Thread.Notes lists it afterwards), so a note is said once.
	Reply(ctx context.Context, j Job, commentID int64, key, body string) error
}

// Fingerprint identifies a finding across heads and runs: its path, its
// title normalised (case, punctuation and spacing do not count) and the
// code of the line it points at with its spacing normalised (so a finding
// that moved with its code keeps its fingerprint, and one whose code was
// changed does not). 16 hex digits.
func Fingerprint(path, title, code string) string {
	h := sha256.New()
	for _, part := range []string{path, normalizeTitle(title), strings.Join(strings.Fields(code), " ")} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func normalizeTitle(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteRune(r)
			space = false
		} else {
			space = true
		}
	}
	return b.String()
}

// Review scopes: what the model was sent.
const (
	ScopeWhole       = "whole"       // the whole pull request
	ScopeIncremental = "incremental" // the commits since the last reviewed head
)

// convPlan is what the conversation does for one head.
type convPlan struct {
	// post are the comments to post: findings no thread has.
	post []InlineComment
	// kept counts findings already in a thread (not posted again).
	kept int
	// resolve are the threads to resolve; told the threads to leave open
	// with a note (a person replied).
	resolve, told []Thread
	// replies are notes to post in threads (a moved line).
	replies []threadNote
}

type threadNote struct {
	thread    Thread
	key, body string
}

// planConversation decides, for the findings of this head, what to post,
// what stays in its thread and which threads to resolve. reviewed is
// false when the model did not review this head (nothing is resolved
// then); in an incremental review a finding the model does not report
// again is gone only when its thread is outdated (GitHub's sign that the
// commented code changed) or lost its line, and its file is among the
// files the new commits changed (touched).
func planConversation(threads []Thread, current []InlineComment, reviewed bool, scope string, touched map[string]bool, head string) convPlan {
	var p convPlan
	byFP := map[string]Thread{}
	for _, t := range threads {
		if t.Fingerprint != "" {
			if _, dup := byFP[t.Fingerprint]; !dup {
				byFP[t.Fingerprint] = t
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range current {
		if c.Fingerprint != "" && seen[c.Fingerprint] {
			continue // the same finding twice in one answer
		}
		seen[c.Fingerprint] = true
		t, ok := byFP[c.Fingerprint]
		if !ok || c.Fingerprint == "" {
			p.post = append(p.post, c)
			continue
		}
		p.kept++
		key := fmt.Sprintf("moved=%d", c.Line)
		if !t.Resolved && t.Line != c.Line && !t.Notes[key] {
			p.replies = append(p.replies, threadNote{thread: t, key: key,
				body: fmt.Sprintf("This finding is still there at %s; its line is now %d.", code(shortHead(head)), c.Line)})
		}
	}
	if !reviewed {
		return p
	}
	for _, t := range threads {
		if t.Fingerprint == "" || t.Resolved || seen[t.Fingerprint] {
			continue
		}
		if scope == ScopeIncremental && (!touched[t.Path] || (!t.Outdated && t.Line != 0)) {
			continue // the model was not shown this code again
		}
		if !t.HumanReplied {
			p.resolve = append(p.resolve, t)
			continue
		}
		if !t.Notes["gone"] {
			p.told = append(p.told, t)
		}
	}
	return p
}

func shortHead(sha string) string { return sha[:min(len(sha), 7)] }

// ConversationSection is what the summary says of the threads.
type ConversationSection struct {
	Scope string // ScopeWhole or ScopeIncremental; "" when not reviewed
	// Since is the head an incremental review started from.
	Since string
	// Why says why the whole pull request was reviewed again, when it
	// was not the first review (a force-push, a command).
	Why string
	// Kept counts findings still in their threads, not posted again.
	Kept int
	// Resolved and Open are the earlier findings that no longer show:
	// resolved, or left open because a person replied.
	Resolved, Open []Thread
	// Unread: the threads could not be read; the findings were put in
	// the summary instead of inline.
	Unread bool
}

// writeConversation renders the conversation's lines of the semantic
// section.
func writeConversation(b *strings.Builder, c *ConversationSection) {
	if c == nil {
		return
	}
	switch c.Scope {
	case ScopeIncremental:
		fmt.Fprintf(b, "The model read the commits since %s (the last reviewed head), with the earlier findings as context.\n\n", code(shortHead(c.Since)))
	case ScopeWhole:
		if c.Why != "" {
			fmt.Fprintf(b, "The model read the whole pull request: %s.\n\n", prose(c.Why))
		}
	}
	if c.Unread {
		b.WriteString("The review threads could not be read, so the findings are listed here instead of on the lines (none is posted twice).\n\n")
	}
	if c.Kept > 0 {
		fmt.Fprintf(b, "%d %s already in %s on the pull request, not posted again.\n\n", c.Kept,
			plural(c.Kept, "finding is", "findings are"), plural(c.Kept, "its thread", "their threads"))
	}
	writeThreads(b, "Resolved", "✅", "", c.Resolved)
	writeThreads(b, "Left open for the people in the thread", "💬", ", but someone replied", c.Open)
}

// writeThreads lists earlier findings that no longer show.
func writeThreads(b *strings.Builder, heading, mark, but string, ts []Thread) {
	if len(ts) == 0 {
		return
	}
	fmt.Fprintf(b, "%s: %d earlier %s no longer %s at this head%s:\n", heading, len(ts),
		plural(len(ts), "finding", "findings"), plural(len(ts), "shows", "show"), but)
	for _, t := range ts {
		fmt.Fprintf(b, "- %s %s · %s\n", mark, threadTitle(t), code(t.Path))
	}
	b.WriteString("\n")
}

// settle carries out a plan after the review was posted: the replies,
// the resolutions, the notes in threads left open. Each failure is logged
// and left for the next run (the thread is still unresolved, the note
// still unsaid); none fails the job.
func (p *Pipeline) settle(ctx context.Context, j Job, plan *convPlan, log *slog.Logger) {
	if plan == nil || p.Conversation == nil {
		return
	}
	for _, n := range plan.replies {
		if err := p.Conversation.Reply(ctx, j, n.thread.CommentID, n.key, n.body); err != nil {
			log.Warn("reply in review thread failed", "thread", n.thread.ID, logkey.Err, err)
		}
	}
	for _, t := range plan.resolve {
		if err := p.Conversation.Resolve(ctx, j, t.ID); err != nil {
			log.Warn("resolve review thread failed", "thread", t.ID, logkey.Err, err)
		}
	}
	for _, t := range plan.told {
		body := fmt.Sprintf("This finding no longer shows at %s. gilf leaves this thread open because someone replied in it; resolve it when the conversation is done.", code(shortHead(j.HeadSHA)))
		if err := p.Conversation.Reply(ctx, j, t.CommentID, "gone", body); err != nil {
			log.Warn("reply in review thread failed", "thread", t.ID, logkey.Err, err)
		}
	}
}

// earlierFindings are the open threads of gilf's, as context for the
// model.
func earlierFindings(threads []Thread) []SemanticFinding {
	var out []SemanticFinding
	for _, t := range threads {
		if t.Fingerprint != "" && !t.Resolved {
			out = append(out, SemanticFinding{Path: t.Path, Line: t.Line, Title: t.Title})
		}
	}
	return out
}

// ThreadTitle is the title line of a comment body gilf wrote ("<mark>
// **<severity>**: <title>"), for the summary and the model's context.
func ThreadTitle(body string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(body), "\n")
	if _, after, ok := strings.Cut(first, "**: "); ok {
		first = after
	}
	return strings.TrimSpace(first)
}

// threadTitle shows a thread's title: gilf wrote it escaped when it
// posted the comment, so it is shown as it is, on one short line, with no
// HTML.
func threadTitle(t Thread) string {
	s := t.Title
	if len(s) > maxModelTitleBytes {
		s = s[:runeStart(s, maxModelTitleBytes)] + "…"
	}
	if s == "" {
		return "(no title)"
	}
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}
