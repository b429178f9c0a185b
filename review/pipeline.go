// Package review is the pipeline of SPEC §3 for one job: pull request →
// diff classification → config → policy → checkout → plan → executor →
// record → evidence → costs → render → post. It depends on small
// interfaces for GitHub, evidence and costs; cmd/gilf wires the real ones.
package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/internal/workdir"
	"github.com/gilf-review/gilf/validation"
)

// Job is one review job: a pull request head to validate.
type Job struct {
	ID             int64
	InstallationID int64 // 0: the delivery carried no installation
	Owner, Repo    string
	Number         int
	HeadSHA        string
	Attempt        int
	// Rerun counts the re-runs asked for this head (GitHub's Re-run
	// button): each one publishes anew under its own PublicationID.
	Rerun int
	// FullReview: the semantic review reads the whole pull request, not
	// the changes since the last reviewed head (the review command).
	FullReview bool
	// Store is the id of the store that holds the job (store.StoreID);
	// "" publishes under the bare job id, as before stores were named.
	Store string
}

// PublicationID is what identifies this run of the job on GitHub: the
// check run's external_id and the hidden marker in the summary. A re-run
// gets a new one, so what an earlier run posted is not taken as its own;
// it names the store too (validation.MarkerID), so neither is another
// store's post.
func (j Job) PublicationID() string { return validation.MarkerID(j.Store, j.ID, j.Rerun) }

// FullName is owner/repo.
func (j Job) FullName() string { return j.Owner + "/" + j.Repo }

// PR is what the pipeline reads of a pull request.
type PR struct {
	HeadSHA string
	// HeadRepoMissing is true when head.repo is null (the fork was
	// deleted): there is nothing to check out.
	HeadRepoMissing bool
	BaseRef         string
	// BaseSHA is the base branch's commit the pull request compares
	// with: what failure origin validates (origin.go).
	BaseSHA string
	// CloneURL is the repository's public clone URL: the checkout's git
	// origin remote.
	CloneURL string
	Draft    bool
	Author   string
	Labels   []string
	// Title and Body are the author's (untrusted): the semantic review
	// reads them.
	Title, Body string
}

// PullRequests reads pull requests and base-branch files.
type PullRequests interface {
	PullRequest(ctx context.Context, j Job) (PR, error)
	ChangedFiles(ctx context.Context, j Job) ([]ChangedFile, error)
	// BaseFile reads path at ref; found is false when it does not exist.
	BaseFile(ctx context.Context, j Job, ref, path string) (data []byte, found bool, err error)
}

// Checkouts downloads and safely extracts a head tarball under dst,
// returning the repository root.
type Checkouts interface {
	Checkout(ctx context.Context, j Job, sha, dst string) (root string, err error)
}

// Publication is what gets posted for one job.
type Publication struct {
	HeadSHA    string
	Body       string // includes the hidden job marker
	Event      string // COMMENT or REQUEST_CHANGES
	Conclusion string // success, failure, neutral, action_required, skipped
	Title      string
	// Summary is the check run's summary: the verdict and the first
	// failure; Text its details (the excerpts and the record).
	Summary string
	Text    string
	// Annotations are the check run's, in the order to send them.
	Annotations []Annotation
	// AnnotationsOmitted counts those over MaxAnnotations, said in the
	// summary.
	AnnotationsOmitted int
	// Comments are the semantic review's comments on lines of the diff,
	// posted with a review of their own.
	Comments []InlineComment
	// DetailsURL is the dashboard's page of the run, "" when none.
	DetailsURL string
	// SemanticHead is the head the semantic review has covered so far,
	// kept on GitHub for the next incremental review; "" when none.
	SemanticHead string
	// NoReview completes the check run only: nothing is added to the
	// pull request's conversation (a draft that is not validated).
	NoReview bool
}

// Annotation is one check-run annotation: a line of a file of the
// repository, with what a tool said about it.
type Annotation struct {
	Path                   string
	StartLine, EndLine     int
	StartColumn, EndColumn int
	Level                  string // failure, warning, notice
	Title, Message         string
}

