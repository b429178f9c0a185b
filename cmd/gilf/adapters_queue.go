package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// This file adapts the store to the worker's Queue and to the webhook's
// Inbox.

// storeQueue is review.Queue over the store. The store's lease carries
// its owner and TTL besides the fencing token a review.Claim holds, so
// the queue keeps the leases it handed out until the claim ends.
type storeQueue struct {
	db      *store.DB
	store   string // the store's id (store.StoreID), named in every job's markers
	log     *slog.Logger
	metrics *serveMetrics
	// finish, when set, completes the check run of a job that ends
	// without a result (dead or failed), so none stays in progress.
	finish review.CheckFinisher
	// details, when set, is a job's page on the dashboard (the check
	// run's details_url; "" without GILF_DASHBOARD_URL).
	details func(jobID int64) string

	now func() time.Time // job durations

	mu      sync.Mutex
	leases  map[leaseKey]store.Lease
	claimed map[leaseKey]time.Time // when this process claimed it

	// Shadow lanes still running after their job completed: recorded
	// when they end; Close stops them and waits.
	shadows   sync.WaitGroup
	stop      chan struct{}
	closeOnce sync.Once
}

type leaseKey struct {
	job, gen int64
}

var (
	_ review.Queue       = (*storeQueue)(nil)
	_ review.StopChecker = (*storeQueue)(nil)
)

func newStoreQueue(db *store.DB, log *slog.Logger, m *serveMetrics) *storeQueue {
	return &storeQueue{db: db, log: log, metrics: m, now: time.Now, stop: make(chan struct{}),
		leases: make(map[leaseKey]store.Lease), claimed: make(map[leaseKey]time.Time)}
}

// Close stops the shadow lanes still running (each is recorded as
// cancelled) and waits for their records. Call it after the workers
// stopped.
func (q *storeQueue) Close() {
	q.closeOnce.Do(func() { close(q.stop) })
	q.shadows.Wait()
}

// finishShadow records a shadow lane that outlived its job's run, when
// it ends: its budget, its own end or Close stops it.
func (q *storeQueue) finishShadow(jobID, runID int64, sh *review.ShadowReport) {
	q.shadows.Go(func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-q.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		final := sh.Pending(ctx)
		if final == nil {
			return
		}
		run := runRecord(review.Result{Shadow: final, Spans: final.Spans})
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := q.db.FinishShadow(sctx, jobID, runID, *run.Shadow, run.Spans); err != nil {
			q.log.Error("shadow lane not recorded", logkey.JobID, jobID, logkey.RunID, runID, logkey.Err, err)
			return
		}
		q.log.Info("shadow lane recorded", logkey.JobID, jobID, logkey.RunID, runID, logkey.Executor, final.Executor, logkey.Status, final.Status)
	})
}

// Claim leases the next due job.
func (q *storeQueue) Claim(ctx context.Context, owner string, lease time.Duration) (review.Claim, bool, error) {
	j, ok, err := q.db.Claim(ctx, owner, lease)
	if err != nil || !ok {
		return review.Claim{}, false, err
	}
	q.mu.Lock()
	q.leases[leaseKey{j.ID, j.Lease.Gen}] = j.Lease
	q.claimed[leaseKey{j.ID, j.Lease.Gen}] = q.now()
	q.mu.Unlock()
	q.metrics.claimed.Inc()
	q.metrics.running.Inc()
	q.metrics.more.observeClaim(j, q.now())
	rj := jobOf(j, q.store)
	if j.Rerun > 0 {
		// A re-run carries why it was asked in the job's reason: the
		// review command asks for the whole pull request's review.
		st, err := q.db.JobState(ctx, j.ID)
		if err != nil {
			review.JobLogger(q.log, rj).Warn("reason of a re-run not read; reviewing incrementally", logkey.Err, err)
		}
		rj.FullReview = err == nil && fullReviewAsked(st.Reason)
	}
	return review.Claim{Job: rj, Token: j.Lease.Gen}, true, nil
}

// jobOf converts a claimed store job. A repository name without an owner
// cannot come from intake; it is kept whole so the GitHub client refuses
// it with a clear error.
func jobOf(j store.Job, storeID string) review.Job {
	owner, name, ok := strings.Cut(j.Repo, "/")
	if !ok {
		owner, name = j.Repo, ""
	}
	return review.Job{
		ID: j.ID, InstallationID: j.InstallationID, Owner: owner, Repo: name,
		Number: j.PR, HeadSHA: j.HeadSHA, Attempt: j.Attempts, Rerun: j.Rerun, Store: storeID,
	}
}

