package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/internal/logkey"
)

// Check-run statuses.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
)

// Annotation levels GitHub accepts.
const (
	AnnotationNotice  = "notice"
	AnnotationWarning = "warning"
	AnnotationFailure = "failure"
)

// Limits of the Checks API.
const (
	// MaxAnnotationsPerRequest: "The Checks API limits the number of
	// annotations to a maximum of 50 per API request"; more are sent in
	// further updates, which GitHub appends.
	MaxAnnotationsPerRequest = 50
	// MaxCheckTextBytes: check-run output.text is at most 65 535
	// characters.
	MaxCheckTextBytes = 65535
	// maxAnnotationTitleBytes: an annotation's title is at most 255
	// characters; maxAnnotationMessageBytes: its message at most 64 KB.
	maxAnnotationTitleBytes   = 255
	maxAnnotationMessageBytes = 64 << 10
)

// Annotation is one check-run annotation: a finding on lines of a file.
type Annotation struct {
	Path               string
	StartLine, EndLine int
	// StartColumn and EndColumn are sent only when StartLine ==
	// EndLine (GitHub's rule); 0 means none.
	StartColumn, EndColumn int
	Level                  string // AnnotationNotice, AnnotationWarning or AnnotationFailure
	Title, Message         string
}

// sendable says whether GitHub would accept a: a path, a line (1 or
// more), a known level and a message. EndLine before StartLine is taken
// as StartLine.
func (a Annotation) sendable() bool {
	switch a.Level {
	case AnnotationNotice, AnnotationWarning, AnnotationFailure:
	default:
		return false
	}
	return a.Path != "" && a.StartLine >= 1 && a.Message != ""
}

// sendableAnnotations keeps the annotations GitHub would accept, in
// order: one that cannot be sent must not fail the whole result, and the
// filter is a pure function of the input, so every attempt sends the
// same sequence (what makes skipping annotations_count of them safe).
func sendableAnnotations(as []Annotation) (keep []Annotation, dropped int) {
	for _, a := range as {
		if a.sendable() {
			keep = append(keep, a)
		} else {
			dropped++
		}
	}
	return keep, dropped
}

func (a Annotation) wire() *gh.CheckRunAnnotation {
	end := max(a.EndLine, a.StartLine)
	w := &gh.CheckRunAnnotation{
		Path:            gh.Ptr(a.Path),
		StartLine:       gh.Ptr(a.StartLine),
		EndLine:         gh.Ptr(end),
		AnnotationLevel: gh.Ptr(a.Level),
		Message:         gh.Ptr(clip(a.Message, maxAnnotationMessageBytes)),
	}
	if t := clipLine(firstLine(a.Title), maxAnnotationTitleBytes); t != "" {
		w.Title = gh.Ptr(t)
	}
	if a.StartLine == end && a.StartColumn > 0 {
		w.StartColumn = gh.Ptr(a.StartColumn)
		if a.EndColumn >= a.StartColumn {
			w.EndColumn = gh.Ptr(a.EndColumn)
		}
	}
	return w
}

// CheckStart starts (or moves on) a job's check run.
type CheckStart struct {
	JobID     string // the check run's external_id
	HeadSHA   string
	Status    string    // StatusQueued or StatusInProgress
	StartedAt time.Time // sent with StatusInProgress; zero means now
	// Output; both empty sends none.
	Title, Summary string
	DetailsURL     string
}

// CheckUpdate is a progress update of a check run that is not completed.
type CheckUpdate struct {
	Status               string // "", StatusQueued or StatusInProgress; "" keeps it
	Title, Summary, Text string
}

// checkRunPatch is the body of PATCH /repos/{o}/{r}/check-runs/{id}.
// go-github's UpdateCheckRunOptions cannot carry started_at.
type checkRunPatch struct {
	DetailsURL  string             `json:"details_url,omitempty"`
	Status      string             `json:"status,omitempty"`
	Conclusion  string             `json:"conclusion,omitempty"`
	StartedAt   *gh.Timestamp      `json:"started_at,omitempty"`
	CompletedAt *gh.Timestamp      `json:"completed_at,omitempty"`
	Output      *gh.CheckRunOutput `json:"output,omitempty"`
}

