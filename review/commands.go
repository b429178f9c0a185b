package review

// Commands in pull-request comments (issue 33): "/gilf <command>" or
// "@<app slug> <command>" on the first line of a comment. Intake records
// such a comment (webhook/comment.go); the CommandWorker here answers it:
// it ignores bots and gilf itself, asks GitHub for the commenter's
// permission (write or higher; never author_association), keeps the
// per-pull-request budget, reacts 👀 to what it accepts and acts:
//
//   - rerun: the head's job runs again, as the Re-run button does;
//   - review: the same, with the semantic review of the whole pull request;
//   - explain <step>: a comment with that step's full excerpt;
//   - help: a comment listing the commands.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Command worker limits and defaults.
const (
	// DefaultRunsPerHour is GILF_COMMAND_RUNS_PER_HOUR's default: a
	// command that would start a run is refused once the pull request had
	// this many runs in the last hour (pushes included).
	DefaultRunsPerHour = 6
	// MaxCommandsPerHour bounds the commands of one pull request gilf
	// answers in an hour, whatever they are and whoever asks; beyond it
	// a command is recorded and not answered (a flood gets no flood).
	MaxCommandsPerHour = 30
	// CommandTimeout bounds the handling of one command.
	CommandTimeout = 2 * time.Minute
	// CommandRetryAfter: a command whose handling failed (GitHub was
	// down) is taken up again this long after it arrived, and again
	// until CommandMaxAge.
	CommandRetryAfter = 5 * time.Minute
	// CommandMaxAge: a command older than this is not answered any more.
	CommandMaxAge = time.Hour
	// budgetWindow is the budget's sliding window.
	budgetWindow = time.Hour
)

// CommandDelivery is one claimed command delivery.
type CommandDelivery struct {
	ID             string
	Token          string // the claim's; what Done checks
	InstallationID int64
	Repo           string // owner/name
	PR             int
	ReceivedAt     time.Time
	Body           []byte // the issue_comment payload
}

// CommandQueue is where command deliveries wait (the store).
type CommandQueue interface {
	// Next claims the oldest pending command received since since, or
	// a running one received before retryBefore; ok is false when none.
	Next(ctx context.Context, since, retryBefore time.Time) (c CommandDelivery, ok bool, err error)
	// Done records what the command did.
	Done(ctx context.Context, c CommandDelivery, status validation.DeliveryStatus, reason string) error
}

// Activity is what a pull request spent in the budget's window.
type Activity struct {
	Runs     []time.Time // start of each run, oldest first
	Commands int         // commands answered
}

// CommandRuns is the store's side of the commands: the budget's counts,
// re-runs, and the last record of a head.
type CommandRuns interface {
	Activity(ctx context.Context, j Job, since time.Time) (Activity, error)
	// Rerun queues the newest job of the pull request at j.HeadSHA
	// again, with reason. found is false when there is none; queued is
	// false when it is already queued or running.
	Rerun(ctx context.Context, j Job, reason string) (jobID int64, found, queued bool, err error)
	// LastRecord is the record of the newest run at j.HeadSHA.
	LastRecord(ctx context.Context, j Job) (rec validation.Record, found bool, err error)
}

// CommandGitHub is what the command worker says to GitHub.
type CommandGitHub interface {
	// Permission is login's permission on the repository: admin,
	// write, read or none.
	Permission(ctx context.Context, j Job, login string) (string, error)
	// React leaves 👀 on the comment.
	React(ctx context.Context, j Job, commentID int64) error
	// Comment posts a comment on the pull request.
	Comment(ctx context.Context, j Job, body string) error
}

// CommandWorker answers commands. Queue, GitHub, PRs, Runs and Logger are
// required.
type CommandWorker struct {
	Queue  CommandQueue
	GitHub CommandGitHub
	PRs    PullRequests
	Runs   CommandRuns
	// Slug is the App's slug: "@<slug> <command>" is accepted and
	// "<slug>[bot]" is gilf itself. Empty accepts "/gilf" only.
	Slug string
	// RunsPerHour is the budget (DefaultRunsPerHour when 0).
	RunsPerHour  int
	PollInterval time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
	// Secrets are withheld from every comment (GuardOutput), Internals
	// (the worker's paths) from an explained step, as from the review.
	Secrets   []validation.Secret
	Internals []string
}