func (q *storeQueue) lease(c review.Claim) (store.Lease, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l, ok := q.leases[leaseKey{c.Job.ID, c.Token}]
	if !ok {
		return l, fmt.Errorf("job %d (gen %d) is not held by this process: %w: %w", c.Job.ID, c.Token, review.ErrLeaseLost, store.ErrLeaseLost)
	}
	return l, nil
}

// claimedAt is when this process claimed c (now, if it did not).
func (q *storeQueue) claimedAt(c review.Claim) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t, ok := q.claimed[leaseKey{c.Job.ID, c.Token}]; ok {
		return t
	}
	return q.now()
}

// release forgets a claim; it ends in this process whatever happens next.
func (q *storeQueue) release(c review.Claim) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.leases[leaseKey{c.Job.ID, c.Token}]; ok {
		delete(q.leases, leaseKey{c.Job.ID, c.Token})
		delete(q.claimed, leaseKey{c.Job.ID, c.Token})
		q.metrics.running.Dec()
	}
}

// Heartbeat extends the lease. A lost lease ends the claim in this
// process (review.ErrLeaseLost): the worker abandons the job, and the store
// hands it to another worker once the lease expires. Any other error (a
// busy store) keeps the claim: the worker tries again while the lease holds.
func (q *storeQueue) Heartbeat(ctx context.Context, c review.Claim, ttl time.Duration) error {
	l, err := q.lease(c)
	if err != nil {
		return err
	}
	l.TTL = ttl
	nl, err := q.db.Heartbeat(ctx, l)
	if errors.Is(err, store.ErrLeaseLost) {
		q.release(c)
		q.metrics.finished.WithLabelValues("lease_lost").Inc()
		return fmt.Errorf("%w: %w", review.ErrLeaseLost, err)
	}
	if err != nil {
		return fmt.Errorf("heartbeat job %d: %w", c.Job.ID, err)
	}
	q.mu.Lock()
	if _, ok := q.leases[leaseKey{c.Job.ID, c.Token}]; ok {
		q.leases[leaseKey{c.Job.ID, c.Token}] = nl
	}
	q.mu.Unlock()
	return nil
}

// Complete records the run — record, steps, findings, cost spans, shadow
// telemetry — and ends the job done, fenced by the lease.
func (q *storeQueue) Complete(ctx context.Context, c review.Claim, res review.Result) error {
	l, err := q.lease(c)
	if err != nil {
		return err
	}
	defer q.release(c)
	if len(res.HookErrors) > 0 {
		review.JobLogger(q.log, c.Job).Warn("post-run hooks failed; original findings kept", "errors", res.HookErrors)
	}
	run := runRecord(res)
	stampRun(&run.Record, q.claimedAt(c), q.now())
	runID, err := q.db.Finish(ctx, l, run)
	if err != nil {
		res.Shadow.Stop() // its run is not recorded
		result := "store_error"
		if errors.Is(err, store.ErrLeaseLost) {
			result = "lease_lost"
		}
		q.metrics.finished.WithLabelValues(result).Inc()
		return fmt.Errorf("complete job %d: %w", c.Job.ID, err)
	}
	if res.Shadow != nil && res.Shadow.Pending != nil {
		q.finishShadow(c.Job.ID, runID, res.Shadow)
	}
	q.metrics.finished.WithLabelValues(string(store.StateDone)).Inc()
	q.metrics.runs.WithLabelValues(string(res.Record.Outcome)).Inc()
	q.metrics.jobs.observe(res, q.now().Sub(q.claimedAt(c)))
	q.metrics.more.observeRun(res, run)
	review.JobLogger(q.log, c.Job).Info("job done", logkey.RunID, runID, logkey.Outcome, res.Record.Outcome,
		logkey.Executor, res.Record.Executor, "posted", res.Posted, "stale", res.Stale)
	return nil
}