// Publisher posts a review and a check run, idempotently: a retry finds
// what an earlier attempt posted by the job marker and does not post
// again.
type Publisher interface {
	Publish(ctx context.Context, j Job, p Publication) error
}

// Check-run conclusions.
const (
	ConclusionSuccess        = "success"
	ConclusionFailure        = "failure"
	ConclusionNeutral        = "neutral"
	ConclusionActionRequired = "action_required"
	ConclusionSkipped        = "skipped"
)

// ConclusionFor maps an outcome to its check-run conclusion.
func ConclusionFor(o validation.Outcome) string {
	switch o {
	case validation.OutcomePassed:
		return ConclusionSuccess
	case validation.OutcomeFailed:
		return ConclusionFailure
	case validation.OutcomeRefused:
		return ConclusionActionRequired
	default:
		return ConclusionNeutral
	}
}

// ErrStaleHead is returned by PullRequests implementations or detected by
// the pipeline when the pull request moved on: the result is recorded, not
// posted.
var ErrStaleHead = errors.New("pull request head moved on")

// Lanes runs the primary executor and, when configured, the shadow lane.
// The default runs the primary only.
type Lanes interface {
	Run(ctx context.Context, primary executors.Executor, req executors.Request) (executors.Result, *ShadowReport, error)
}

// ShadowReport is the shadow lane's telemetry, opaque to the pipeline
// except for storage and rendering.
type ShadowReport struct {
	Executor string
	Status   string
	Summary  string
	Data     any
	// Pending is set while the lane still runs (Status ShadowRunning):
	// the review and the check run never wait for it. It blocks until
	// the lane ends — or its budget does, or ctx ends and stops it — and
	// gives the final report, with the lane's priced cost span in Spans.
	Pending func(ctx context.Context) *ShadowReport
	Spans   []costs.Span
}

// Hooks are the optional stages after the run: evidence and costs. They
// may change the record's findings, fill the result's spans and artifacts
// and add lines to the review; an error in a hook is returned as a string
// to record, and the original findings stand.
type Hooks interface {
	AfterRun(ctx context.Context, j Job, res *Result, opts *RenderOptions) []string
}

// Pipeline validates one job. Construct it with every required field set;
// Lanes and Hooks are optional.
type Pipeline struct {
	PRs       PullRequests
	Checkouts Checkouts
	Publisher Publisher
	Executors executors.Set
	// Selection carries the worker's GILF_VALIDATION_EXECUTOR,
	// GILF_VALIDATION_PROVIDER and GILF_ALLOW_LOCAL_VALIDATION; Provider is
	// filled per job from the merged config.
	Selection executors.Selection
	// Worker is the worker's validation defaults (from the environment).
	Worker      ValidationConfig
	PlanOptions validation.PlanOptions
	Secrets     []validation.Secret
	WorkDir     string // where checkouts are extracted; one temp dir per job
	Drafts      bool   // validate drafts by default
	Lanes       Lanes
	Hooks       Hooks
	Logger      *slog.Logger
	// DetailsURL, when set, is the dashboard's page of a job: the check
	// run's details_url.
	DetailsURL func(Job) string
	// Internals are the worker's own paths (its data directory), withheld
	// from what is posted besides WorkDir.
	Internals []string
	// Reviewer, when set, is the semantic (model) reviewer; nil is none.
	Reviewer Reviewer
	// SkipSemanticOnValidationFailure is
	// GILF_SKIP_CODEX_ON_VALIDATION_FAILURE (SemanticShouldRun).
	SkipSemanticOnValidationFailure bool
	// Conversation, when set, keeps one thread per finding
	// (conversation.go); History, when set, makes the semantic review
	// incremental (incremental.go).
	Conversation Conversation
	History      History
	// OperatorErrors, when set, counts the runs that ended as the
	// operator's misconfiguration (validation.OperatorCode), by code.
	OperatorErrors func(validation.Code)
	// BaseResults keeps the base's results for failure origin; nil
	// keeps nothing. NoBaseComparison (GILF_BASE_COMPARISON=0) turns
	// the base comparison off on this worker.
	BaseResults      BaseResults
	NoBaseComparison bool
}

