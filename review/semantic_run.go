package review

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// MaxMemoryBytes caps the review-memory file (review.memory in
// .github/gilf.yml, read from the base branch).
const MaxMemoryBytes = 64 << 10

// InlineComment is one comment posted on a line of the pull request's
// diff (its right side).
type InlineComment struct {
	Path string
	Line int
	Body string
	// Fingerprint identifies the finding across runs (Fingerprint in
	// conversation.go); posted as a hidden marker.
	Fingerprint string
}

// SemanticSection is what the summary shows of the semantic review.
type SemanticSection struct {
	Ran      bool
	Why      string // why it did not run, or what went wrong
	Model    string
	Findings []SemanticFinding // shown in the body (not on a diff line)
	Inline   int               // posted as inline comments
	Notes    []string
	// Conversation is what happened to the threads, nil before any
	// review.
	Conversation *ConversationSection
}

// semanticResult is what the semantic stage produced for posting.
type semanticResult struct {
	section  *SemanticSection
	comments []InlineComment
	// span is the model call's, not yet priced; nil when the model was
	// not asked, or failed without saying what it spent.
	span *costs.Span
	// plan is what the conversation does once the review is posted
	// (conversation.go); nil without one.
	plan *convPlan
	// head is the head the semantic review has covered so far: this one
	// when the model reviewed it, else the one before.
	head string
}

// semantic runs the model reviewer after validation, when one is
// configured and the skip rule lets it (SPEC §3.4). Its findings never
// change the outcome or the conclusion; a failure is recorded and the
// validation review posts anyway.
func (p *Pipeline) semantic(ctx context.Context, j Job, pr PR, v validated, rec *validation.Record) semanticResult {
	if p.Reviewer == nil {
		return semanticResult{}
	}
	// The head reviewed so far is carried through a head the model does
	// not review, so the next review stays incremental.
	prev := p.semanticHead(ctx, j)
	if !semanticApplies(rec.Outcome) {
		return semanticResult{head: prev}
	}
	s := semanticJob{rec: rec, sec: &SemanticSection{}, prev: prev}
	memory, err := p.memory(ctx, j, pr, v.memoryPath)
	if err != nil {
		s.sec.Why = "the review memory could not be read, so the model was not asked"
		s.note(s.sec.Why)
		JobLogger(p.Logger, j).Warn("review memory not read", "path", v.memoryPath, logkey.Err, err)
		return semanticResult{section: s.sec, head: prev}
	}
	if run, why := SemanticShouldRun(SkipInput{Flag: p.SkipSemanticOnValidationFailure, Memory: memory,
		Findings: rec.Findings, Changed: v.files}); !run {
		s.sec.Why = why
		s.note("not run: " + why)
		return semanticResult{section: s.sec, head: prev}
	}
	full := Diff{}
	for _, f := range v.files {
		full.Files = append(full.Files, DiffFile{Path: f.Name, Previous: f.Previous, Status: f.Status, Patch: f.Patch})
	}
	return p.askModel(ctx, j, pr, memory, full, s)
}

// semanticJob is what the semantic stage's phases share: the record they
// note on, the section they fill and the head reviewed before this one.
type semanticJob struct {
	rec  *validation.Record
	sec  *SemanticSection
	prev string
}

func (s semanticJob) note(msg string) { s.rec.Notes = append(s.rec.Notes, "semantic review: "+msg) }

// askModel sends the model the pull request's diff, whole or since the
// head reviewed before, with the threads it already has.
func (p *Pipeline) askModel(ctx context.Context, j Job, pr PR, memory string, full Diff, s semanticJob) semanticResult {
	threads, conv := p.threads(ctx, j)
	sc := p.reviewScope(ctx, j, full, s.prev)
	conv.Scope, conv.Since, conv.Why = sc.kind, sc.since, sc.why
	s.sec.Conversation = conv
	if sc.kind == ScopeIncremental {
		s.note(fmt.Sprintf("incremental: the model was sent the changes since %s (%d %s)", shortHead(sc.since), len(sc.diff.Files), plural(len(sc.diff.Files), "file", "files")))
		if len(sc.diff.Files) == 0 {
			s.sec.Why = "nothing in the pull request's files changed since the last reviewed head " + shortHead(sc.since)
			s.note("not run: " + s.sec.Why)
			return semanticResult{section: s.sec, head: j.HeadSHA} // the threads stand as they are
		}
	} else {
		s.note("the model was sent the whole pull request" + prefixed(": ", sc.why))
	}
	started := time.Now()
	out, err := p.Reviewer.Review(ctx, SemanticInput{Title: pr.Title, Body: pr.Body, Diff: sc.diff, Record: *s.rec, Findings: s.rec.Findings, Memory: memory,
		Earlier: earlierFindings(threads), Since: sc.since})
	span := semanticSpan(out.Usage, started, time.Now())
	s.sec.Model, s.sec.Notes = out.Usage.Model, out.Notes
	if err != nil {
		s.sec.Why = "the model's answer could not be used"
		s.note(s.sec.Why)
		JobLogger(p.Logger, j).Warn("semantic review failed", logkey.Err, err)
		res := semanticResult{section: s.sec, head: s.prev}
		if out.Usage.PromptTokens > 0 || out.Usage.CompletionTokens > 0 {
			res.span = &span // the tokens were spent
		}
		return res
	}
	s.sec.Ran = true
	return s.posting(j.HeadSHA, out, full, sc, threads, span)
}