// NewCommandWorker checks that w has its required parts (Queue, GitHub,
// PRs, Runs, Logger) and returns it ready to Run.
func NewCommandWorker(w CommandWorker) (*CommandWorker, error) {
	if err := required("command worker", map[string]bool{"Queue": w.Queue != nil, "GitHub": w.GitHub != nil, "PRs": w.PRs != nil,
		"Runs": w.Runs != nil, "Logger": w.Logger != nil}); err != nil {
		return nil, err
	}
	if w.RunsPerHour < 0 {
		return nil, fmt.Errorf("command worker: runs per hour %d", w.RunsPerHour)
	}
	return &w, nil
}

// Run answers commands until ctx is done.
func (w *CommandWorker) Run(ctx context.Context) error {
	poll := orDefault(w.PollInterval, DefaultPollInterval)
	for ctx.Err() == nil {
		did, err := w.Once(ctx)
		if err != nil && ctx.Err() == nil {
			w.Logger.Error("command", logkey.Err, err)
		}
		if did {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
	return nil
}

func (w *CommandWorker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Once answers the next pending command, if any; did says whether there
// was one. An error leaves the command to be taken up again after
// CommandRetryAfter.
func (w *CommandWorker) Once(ctx context.Context) (did bool, err error) {
	now := w.now()
	c, ok, err := w.Queue.Next(ctx, now.Add(-CommandMaxAge), now.Add(-CommandRetryAfter))
	if err != nil || !ok {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	status, reason, err := w.handle(ctx, c)
	if err != nil {
		return true, fmt.Errorf("command %s: %w", c.ID, err)
	}
	if err := w.Queue.Done(ctx, c, status, reason); err != nil {
		return true, fmt.Errorf("command %s: %w", c.ID, err)
	}
	w.Logger.Info("command answered", logkey.DeliveryID, c.ID, logkey.Repo, c.Repo, logkey.PR, c.PR, logkey.Status, status, logkey.Reason, reason)
	return true, nil
}

// commentPayload is what the command worker reads of an issue_comment.
type commentPayload struct {
	Comment struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
		User struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"user"`
	} `json:"comment"`
}

// handle answers one command; an error is GitHub's or the store's. Its
// phases: the command is read from the delivery, held to the pull
// request's budget and the commenter's permission, then acted on.
func (w *CommandWorker) handle(ctx context.Context, c CommandDelivery) (validation.DeliveryStatus, string, error) {
	cm, why := w.read(c)
	if why != "" {
		return validation.DeliveryIgnored, why, nil
	}
	act, err := w.Runs.Activity(ctx, cm.job, w.now().Add(-budgetWindow))
	if err != nil {
		return "", "", err
	}
	if act.Commands >= MaxCommandsPerHour {
		return validation.DeliveryIgnored, fmt.Sprintf("over %d answered commands on this pull request in an hour; not answered", MaxCommandsPerHour), nil
	}
	say := w.sayer(ctx, c, cm.job)
	reason, refusal, err := w.refuse(ctx, cm, act)
	if err != nil {
		return "", "", err
	}
	if reason != "" {
		return say(reason, refusal)
	}
	if err := w.GitHub.React(ctx, cm.job, cm.commentID); err != nil {
		w.Logger.Warn("reaction to a command failed", logkey.DeliveryID, c.ID, logkey.Err, err)
	}
	switch cm.Name {
	case validation.CommandHelp:
		return say("help", w.help())
	case validation.CommandUnknown:
		return say("unknown command", fmt.Sprintf("gilf does not know %s.\n\n%s", code(cm.Word), w.help()))
	case validation.CommandExplain:
		return w.explain(ctx, cm.job, cm.Arg, say)
	}
	return w.rerun(ctx, cm, say)
}

// command is a command read from its delivery: what was asked, by whom,
// in which comment, on which pull request.
type command struct {
	validation.Command
	login     string
	commentID int64
	job       Job
}

// read reads the command of c; why says why it is ignored, "" when it
// is not.
func (w *CommandWorker) read(c CommandDelivery) (cm command, why string) {
	var p commentPayload
	if err := json.Unmarshal(c.Body, &p); err != nil {
		return cm, "the comment could not be read: " + err.Error()
	}
	owner, name, ok := strings.Cut(c.Repo, "/")
	if !ok || c.PR <= 0 || c.InstallationID == 0 || p.Comment.ID <= 0 {
		return cm, "the delivery names no repository, pull request, installation or comment"
	}
	parsed, ok := validation.ParseCommand(p.Comment.Body, w.Slug)
	login := p.Comment.User.Login
	switch {
	case !ok:
		return cm, "not a gilf command"
	case p.Comment.User.Type == "Bot" || (w.Slug != "" && strings.EqualFold(login, w.Slug+"[bot]")):
		return cm, "a comment by a bot"
	}
	return command{Command: parsed, login: login, commentID: p.Comment.ID,
		job: Job{InstallationID: c.InstallationID, Owner: owner, Repo: name, Number: c.PR}}, ""
}

// sayFunc answers a command with a comment: reason is recorded, body posted.
type sayFunc func(reason, body string) (validation.DeliveryStatus, string, error)

// sayer answers c on j's pull request, with the worker's secrets kept out
// of the comment.
func (w *CommandWorker) sayer(ctx context.Context, c CommandDelivery, j Job) sayFunc {
	return func(reason, body string) (validation.DeliveryStatus, string, error) {
		body, leak := GuardOutput(body, w.Secrets)
		if !leak.Passed {
			w.Logger.Error("secret found in a command's answer before posting; redacted", logkey.DeliveryID, c.ID, logkey.Detail, leak.Detail)
		}
		if err := w.GitHub.Comment(ctx, j, body); err != nil {
			return "", "", err
		}
		return validation.DeliveryDone, reason, nil
	}
}

// refuse is why cm is refused, with the answer to post: the commenter
// has no write access, or a command that starts a run is over the pull
// request's runs of the last hour; "" when it is not.
func (w *CommandWorker) refuse(ctx context.Context, cm command, act Activity) (reason, body string, err error) {
	level, err := w.GitHub.Permission(ctx, cm.job, cm.login)
	if err != nil {
		return "", "", err
	}
	if level != "admin" && level != "write" {
		return fmt.Sprintf("refused: @%s has %s permission", cm.login, orNone(level)),
			fmt.Sprintf("@%s gilf takes commands only from people with write access to this repository; nothing was run.", cm.login), nil
	}
	startsRun := cm.Name == validation.CommandRerun || cm.Name == validation.CommandReview
	if limit := w.runsPerHour(); startsRun && len(act.Runs) >= limit {
		again := act.Runs[len(act.Runs)-limit].Add(budgetWindow)
		return fmt.Sprintf("over budget: %d runs in the last hour", len(act.Runs)),
			fmt.Sprintf("@%s this pull request had %d runs in the last hour; gilf runs at most %d per pull request per hour. It can run again after %s (in %s).",
				cm.login, len(act.Runs), limit, again.UTC().Format("15:04 UTC"), waitWords(again.Sub(w.now()))), nil
	}
	return "", "", nil
}

// rerun queues the job of the pull request's head again (rerun, review).
func (w *CommandWorker) rerun(ctx context.Context, cm command, say sayFunc) (validation.DeliveryStatus, string, error) {
	pr, err := w.PRs.PullRequest(ctx, cm.job)
	if err != nil {
		return "", "", err
	}
	j := cm.job
	j.HeadSHA = pr.HeadSHA
	reason := fmt.Sprintf("re-run asked by @%s in a comment", cm.login)
	if cm.Name == validation.CommandReview {
		reason = fmt.Sprintf("%s by @%s in a comment", FullReviewReason, cm.login)
	}
	id, found, queued, err := w.Runs.Rerun(ctx, j, reason)
	switch {
	case err != nil:
		return "", "", err
	case !found:
		return say("no job at the head", fmt.Sprintf("gilf has not validated %s yet, so there is nothing to run again; it validates each push as it arrives.", code(shortHead(j.HeadSHA))))
	case !queued:
		return say(fmt.Sprintf("job %d already queued or running", id), fmt.Sprintf("A run of %s is already queued or running.", code(shortHead(j.HeadSHA))))
	}
	return validation.DeliveryDone, fmt.Sprintf("%s: job %d queued again", cm.Name, id), nil
}

func (w *CommandWorker) runsPerHour() int {
	if w.RunsPerHour <= 0 {
		return DefaultRunsPerHour
	}
	return w.RunsPerHour
}

// explain posts one step's full excerpt from the head's last run.
func (w *CommandWorker) explain(ctx context.Context, j Job, step string, say sayFunc) (validation.DeliveryStatus, string, error) {
	pr, err := w.PRs.PullRequest(ctx, j)
	if err != nil {
		return "", "", err
	}
	j.HeadSHA = pr.HeadSHA
	rec, found, err := w.Runs.LastRecord(ctx, j)
	if err != nil {
		return "", "", err
	}
	if !found {
		return say("explain: no run", fmt.Sprintf("gilf has no run of %s yet.", code(shortHead(j.HeadSHA))))
	}
	rec = publicRecord(rec, w.Internals)
	var names []string
	for _, s := range rec.Steps {
		names = append(names, code(s.Name))
		if step == "" || !strings.EqualFold(s.Name, step) {
			continue
		}
		return say("explain "+s.Name, explainStep(j.HeadSHA, s, w.Internals))
	}
	return say("explain: no such step", fmt.Sprintf("The last run of %s has no step %s. Its steps: %s.",
		code(shortHead(j.HeadSHA)), code(step), strings.Join(names, ", ")))
}

// explainStep renders a step's full excerpt: what it ran, how it ended,
// and its recorded (redacted) output, head and tail, with the worker's
// own paths withheld.
func explainStep(head string, s validation.StepResult, internals []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** at %s: %s\n\n", code(s.Name), code(shortHead(head)), statusWords(s))
	fmt.Fprintf(&b, "Command: %s\n\n", code(strings.Join(s.Argv, " ")))
	out := s.Output.Head
	if s.Output.Tail != "" {
		out += fmt.Sprintf("\n… (%s in all; the middle is left out) …\n", size(s.Output.Bytes)) + s.Output.Tail
	}
	if strings.TrimSpace(out) == "" {
		b.WriteString("The step printed nothing.\n")
		return b.String()
	}
	body, _ := cutMiddle(sanitize(publicWords(out, internals)), maxExplainBytes)
	b.WriteString(fence(body))
	return b.String()
}

// maxExplainBytes keeps an excerpt well inside a comment.
const maxExplainBytes = 12 << 10

func (w *CommandWorker) help() string {
	to := "`/gilf <command>`"
	if w.Slug != "" {
		to += " or `@" + w.Slug + " <command>`"
	}
	return "gilf answers " + to + " on the first line of a comment, from people with write access:\n\n" +
		"- `rerun`: validate the head again, as Re-run does\n" +
		"- `review`: the semantic review of the whole pull request again\n" +
		"- `explain <step>`: post that step's full excerpt\n" +
		"- `help`: this list\n\n" +
		fmt.Sprintf("A pull request gets at most %d runs an hour.", w.runsPerHour())
}

func orNone(level string) string {
	if level == "" {
		return "no"
	}
	return level
}

// waitWords says a wait in minutes, at least one.
func waitWords(d time.Duration) string {
	m := int((d + time.Minute - 1) / time.Minute)
	return fmt.Sprintf("%d %s", max(m, 1), plural(max(m, 1), "minute", "minutes"))
}