// Result is what one job produced.
type Result struct {
	Record validation.Record
	Body   string
	Posted bool
	// Stale is true when the head moved on before posting: nothing was
	// posted.
	Stale  bool
	Shadow *ShadowReport
	// Spans are the cost spans with their estimates: the executors'
	// (primary and shadow lanes) and the semantic review's model, filled
	// by the cost hook.
	Spans []costs.Span
	// Artifacts are the evidence the store accepted; UploadFailures those
	// it did not (never shown as persisted).
	Artifacts      []evidence.Stored
	UploadFailures []evidence.UploadFailure
	// HookErrors are errors of the optional stages, recorded.
	HookErrors []string
	// OriginRuns are the failure-origin runs (base, retry), priced by
	// the cost hook.
	OriginRuns []LaneRun
}

// Run validates one job. A returned error is an infrastructure failure
// (GitHub, the sandbox API, the disk): the caller retries the job. Every
// other ending — passed, failed, gap, skipped, refused, inconclusive — is
// a Result.
//
// Its phases: the pull request is read and the check run queued,
// validate runs everything up to the record, report adds what the hooks
// and the semantic review say and renders the review, and post publishes
// it while the head is still the pull request's.
func (p *Pipeline) Run(ctx context.Context, j Job) (Result, error) {
	log := JobLogger(p.Logger, j)
	if j.InstallationID == 0 {
		rec := NewRecord(RecordInput{Refusal: validation.Refuse(validation.CodeInstallationMissing,
			"the webhook delivery carried no installation, so gilf cannot get a token for %s; install the GitHub App on the repository", j.FullName())})
		log.Warn("job has no installation", logkey.RefusalCode, validation.CodeInstallationMissing)
		return Result{Record: rec}, nil
	}
	pr, err := p.PRs.PullRequest(ctx, j)
	if err != nil {
		return Result{}, fmt.Errorf("get pull request: %w", err)
	}
	if pr.HeadSHA != "" && pr.HeadSHA != j.HeadSHA {
		log.Info("head moved on before validation", "current_head", pr.HeadSHA)
		return Result{Record: NewRecord(RecordInput{Skipped: "the pull request head moved on to " + pr.HeadSHA + " before validation started"}), Stale: true}, nil
	}
	base := p.queued(ctx, j, log)
	v, err := p.validate(ctx, j, pr, base)
	if err != nil {
		v.shadow.Stop() // nothing of this attempt is recorded
		return Result{}, err
	}
	res, opts, sem := p.report(ctx, j, pr, v, log)
	return p.post(ctx, j, base, v, sem, res, opts, log)
}

// queued is the check run's progress every later update starts from; a
// ProgressPublisher shows it as queued at once.
func (p *Pipeline) queued(ctx context.Context, j Job, log *slog.Logger) CheckProgress {
	base := CheckProgress{HeadSHA: j.HeadSHA, DetailsURL: p.detailsURL(j)}
	if pp, ok := p.Publisher.(ProgressPublisher); ok {
		q := base
		q.Status, q.Title = StatusQueued, "gilf validation: queued"
		q.Summary = "gilf is reading the pull request and its configuration."
		if err := pp.Progress(ctx, j, q); err != nil {
			log.Warn("check run not created as queued", logkey.Err, err)
		}
	}
	return base
}