// StartCheckRun makes the job's check run (external_id s.JobID, this
// App's, named Config.CheckName) show s.Status: it creates the run when
// there is none, PATCHes a run that is not completed, and leaves a
// completed run alone. It returns the run's id. It is idempotent: a
// retry or a rerun after a crash finds the run by its external_id.
func (c *Client) StartCheckRun(ctx context.Context, r Repo, s CheckStart) (id int64, err error) {
	if !jobIDRe.MatchString(s.JobID) || s.HeadSHA == "" || (s.Status != StatusQueued && s.Status != StatusInProgress) {
		return 0, fmt.Errorf("check start: %w: job %q, head %q, status %q", ErrInvalidInput, s.JobID, s.HeadSHA, s.Status)
	}
	g, err := c.forRepo(r)
	if err != nil {
		return 0, err
	}
	var started *gh.Timestamp
	if s.Status == StatusInProgress {
		at := s.StartedAt
		if at.IsZero() {
			at = c.clock.Now()
		}
		started = &gh.Timestamp{Time: at.UTC()}
	}
	var output *gh.CheckRunOutput
	if s.Title != "" || s.Summary != "" {
		output = c.output(s.Title, s.Summary, "", s.Status)
	}
	var found runState
	landed := func(ctx context.Context) (bool, error) {
		var err error
		found, err = c.findCheckRun(ctx, g, r, s.JobID, s.HeadSHA)
		return found.id != 0, err
	}
	err = c.post(ctx, "start check run", landed, func(ctx context.Context) (*gh.Response, error) {
		opts := gh.CreateCheckRunOptions{
			Name:       c.cfg.CheckName,
			HeadSHA:    s.HeadSHA,
			ExternalID: gh.Ptr(s.JobID),
			Status:     gh.Ptr(s.Status),
			StartedAt:  started,
			Output:     output,
		}
		if s.DetailsURL != "" {
			opts.DetailsURL = gh.Ptr(s.DetailsURL)
		}
		cr, resp, err := g.Checks.CreateCheckRun(ctx, r.Owner, r.Name, opts)
		if err == nil {
			id = cr.GetID()
		}
		return resp, err
	})
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, errLanded) {
		return 0, fmt.Errorf("%s check run: %w", r, err)
	}
	id = found.id
	if found.status == StatusCompleted {
		c.log.Info("check run already completed; not starting it again", logkey.Repo, r.String(), logkey.HeadSHA, s.HeadSHA, logkey.CheckRunID, id)
		return id, nil
	}
	err = c.call(ctx, "start check run", func(ctx context.Context) (*gh.Response, error) {
		return c.patchCheckRun(ctx, g, r, id, checkRunPatch{Status: s.Status, StartedAt: started, DetailsURL: s.DetailsURL, Output: output})
	})
	if err != nil {
		return 0, fmt.Errorf("%s check run %d: %w", r, id, err)
	}
	return id, nil
}