// posting is what the model's findings on head become: comments on the
// changed lines that no thread has yet, the rest in the summary, and what
// the conversation does with the earlier threads.
func (s semanticJob) posting(head string, out SemanticOutput, full Diff, sc scope, threads []Thread, span costs.Span) semanticResult {
	conv := s.sec.Conversation
	onLines, body := InlineComments(out.Findings, full)
	if conv.Unread {
		body, onLines = append(onLines, body...), nil // nothing inline that could be a duplicate
	}
	for _, f := range body {
		s.sec.Findings = append(s.sec.Findings, SanitizeModelFinding(f))
	}
	texts := map[string]map[int]string{}
	for _, f := range full.Files {
		texts[f.Path] = RightLineText(f.Patch)
	}
	var comments []InlineComment
	for _, f := range onLines {
		sf := SanitizeModelFinding(f)
		comments = append(comments, InlineComment{Path: f.Path, Line: f.Line,
			Body:        fmt.Sprintf("%s **%s**: %s\n\n%s", severityMark(sf.Severity), inline(string(sf.Severity)), sf.Title, sf.Body),
			Fingerprint: Fingerprint(f.Path, f.Title, texts[f.Path][f.Line])})
	}
	plan := planConversation(threads, comments, !conv.Unread, sc.kind, sc.touched, head)
	conv.Kept, conv.Resolved, conv.Open = plan.kept, plan.resolve, plan.told
	res := semanticResult{section: s.sec, span: &span, comments: plan.post, plan: &plan, head: head}
	s.sec.Inline = len(res.comments)
	s.note(fmt.Sprintf("ran (model %s): %d findings, %d on changed lines (%d new, %d already in a thread), %d earlier resolved, %d left open; %d prompt and %d completion tokens",
		orUnknown(out.Usage.Model), len(out.Findings), len(onLines), len(plan.post), plan.kept, len(plan.resolve), len(plan.told),
		out.Usage.PromptTokens, out.Usage.CompletionTokens))
	return res
}

// semanticHead is the head the semantic review last covered, "" without
// a History or when it cannot be read (the whole pull request is then
// reviewed).
func (p *Pipeline) semanticHead(ctx context.Context, j Job) string {
	if p.History == nil {
		return ""
	}
	h, err := p.History.SemanticHead(ctx, j)
	if err != nil {
		JobLogger(p.Logger, j).Warn("last reviewed head not read; reviewing the whole pull request", logkey.Err, err)
		return ""
	}
	return h
}

// threads reads the pull request's review threads. Without a
// Conversation there are none; when they cannot be read, the section
// says so and no finding is posted inline (it could be a duplicate).
func (p *Pipeline) threads(ctx context.Context, j Job) ([]Thread, *ConversationSection) {
	conv := &ConversationSection{}
	if p.Conversation == nil {
		return nil, conv
	}
	ts, err := p.Conversation.Threads(ctx, j)
	if err != nil {
		JobLogger(p.Logger, j).Warn("review threads not read; findings go in the summary", logkey.Err, err)
		conv.Unread = true
		return nil, conv
	}
	return ts, conv
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// semanticSpan is the model call's cost span, unpriced: its executor is
// the model's card key (model:unknown when the endpoint named none).
func semanticSpan(u TokenUsage, started, finished time.Time) costs.Span {
	return costs.Span{
		Lane: costs.LaneSemantic, Executor: costs.ModelCardKey(orUnknown(u.Model)),
		Started: started, Finished: finished,
		InputTokens: int64(u.PromptTokens), OutputTokens: int64(u.CompletionTokens),
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// semanticApplies says which outcomes the model reviews: the ones where
// the pull request was looked at; policy skips and refusals stand.
func semanticApplies(o validation.Outcome) bool {
	switch o {
	case validation.OutcomePassed, validation.OutcomeFailed, validation.OutcomeInconclusive, validation.OutcomeGap:
		return true
	}
	return false
}

// memory reads the repository's review memory (review.memory, a file of
// the base branch), "" when none is configured or the file is absent.
func (p *Pipeline) memory(ctx context.Context, j Job, pr PR, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, found, err := p.PRs.BaseFile(ctx, j, pr.BaseRef, path)
	if err != nil || !found {
		return "", err
	}
	if len(b) > MaxMemoryBytes {
		b = b[:MaxMemoryBytes]
	}
	return strings.ToValidUTF8(string(b), "\ufffd"), nil
}

// writeSemantic renders the semantic review's section of the summary:
// after the validation findings (what broke comes first), before the
// record. Model text arrives sanitized (SanitizeModelFinding).
func writeSemantic(b *strings.Builder, s *SemanticSection) {
	if s == nil {
		return
	}
	b.WriteString("### Semantic review\n\n")
	if !s.Ran {
		b.WriteString("The model was not asked: " + prose(s.Why) + ".\n\n")
		return
	}
	fmt.Fprintf(b, "A model (%s) read the diff; its findings are advice, and never change the validation outcome or the check.", code(orUnknown(s.Model)))
	if s.Inline > 0 {
		fmt.Fprintf(b, " %d %s on the changed lines.", s.Inline, plural(s.Inline, "comment is", "comments are"))
	}
	b.WriteString("\n\n")
	writeConversation(b, s.Conversation)
	for _, f := range s.Findings {
		loc := ""
		if f.Path != "" {
			loc = " · " + code(f.Path)
			if f.Line > 0 {
				loc += fmt.Sprintf(" line %d", f.Line)
			}
		}
		fmt.Fprintf(b, "- %s %s: %s%s\n", severityMark(f.Severity), inline(string(f.Severity)), f.Title, loc)
		if f.Body != "" {
			b.WriteString("\n" + indent(f.Body) + "\n")
		}
	}
	if len(s.Findings) > 0 {
		b.WriteString("\n")
	}
}

// indent indents a block so it stays inside its list item.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