// report makes the result of what validate produced: the operator's
// misconfiguration counted, the hooks and the semantic review run, and
// the review rendered with the worker's secrets kept out of it.
func (p *Pipeline) report(ctx context.Context, j Job, pr PR, v validated, log *slog.Logger) (Result, RenderOptions, semanticResult) {
	res := Result{Record: v.rec, Shadow: v.shadow, OriginRuns: v.originRuns}
	if ref := res.Record.Refusal; ref != nil && res.Record.Outcome == validation.OutcomeError {
		log.Error("gilf is not set up to validate this pull request; the operator must act", logkey.RefusalCode, ref.Code, logkey.Detail, ref.Msg)
		if p.OperatorErrors != nil {
			p.OperatorErrors(ref.Code)
		}
	}
	opts := RenderOptions{}
	if p.Hooks != nil {
		res.HookErrors = p.Hooks.AfterRun(ctx, j, &res, &opts)
	}
	sem := p.semantic(ctx, j, pr, v, &res.Record)
	if sp, ok := p.Hooks.(SemanticPricer); ok && sem.span != nil {
		sp.PriceSemantic(&res, &opts, *sem.span)
	}
	opts.Semantic = sem.section
	opts.JobID = j.PublicationID()
	opts.Internals = p.internals()
	if w := res.Record.SecretsWithheld; len(w) > 0 {
		log.Info("worker secrets kept out of the sandbox", "names", w)
	}
	var leak validation.ControlDecision
	res.Body, leak = GuardOutput(Render(res.Record, opts), p.Secrets)
	res.Record.Controls = append(res.Record.Controls, leak)
	if !leak.Passed {
		log.Error("secret found in the review before posting; redacted", logkey.RefusalCode, leak.Code, logkey.Detail, leak.Detail)
	}
	return res, opts, sem
}

// post publishes the review and the check run. A result for a stale head
// is recorded, not posted.
func (p *Pipeline) post(ctx context.Context, j Job, base CheckProgress, v validated, sem semanticResult, res Result, opts RenderOptions, log *slog.Logger) (Result, error) {
	now, err := p.PRs.PullRequest(ctx, j)
	if err != nil {
		return res, fmt.Errorf("re-read pull request before posting: %w", err)
	}
	if now.HeadSHA != j.HeadSHA {
		log.Info("head moved on during validation; result recorded, not posted", "current_head", now.HeadSHA)
		res.Stale = true
		p.finishStale(ctx, j, base, now.HeadSHA, log)
		return res, nil
	}
	if err := p.Publisher.Publish(ctx, j, p.publication(j, base, v, sem, res, opts)); err != nil {
		if errors.Is(err, ErrStaleHead) {
			res.Stale = true
			p.finishStale(ctx, j, base, "", log)
			return res, nil
		}
		return res, fmt.Errorf("publish: %w", err)
	}
	res.Posted = true
	p.settle(ctx, j, sem.plan, log)
	log.Info("review posted", logkey.Outcome, res.Record.Outcome, logkey.Executor, res.Record.Executor)
	return res, nil
}

// publication is what is posted for res: the review, and the check run
// with its verdict, summary, details and annotations, every text of it
// guarded against the worker's secrets.
func (p *Pipeline) publication(j Job, base CheckProgress, v validated, sem semanticResult, res Result, opts RenderOptions) Publication {
	cfgEvent := "COMMENT"
	if v.requestChanges && res.Record.Outcome == validation.OutcomeFailed {
		cfgEvent = "REQUEST_CHANGES"
	}
	annotations, omitted := capAnnotations(v.annotations, MaxAnnotations)
	textOpts := opts
	textOpts.JobID = ""
	pub := Publication{
		HeadSHA: j.HeadSHA, Body: res.Body, Event: cfgEvent,
		Conclusion:  CheckConclusion(res.Record, v.preexistingFails),
		Title:       Verdict(res.Record),
		Summary:     CheckSummary(res.Record, opts, len(annotations), omitted),
		Text:        Render(res.Record, textOpts),
		Annotations: annotations, AnnotationsOmitted: omitted,
		DetailsURL:   base.DetailsURL,
		NoReview:     v.noReview,
		Comments:     sem.comments,
		SemanticHead: sem.head,
	}
	if v.noReview {
		pub.Conclusion = ConclusionSkipped
	}
	pub.Title, _ = GuardOutput(pub.Title, p.Secrets)
	pub.Summary, _ = GuardOutput(pub.Summary, p.Secrets)
	pub.Text, _ = GuardOutput(pub.Text, p.Secrets)
	for i := range pub.Comments {
		pub.Comments[i].Body, _ = GuardOutput(pub.Comments[i].Body, p.Secrets)
	}
	for i := range pub.Annotations {
		a := &pub.Annotations[i]
		a.Title, _ = GuardOutput(a.Title, p.Secrets)
		a.Message, _ = GuardOutput(a.Message, p.Secrets)
	}
	return pub
}