// UpdateCheckRun shows progress on check run id: its status and output
// (the summary so far). A completed run is left alone (nil error): a
// progress update never un-completes a run. Completing is Publish's job.
// The run is read just before the PATCH; the one job that owns the run
// both updates and completes it, so nothing completes it in between.
func (c *Client) UpdateCheckRun(ctx context.Context, r Repo, id int64, u CheckUpdate) error {
	if id <= 0 || (u.Status != "" && u.Status != StatusQueued && u.Status != StatusInProgress) {
		return fmt.Errorf("check update: %w: id %d, status %q", ErrInvalidInput, id, u.Status)
	}
	g, err := c.forRepo(r)
	if err != nil {
		return err
	}
	cr, err := c.getCheckRun(ctx, g, r, id)
	if err != nil {
		return fmt.Errorf("%s check run %d: %w", r, id, err)
	}
	if cr.status == StatusCompleted {
		c.log.Info("check run already completed; progress not shown", logkey.Repo, r.String(), logkey.CheckRunID, id)
		return nil
	}
	status := u.Status
	if status == "" {
		status = cr.status
	}
	body := checkRunPatch{Status: u.Status}
	if u.Title != "" || u.Summary != "" || u.Text != "" {
		body.Output = c.output(u.Title, u.Summary, u.Text, status)
	}
	if err := c.call(ctx, "update check run", func(ctx context.Context) (*gh.Response, error) {
		return c.patchCheckRun(ctx, g, r, id, body)
	}); err != nil {
		return fmt.Errorf("%s check run %d: %w", r, id, err)
	}
	return nil
}

// PostCheckRun completes the job's check run (see completeCheckRun). It
// returns the run's id and whether it was found completed already.
func (c *Client) PostCheckRun(ctx context.Context, r Repo, p Publication) (id int64, found bool, err error) {
	if err := p.validate(); err != nil {
		return 0, false, err
	}
	g, err := c.forRepo(r)
	if err != nil {
		return 0, false, err
	}
	res, err := c.completeCheckRun(ctx, g, r, p)
	if err != nil {
		return res.id, false, fmt.Errorf("%s check run: %w", r, err)
	}
	return res.id, res.found, nil
}

type completion struct {
	id             int64
	found, created bool
	sent           int
}

// completeCheckRun completes the job's check run with p's conclusion and
// output, sending p.Annotations MaxAnnotationsPerRequest at a time.
//
// The run is found by external_id p.JobID; when there is none (the job
// never started one, or crashed before), it is created: completed in one
// POST when the annotations fit in one request, else in_progress and
// then completed by the PATCHes below. A run found completed is left
// alone (found).
//
// Each batch is a PATCH carrying output title and summary (GitHub
// requires both with any output); the last one also carries status
// completed, the conclusion, completed_at and details_url. GitHub
// appends the annotations of each PATCH, so none may be sent twice: the
// run's output.annotations_count (GET …/check-runs/{id}) says how many an
// earlier attempt sent, and the order of p.Annotations is deterministic,
// so that many are skipped. Before retrying a PATCH whose answer was
// lost, the count is read again.
func (c *Client) completeCheckRun(ctx context.Context, g *gh.Client, r Repo, p Publication) (completion, error) {
	annots, dropped := sendableAnnotations(p.Annotations)
	if dropped > 0 {
		c.log.Warn("annotations GitHub would refuse are not sent", logkey.Repo, r.String(), logkey.HeadSHA, p.HeadSHA, "dropped", dropped)
	}
	k := &completer{c: c, g: g, r: r, p: p, annots: annots, n: len(annots), now: &gh.Timestamp{Time: c.clock.Now().UTC()}}
	done, err := k.create(ctx)
	if err != nil || done {
		return k.res, err
	}
	return k.res, k.patch(ctx)
}

// completer is one completion of a check run: what completeCheckRun's
// phases share. create finds or creates the run, patch sends the rest.
type completer struct {
	c      *Client
	g      *gh.Client
	r      Repo
	p      Publication
	annots []Annotation
	n      int // len(annots)
	now    *gh.Timestamp
	res    completion
	// sent counts the annotations the run has: this attempt's and an
	// earlier one's.
	sent int
}

// output is the run's output with batch as its annotations.
func (k *completer) output(batch []Annotation) *gh.CheckRunOutput {
	o := k.c.output(k.p.Title, k.p.Summary, k.p.Text, k.p.Conclusion)
	for _, a := range batch {
		o.Annotations = append(o.Annotations, a.wire())
	}
	return o
}