// Retry releases the job after an infrastructure failure: queued again
// with backoff when the failure is transient, failed when retrying
// cannot help, dead after the last attempt.
func (q *storeQueue) Retry(ctx context.Context, c review.Claim, cause error) error {
	l, err := q.lease(c)
	if err != nil {
		return err
	}
	defer q.release(c)
	r, err := q.db.Retry(ctx, l, store.Failure{Err: github.RetryCause(cause), Transient: github.Transient(cause)})
	if err != nil {
		result := "store_error"
		if errors.Is(err, store.ErrLeaseLost) {
			result = "lease_lost"
		}
		q.metrics.finished.WithLabelValues(result).Inc()
		return fmt.Errorf("release job %d: %w", c.Job.ID, err)
	}
	q.metrics.finished.WithLabelValues(string(r.State)).Inc()
	if r.State == store.StateQueued {
		review.JobLogger(q.log, c.Job).Info("job released", logkey.JobState, r.State, "next_attempt_at", r.NextAttemptAt, logkey.Attempt, c.Job.Attempt)
		return nil
	}
	// Dead or failed: the job will not run again unless asked (Re-run).
	review.JobLogger(q.log, c.Job).Error("job ended without a result", logkey.JobState, r.State, logkey.Attempt, c.Job.Attempt, "last_error", github.RetryCause(cause))
	if q.finish != nil && c.Job.InstallationID != 0 {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), review.ProgressTimeout)
		defer cancel()
		if err := q.finish.FinishCheck(fctx, c.Job, review.GaveUp(c.Job, c.Job.Attempt, q.detailsURL(c.Job.ID))); err != nil {
			review.JobLogger(q.log, c.Job).Warn("check run of a job that gave up not completed", logkey.Err, err)
		}
	}
	return nil
}

var _ review.Abandoner = (*storeQueue)(nil)

// Stopped reads whether a held job was superseded, cancelled or taken
// over since it was claimed: one read of its row.
func (q *storeQueue) Stopped(ctx context.Context, c review.Claim) (bool, error) {
	st, err := q.db.JobState(ctx, c.Job.ID)
	if err != nil {
		return false, err
	}
	return st.State != store.StateRunning || st.LeaseGen != c.Token, nil
}

// Abandoned completes the check run of a job whose lease was lost because
// it was superseded or cancelled; a job another worker took over, or one
// re-run since, is left to its new owner.
func (q *storeQueue) Abandoned(ctx context.Context, c review.Claim) {
	if q.finish == nil || c.Job.InstallationID == 0 {
		return
	}
	st, err := q.db.JobState(ctx, c.Job.ID)
	if err != nil {
		review.JobLogger(q.log, c.Job).Warn("abandoned job's state not read", logkey.Err, err)
		return
	}
	var title string
	switch st.State {
	case store.StateSuperseded:
		title = "gilf validation: ⏭️ not validated — superseded"
	case store.StateCancelled:
		title = "gilf validation: ⏭️ not validated — cancelled"
	default:
		return
	}
	if st.Reruns != c.Job.Rerun {
		return
	}
	summary := "This validation was stopped before it finished: " + st.Reason + "."
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), review.ProgressTimeout)
	defer cancel()
	if err := q.finish.FinishCheck(fctx, c.Job, review.Publication{
		HeadSHA: c.Job.HeadSHA, Conclusion: review.ConclusionNeutral, NoReview: true, Title: title, Summary: summary,
		DetailsURL: q.detailsURL(c.Job.ID),
	}); err != nil {
		review.JobLogger(q.log, c.Job).Warn("check run of an abandoned job not completed", logkey.Err, err)
	}
}

// detailsURL is the dashboard's page of a job, "" without one.
func (q *storeQueue) detailsURL(id int64) string {
	if q.details == nil {
		return ""
	}
	return q.details(id)
}

// stampRun gives a record that ran nothing (refused before an executor
// was chosen, or a job without an installation) the times of its
// attempt, so it is found by date like any run: claimed is when this
// process claimed the job, now when the result was recorded.
func stampRun(rec *validation.Record, claimed, now time.Time) {
	if rec.Started.IsZero() {
		rec.Started = claimed
	}
	if rec.Finished.IsZero() {
		rec.Finished = now
	}
	if rec.Finished.Before(rec.Started) {
		rec.Finished = rec.Started
	}
}