func (p *Pipeline) internals() []string {
	out := slices.Clone(p.Internals)
	if abs, err := filepath.Abs(p.WorkDir); err == nil && p.WorkDir != "" {
		out = append(out, abs)
	}
	// Longest first, so a path inside another is withheld whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// finishStale completes the check run of a head that moved on during
// validation: its result is recorded, not posted, and its check run must
// not stay in progress on that commit.
func (p *Pipeline) finishStale(ctx context.Context, j Job, base CheckProgress, current string, log *slog.Logger) {
	f, ok := p.Publisher.(CheckFinisher)
	if !ok {
		return
	}
	summary := "The pull request moved on to a newer head during validation"
	if current != "" {
		summary += " (" + code(current) + ")"
	}
	summary += "; this head's result is recorded, not posted. The newer head is validated on its own."
	if err := f.FinishCheck(ctx, j, Publication{
		HeadSHA: j.HeadSHA, Conclusion: ConclusionNeutral, NoReview: true, DetailsURL: base.DetailsURL,
		Title: "gilf validation: ⏭️ not posted — the pull request moved on", Summary: summary,
	}); err != nil {
		log.Warn("check run of a stale head not completed", logkey.Err, err)
	}
}

// GaveUp is the check run of a job that ended without a result (its
// retries used up, or a failure no retry can change): attempts is how
// many it had; detailsURL, when set, is the job's page on the dashboard,
// which shows each attempt's error.
func GaveUp(j Job, attempts int, detailsURL string) Publication {
	where := "the operator can see why in gilf's log"
	if detailsURL != "" {
		where = "Details shows each attempt's error on gilf's dashboard"
	}
	return Publication{
		HeadSHA: j.HeadSHA, Conclusion: ConclusionNeutral, NoReview: true, DetailsURL: detailsURL,
		Title: "gilf validation: ⚠️ not validated — gilf gave up",
		Summary: fmt.Sprintf("gilf's own infrastructure failed (%d %s), so this head was not validated. "+
			"This says nothing about the pull request; %s. Re-run to try again.",
			attempts, plural(attempts, "attempt", "attempts"), where),
	}
}

// detailsURL is the dashboard's page of the job, "" without a dashboard.
func (p *Pipeline) detailsURL(j Job) string {
	if p.DetailsURL == nil {
		return ""
	}
	return p.DetailsURL(j)
}

// validated is what validate produced.
type validated struct {
	rec            validation.Record
	shadow         *ShadowReport
	requestChanges bool
	// annotations are what the failed steps' output points at in the
	// checkout, found while it still existed.
	annotations []Annotation
	// noReview: only the check run says what happened (a draft).
	noReview bool
	// files and memoryPath are what the semantic review reads.
	files      []ChangedFile
	memoryPath string
	// originRuns and preexistingFails are failure origin's (origin.go).
	originRuns       []LaneRun
	preexistingFails bool
}

// refuse ends validation with ref before anything ran; it returns nil so
// a caller can return v, v.refuse(…).
func (v *validated) refuse(ref *validation.Refusal) error {
	v.rec = NewRecord(RecordInput{Refusal: ref})
	return nil
}

// validate runs everything between the pull request and the record: the
// repository's configuration, the gates that may skip or refuse it, the
// executor's selection, then execute.
func (p *Pipeline) validate(ctx context.Context, j Job, pr PR, base CheckProgress) (validated, error) {
	var v validated
	files, err := p.PRs.ChangedFiles(ctx, j)
	if err != nil {
		return v, fmt.Errorf("list changed files: %w", err)
	}
	repoCfg, ref, err := p.repoConfig(ctx, j, pr)
	if err != nil {
		return v, err
	}
	if ref != nil {
		return v, v.refuse(ref)
	}
	v.requestChanges = repoCfg.Review.RequestChanges
	v.files, v.memoryPath = files, repoCfg.Review.Memory
	merged := MergeValidation(p.Worker, repoCfg.Validation)
	v.preexistingFails = merged.Preexisting == PreexistingFailure
	if admitted, err := p.admit(ctx, j, pr, repoCfg, merged, &v); !admitted || err != nil {
		return v, err
	}

	sel := p.Selection
	sel.Provider = merged.Provider
	choice := sel.Resolve()
	notes := []string{choice.Note()}
	exec, ref := executors.Select(sel, p.Executors)
	if ref != nil {
		v.rec = NewRecord(RecordInput{Refusal: ref, Executor: choice.Name, Notes: notes})
		return v, nil
	}
	err = p.execute(ctx, j, pr, base, merged, exec, notes, &v)
	return v, err
}

// repoConfig reads the repository's configuration from the base branch
// (defaults when it has none); a file that does not parse is a refusal.
func (p *Pipeline) repoConfig(ctx context.Context, j Job, pr PR) (RepoConfig, *validation.Refusal, error) {
	cfgBytes, found, err := p.PRs.BaseFile(ctx, j, pr.BaseRef, ConfigPath)
	if err != nil {
		return RepoConfig{}, nil, fmt.Errorf("read %s from %s: %w", ConfigPath, pr.BaseRef, err)
	}
	if !found {
		return RepoConfig{}, nil, nil
	}
	fc := ParseRepoConfig(cfgBytes)
	if len(fc.Errors) > 0 {
		// Loud, and nothing runs: defaults the file did not mean
		// could run what it meant to switch off.
		return RepoConfig{}, validation.Refuse(validation.CodeRepoConfigInvalid,
			"%s on %s is invalid, so nothing was run: %s", ConfigPath, pr.BaseRef, fc.Problems()), nil
	}
	return fc.Config, nil, nil
}

// admit decides whether the pull request is validated at all: a draft, the
// execution policy and a diff with no code changes skip it, a deleted head
// repository refuses it. When it is not admitted, v.rec says why.
func (p *Pipeline) admit(ctx context.Context, j Job, pr PR, repoCfg RepoConfig, merged ValidationConfig, v *validated) (bool, error) {
	skip := func(reason string) (bool, error) {
		v.rec = NewRecord(RecordInput{Skipped: reason})
		return false, nil
	}
	if pr.Draft && !p.Drafts && !repoCfg.Review.Drafts {
		v.noReview = true
		return skip("the pull request is a draft; drafts are not validated unless review.drafts is true in " + ConfigPath)
	}
	if run, why := repoCfg.Execution.Decide(PRFacts{BaseRef: pr.BaseRef, Author: pr.Author, Labels: pr.Labels, Files: v.files, Draft: pr.Draft}); !run {
		return skip("execution policy: " + why)
	}
	if *merged.CodeChangesOnly {
		attrs, _, err := p.PRs.BaseFile(ctx, j, pr.BaseRef, ".gitattributes")
		if err != nil {
			return false, fmt.Errorf("read .gitattributes: %w", err)
		}
		if c := ClassifyDiff(v.files, attrs); c.Skips() {
			return skip(fmt.Sprintf("the diff is %s and codeChangesOnly is on", c))
		}
	}
	if pr.HeadRepoMissing {
		v.rec = NewRecord(RecordInput{Refusal: validation.Refuse(validation.CodeHeadRepositoryMissing,
			"the pull request's head repository no longer exists (the fork was deleted), so there is nothing to check out")})
		return false, nil
	}
	return true, nil
}

// execute checks the head out, plans it and runs the plan on exec (and
// the shadow lane), then compares a failure with the base and finds what
// the failed steps point at while the checkout still exists. The checkout
// is removed in every outcome.
func (p *Pipeline) execute(ctx context.Context, j Job, pr PR, base CheckProgress, merged ValidationConfig, exec executors.Executor, notes []string, v *validated) error {
	// Marked with this process, so a later worker removes it if this one
	// dies before its deferred removal (workdir.Sweep).
	dir, err := workdir.Create(p.WorkDir, "job-")
	if err != nil {
		return fmt.Errorf("make checkout dir: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			p.Logger.Error("remove checkout", logkey.Dir, dir, logkey.Err, err)
		}
	}()
	root, err := p.Checkouts.Checkout(ctx, j, j.HeadSHA, dir)
	if err != nil {
		return fmt.Errorf("check out %s: %w", j.HeadSHA, err)
	}
	plan := validation.BuildPlan(root, p.PlanOptions)
	plan.Env = merged.Env
	req := request(j, pr, merged, plan, root, dir, p.Secrets)
	if plan.Gap != nil {
		v.rec = NewRecord(RecordInput{Plan: plan, Executor: exec.Name(), Notes: notes})
		return nil
	}
	rep := p.running(ctx, j, base, plan, exec)
	if rep != nil {
		req.Progress = rep.started
		defer rep.close()
	}
	if p.Lanes != nil {
		res, sh, runErr := p.Lanes.Run(ctx, exec, req)
		v.shadow = sh
		v.rec, err = recordFromRun(plan, exec, res, runErr, notes)
	} else {
		v.rec, err = Validate(ctx, exec, req, notes)
	}
	if err == nil {
		v.originRuns, err = p.compare(ctx, j, pr, merged, exec, req, &v.rec, rep)
	}
	if err == nil {
		v.annotations = explain(&v.rec, root, v.files)
	}
	return err
}

// request is what the executor is asked to run: the plan in the checkout
// at root (under dir), with the job's labels and the executors' settings.
func request(j Job, pr PR, merged ValidationConfig, plan validation.Plan, root, dir string, secrets []validation.Secret) executors.Request {
	return executors.Request{
		Plan: plan, Dir: root, Root: dir, Secrets: secrets,
		Labels: map[string]string{"repo": j.FullName(), "pr": fmt.Sprint(j.Number), "job": fmt.Sprint(j.ID), "head_sha": j.HeadSHA,
			"clone_url": pr.CloneURL},
		Run: executors.RunConfig{
			CrabboxProvider: merged.Crabbox.Provider, CrabboxClass: merged.Crabbox.Class,
			E2BTemplate: merged.E2B.Template, E2BTimeout: time.Duration(merged.E2B.TimeoutMs) * time.Millisecond,
		},
	}
}

// running shows the check run in progress and reports each step as it
// starts; nil when the Publisher shows no progress. The caller closes it.
func (p *Pipeline) running(ctx context.Context, j Job, base CheckProgress, plan validation.Plan, exec executors.Executor) *progressReporter {
	pp, ok := p.Publisher.(ProgressPublisher)
	if !ok {
		return nil
	}
	rep := newProgressReporter(ctx, pp, j, base, JobLogger(p.Logger, j))
	rep.steps = plan.Steps
	rep.base.StartedAt = time.Now()
	st := rep.base
	st.Status, st.Title = StatusInProgress, "gilf validation: running"
	st.Summary = fmt.Sprintf("Validation started on %s.", code(exec.Name()))
	rep.base.Title = st.Title
	rep.send(st)
	return rep
}

// recordFromRun is Validate's record assembly for a run made elsewhere.
func recordFromRun(plan validation.Plan, exec executors.Executor, res executors.Result, runErr error, notes []string) (validation.Record, error) {
	in := RecordInput{Plan: plan, Executor: exec.Name(), Result: res, Notes: notes}
	if runErr != nil {
		var ref *validation.Refusal
		if errors.As(runErr, &ref) {
			in.Refusal, in.Result = ref, executors.Result{}
			return NewRecord(in), nil
		}
		return validation.Record{}, fmt.Errorf("run %s: %w", exec.Name(), runErr)
	}
	return NewRecord(in), nil
}