// create creates the run, completed at once when its annotations fit in
// one request; when an earlier attempt created it, it reads how far that
// one got. done is true when nothing is left to send.
func (k *completer) create(ctx context.Context) (done bool, err error) {
	oneShot := k.n <= MaxAnnotationsPerRequest
	var found runState
	landed := func(ctx context.Context) (bool, error) {
		var err error
		found, err = k.c.findCheckRun(ctx, k.g, k.r, k.p.JobID, k.p.HeadSHA)
		return found.id != 0, err
	}
	err = k.c.post(ctx, "post check run", landed, func(ctx context.Context) (*gh.Response, error) {
		opts := gh.CreateCheckRunOptions{
			Name:       k.c.cfg.CheckName,
			HeadSHA:    k.p.HeadSHA,
			ExternalID: gh.Ptr(k.p.JobID),
		}
		if oneShot {
			opts.Status, opts.Conclusion, opts.CompletedAt = gh.Ptr(StatusCompleted), gh.Ptr(k.p.Conclusion), k.now
			opts.Output = k.output(k.annots)
			if k.p.DetailsURL != "" {
				opts.DetailsURL = gh.Ptr(k.p.DetailsURL)
			}
		} else {
			opts.Status, opts.StartedAt = gh.Ptr(StatusInProgress), k.now
		}
		cr, resp, err := k.g.Checks.CreateCheckRun(ctx, k.r.Owner, k.r.Name, opts)
		if err == nil {
			k.res.id = cr.GetID()
		}
		return resp, err
	})
	switch {
	case err == nil:
		k.res.created = true
		if oneShot {
			k.res.sent = k.n
			return true, nil
		}
		return false, nil
	case errors.Is(err, errLanded):
		return k.resume(ctx, found.id)
	default:
		return false, err
	}
}

// resume takes up the run an earlier attempt created: left alone when
// it is completed, else the annotations it has are not sent again.
func (k *completer) resume(ctx context.Context, id int64) (done bool, err error) {
	k.res.id = id
	cr, err := k.c.getCheckRun(ctx, k.g, k.r, id)
	if err != nil {
		return false, err
	}
	if cr.status == StatusCompleted {
		k.c.log.Info("check run already completed; not completing it again", logkey.Repo, k.r.String(), logkey.HeadSHA, k.p.HeadSHA, logkey.CheckRunID, id)
		k.res.found = true
		return true, nil
	}
	k.sent = min(max(cr.annotations, 0), k.n)
	if k.sent > 0 {
		k.c.log.Info("check run has annotations from an earlier attempt; sending the rest", logkey.Repo, k.r.String(), logkey.CheckRunID, id, "sent", k.sent, "total", k.n)
	}
	return false, nil
}

// patch sends the annotations not sent yet, a batch a PATCH, the last
// one completing the run. Each round sends one batch or learns that it
// (or everything) landed; it always moves on, so n/50+2 rounds suffice.
func (k *completer) patch(ctx context.Context) error {
	for range k.n/MaxAnnotationsPerRequest + 2 {
		end := min(k.sent+MaxAnnotationsPerRequest, k.n)
		last := end == k.n
		body := checkRunPatch{Output: k.output(k.annots[k.sent:end])}
		if last {
			body.Status, body.Conclusion, body.CompletedAt, body.DetailsURL = StatusCompleted, k.p.Conclusion, k.now, k.p.DetailsURL
		}
		completed := false
		landed := afterFirst(func(ctx context.Context) (landed bool, err error) {
			landed, completed, err = k.recount(ctx)
			return landed, err
		})
		err := k.c.post(ctx, "complete check run", landed, func(ctx context.Context) (*gh.Response, error) {
			return k.c.patchCheckRun(ctx, k.g, k.r, k.res.id, body)
		})
		switch {
		case errors.Is(err, errLanded):
			if completed {
				return nil
			}
			continue
		case err != nil:
			return fmt.Errorf("id %d: %w", k.res.id, err)
		}
		k.res.sent += end - k.sent
		k.sent = end
		if last {
			return nil
		}
	}
	return fmt.Errorf("id %d: annotations_count did not advance (%d of %d)", k.res.id, k.sent, k.n)
}