// runRecord is what the store keeps of a pipeline result: the record,
// the cost spans and evidence of the post-run stages, and the shadow
// lane's telemetry.
func runRecord(res review.Result) store.RunRecord {
	run := store.RunRecord{Record: res.Record}
	for _, s := range res.Spans {
		run.Spans = append(run.Spans, costSpan(s))
	}
	for _, a := range res.Artifacts {
		run.Artifacts = append(run.Artifacts, store.Artifact{
			Key: a.Ref.Key, Kind: string(a.Kind), Bytes: int64(a.BodyBytes), SHA256: a.BodySHA256,
			Status: store.ArtifactPersisted, URL: a.Ref.URL,
		})
	}
	for _, f := range res.UploadFailures {
		run.Artifacts = append(run.Artifacts, store.Artifact{
			Key: f.Key, Kind: string(f.Kind), Status: store.ArtifactFailed, Err: f.Reason,
		})
	}
	if res.Shadow == nil {
		return run
	}
	sh := &store.ShadowTelemetry{Executor: res.Shadow.Executor}
	if tel, ok := res.Shadow.Data.(executors.Telemetry); ok {
		sh.Wall = tel.ShadowWall
		sh.Err = tel.Error
		if sh.Executor == "" {
			sh.Executor = tel.Requested
		}
		for _, s := range tel.Steps {
			sh.Steps = append(sh.Steps, store.StepAgreement{Step: s.Name, Primary: s.Primary, Shadow: s.Shadow, Agree: s.Agree})
		}
		if tel.Status == executors.ShadowOK {
			sh.Outcome = shadowOutcome(tel.Steps)
		}
	}
	for _, s := range res.Spans {
		if s.Lane == costs.LaneShadow && s.USD != nil {
			usd := *s.USD
			sh.USD = &usd
		}
	}
	if res.Shadow.Pending != nil {
		sh.Err = "running: recorded when the lane ends"
	}
	if sh.Err == "" && res.Shadow.Status != string(executors.ShadowOK) {
		sh.Err = res.Shadow.Summary
	}
	run.Shadow = sh
	return run
}

// costSpan converts a priced span; unknown inputs, token counts and
// costs stay nil, never zero (a model span with one count of 0 beside a
// known other keeps both).
func costSpan(s costs.Span) store.CostSpan {
	out := store.CostSpan{Lane: store.Lane(s.Lane), Executor: s.Executor, Started: s.Started, Finished: s.Finished,
		USD: s.USD, Method: s.Method}
	if s.InputTokens > 0 || s.OutputTokens > 0 {
		in, outTok := s.InputTokens, s.OutputTokens
		out.InputTokens, out.OutputTokens = &in, &outTok
	}
	if s.VCPU > 0 {
		v := s.VCPU
		out.VCPU = &v
	}
	if s.MemoryGiB > 0 {
		v := s.MemoryGiB
		out.MemoryGiB = &v
	}
	return out
}

// shadowOutcome summarises the shadow's own step statuses: failed when
// any step failed, passed when every step passed, inconclusive otherwise.
func shadowOutcome(steps []executors.StepAgreement) validation.Outcome {
	if len(steps) == 0 {
		return validation.OutcomeInconclusive
	}
	passed := true
	for _, s := range steps {
		switch s.Shadow {
		case validation.StatusFailed, validation.StatusTimedOut, validation.StatusKilled:
			return validation.OutcomeFailed
		case validation.StatusPassed:
		default:
			passed = false
		}
	}
	if passed {
		return validation.OutcomePassed
	}
	return validation.OutcomeInconclusive
}

// wakingInbox is the webhook's Inbox over the store: after a delivery
// that queued a job committed, it wakes an idle worker so the job starts
// at once instead of at the next poll.
type wakingInbox struct {
	db      webhook.Inbox
	wake    chan<- struct{}
	metrics *serveMetrics
	// store is this store's id: a re-run of another store's check run
	// (a reset database, a move) re-runs its head, never this store's
	// job of the same number.
	store string
}

var _ webhook.Inbox = wakingInbox{}

func (in wakingInbox) RecordDelivery(ctx context.Context, d validation.Delivery, job *validation.JobSpec) (validation.RecordResult, error) {
	if r := d.Rerun; r != nil && r.Store != "" && r.Store != in.store {
		head := *r
		head.JobID, head.Store = 0, ""
		head.Reason = fmt.Sprintf("re-run of head %s requested (a check run of another gilf store, %s)", r.HeadSHA, r.Store)
		d.Rerun = &head
	}
	res, err := in.db.RecordDelivery(ctx, d, job)
	switch {
	case err != nil:
		in.metrics.deliveries.WithLabelValues("error").Inc()
		return res, err
	case res.Duplicate:
		in.metrics.deliveries.WithLabelValues("duplicate").Inc()
		return res, nil
	}
	in.metrics.deliveries.WithLabelValues(string(d.Status)).Inc()
	if res.JobID != 0 && res.JobState == string(store.StateQueued) {
		select {
		case in.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return res, nil
}