// recount reads the run again before a PATCH whose answer was lost is
// retried: it landed when the run is completed, or has a count of
// annotations other than sent (which then moves to it).
func (k *completer) recount(ctx context.Context) (landed, completed bool, err error) {
	cr, err := k.c.getCheckRun(ctx, k.g, k.r, k.res.id)
	if err != nil {
		return false, false, err
	}
	if cr.status == StatusCompleted {
		return true, true, nil
	}
	if got := min(max(cr.annotations, 0), k.n); got != k.sent {
		k.res.sent += got - k.sent
		k.sent = got
		return true, false, nil
	}
	return false, false, nil
}

// output builds a check-run output; title defaults to "<check>: <state>"
// and summary to the title (GitHub requires both with any output).
func (c *Client) output(title, summary, text, state string) *gh.CheckRunOutput {
	title = clipLine(firstLine(title), MaxCheckTitleBytes)
	if title == "" {
		title = c.cfg.CheckName + ": " + state
	}
	if summary == "" {
		summary = title
	}
	o := &gh.CheckRunOutput{Title: gh.Ptr(title), Summary: gh.Ptr(clip(summary, MaxCheckSummaryBytes))}
	if text != "" {
		o.Text = gh.Ptr(clip(text, MaxCheckTextBytes))
	}
	return o
}

func (c *Client) getCheckRun(ctx context.Context, g *gh.Client, r Repo, id int64) (runState, error) {
	var st runState
	err := c.call(ctx, "get check run", func(ctx context.Context) (*gh.Response, error) {
		cr, resp, err := g.Checks.GetCheckRun(ctx, r.Owner, r.Name, id)
		if err == nil {
			st = stateOf(cr)
		}
		return resp, err
	})
	return st, err
}

func (c *Client) patchCheckRun(ctx context.Context, g *gh.Client, r Repo, id int64, body checkRunPatch) (*gh.Response, error) {
	req, err := g.NewRequest(http.MethodPatch, fmt.Sprintf("repos/%v/%v/check-runs/%v", r.Owner, r.Name, id), body)
	if err != nil {
		return nil, err
	}
	return g.Do(ctx, req, nil)
}

// runState is what gilf reads back of a check run; the zero value is "no
// such run".
type runState struct {
	id          int64
	status      string
	annotations int // output.annotations_count
}

func stateOf(cr *gh.CheckRun) runState {
	return runState{id: cr.GetID(), status: cr.GetStatus(), annotations: cr.GetOutput().GetAnnotationsCount()}
}

// findCheckRun finds this App's check run with external_id jobID on sha
// (id 0 when there is none).
func (c *Client) findCheckRun(ctx context.Context, g *gh.Client, r Repo, jobID, sha string) (runState, error) {
	opts := &gh.ListCheckRunsOptions{CheckName: gh.Ptr(c.cfg.CheckName), Filter: gh.Ptr("all"), AppID: gh.Ptr(c.cfg.AppID), ListOptions: gh.ListOptions{PerPage: checkRunsPerPage, Page: 1}}
	for range maxListPages {
		var res *gh.ListCheckRunsResults
		var next int
		err := c.call(ctx, "list check runs", func(ctx context.Context) (*gh.Response, error) {
			var resp *gh.Response
			var err error
			res, resp, err = g.Checks.ListCheckRunsForRef(ctx, r.Owner, r.Name, sha, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return runState{}, err
		}
		for _, cr := range res.CheckRuns {
			if cr.GetExternalID() == jobID && (cr.App == nil || cr.GetApp().GetID() == c.cfg.AppID) {
				return stateOf(cr), nil
			}
		}
		if next == 0 {
			return runState{}, nil
		}
		opts.Page = next
	}
	return runState{}, nil
}
