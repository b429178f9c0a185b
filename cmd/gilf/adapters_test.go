package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// clock is a settable clock for the store (leases expire without
// sleeping).
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newTestStore(t testing.TB, c *clock) *store.DB {
	t.Helper()
	opts := store.Options{Jitter: func() float64 { return 0 }}
	if c != nil {
		opts.Now = c.Now
	}
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), DBFileName), slog.New(slog.DiscardHandler), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return db
}

// queueJob records a delivery that queues a job, through the waking inbox.
func queueJob(t *testing.T, in wakingInbox, id, sha string, installation int64) validation.RecordResult {
	t.Helper()
	res, err := in.RecordDelivery(t.Context(), validation.Delivery{
		ID: id, Event: "pull_request", Action: "opened", InstallationID: installation, Repo: "octo/hello",
		PR: 7, HeadSHA: sha, ReceivedAt: time.Now(), Status: validation.DeliveryQueued, Body: []byte(`{}`),
	}, &validation.JobSpec{Repo: "octo/hello", PR: 7, HeadSHA: sha, BaseRef: "main", InstallationID: installation,
		Trigger: "opened", PRUpdatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestServeQueueLifecycle(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	db := newTestStore(t, c)
	m := newServeMetrics(db)
	wake := make(chan struct{}, 1)
	in := wakingInbox{db: db, wake: wake, metrics: m}
	q := newStoreQueue(db, slog.New(slog.DiscardHandler), m)

	rec := queueJob(t, in, "d-1", "aaaaaaa", 11)
	select {
	case <-wake:
	default:
		t.Fatal("a queued job did not wake the workers")
	}
	if dup := queueJob(t, in, "d-1", "aaaaaaa", 11); !dup.Duplicate {
		t.Fatalf("redelivery: %+v, want duplicate", dup)
	}
	select {
	case <-wake:
		t.Fatal("a duplicate delivery woke the workers")
	default:
	}

	cl, ok, err := q.Claim(t.Context(), "w/0", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	want := review.Job{ID: rec.JobID, InstallationID: 11, Owner: "octo", Repo: "hello", Number: 7, HeadSHA: "aaaaaaa", Attempt: 1}
	if diff := cmp.Diff(want, cl.Job); diff != "" {
		t.Errorf("claimed job (-want +got):\n%s", diff)
	}
	if _, ok, err := q.Claim(t.Context(), "w/1", time.Minute); ok || err != nil {
		t.Fatalf("second claim of one job: %v, %v", ok, err)
	}
	c.now = c.now.Add(50 * time.Second)
	if err := q.Heartbeat(t.Context(), cl, time.Minute); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	c.now = c.now.Add(50 * time.Second) // within the extended lease
	if _, ok, _ := q.Claim(t.Context(), "w/1", time.Minute); ok {
		t.Fatal("a heartbeated lease was rescued")
	}

	started := c.now
	res := review.Result{Posted: true, Record: validation.Record{
		Outcome: validation.OutcomeFailed, Executor: "local", Started: started, Finished: started.Add(3 * time.Second),
		Steps:    []validation.StepResult{{Name: "test", Status: validation.StatusFailed}},
		Findings: []validation.Finding{{Severity: "high", Step: "test", Title: "npm run test failed"}},
	}, Spans: []costs.Span{{Lane: costs.LanePrimary, Executor: "local", Started: started, Finished: started.Add(3 * time.Second),
		Method: costs.MethodWallClock}}}
	if err := q.Complete(t.Context(), cl, res); err != nil {
		t.Fatalf("complete: %v", err)
	}
	st, err := db.JobState(t.Context(), rec.JobID)
	if err != nil || st.State != store.StateDone {
		t.Fatalf("job after complete: %+v, %v", st, err)
	}
	days, err := db.CostsByDay(t.Context(), started.Add(-time.Hour))
	if err != nil || len(days) != 1 || days[0].Executor != "local" || days[0].USD != nil || days[0].Seconds != 3 {
		t.Errorf("cost spans: %+v, %v; want one local span of 3 s with an unknown cost", days, err)
	}
	if err := q.Complete(t.Context(), cl, res); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("second complete of one claim: %v, want ErrLeaseLost", err)
	}
	if err := q.Heartbeat(t.Context(), cl, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("heartbeat after complete: %v, want ErrLeaseLost", err)
	}
}

func TestServeQueueLeaseLost(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	db := newTestStore(t, c)
	m := newServeMetrics(db)
	q := newStoreQueue(db, slog.New(slog.DiscardHandler), m)
	rec := queueJob(t, wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}, "d-2", "bbbbbbb", 11)

	dead, ok, err := q.Claim(t.Context(), "crashed/0", time.Second)
	if err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	c.now = c.now.Add(time.Second) // exactly at expiry: rescued
	rescued, ok, err := q.Claim(t.Context(), "alive/0", time.Minute)
	if err != nil || !ok || rescued.Job.ID != rec.JobID || rescued.Token != dead.Token+1 || rescued.Job.Attempt != 2 {
		t.Fatalf("rescue claim: %+v, %v, %v", rescued, ok, err)
	}
	if err := q.Heartbeat(t.Context(), dead, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("heartbeat of the rescued claim: %v, want ErrLeaseLost", err)
	}
	if err := q.Complete(t.Context(), dead, review.Result{}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("complete of the rescued claim: %v, want ErrLeaseLost", err)
	}
	if err := q.Complete(t.Context(), rescued, review.Result{Record: validation.Record{Outcome: validation.OutcomePassed}}); err != nil {
		t.Errorf("complete of the rescuer: %v", err)
	}
}

func TestServeQueueRetry(t *testing.T) {
	notFound := &gh.ErrorResponse{Response: &http.Response{StatusCode: http.StatusNotFound}, Message: "Not Found"}
	tests := []struct {
		name  string
		cause error
		state store.State
		least time.Duration // the next attempt waits at least this
	}{
		{"network error is retried", errors.New("dial tcp: connection refused"), store.StateQueued, store.DefaultRetryBase / 2},
		{"rate limit waits its Retry-After", fmt.Errorf("get pull request: %w",
			&github.TransientError{Op: "get pull request", RetryAfter: 2 * time.Hour, Err: errors.New("secondary rate limit")}),
			store.StateQueued, 2 * time.Hour},
		{"invalid input fails", fmt.Errorf("publish: %w", github.ErrInvalidInput), store.StateFailed, 0},
		{"redirect refused fails", github.ErrRedirectRefused, store.StateFailed, 0},
		{"pull request gone fails", fmt.Errorf("get pull request: %w", notFound), store.StateFailed, 0},
		{"shutdown is retried", context.Canceled, store.StateQueued, store.DefaultRetryBase / 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
			db := newTestStore(t, c)
			m := newServeMetrics(db)
			q := newStoreQueue(db, slog.New(slog.DiscardHandler), m)
			fin := &finisher{}
			q.finish = fin
			rec := queueJob(t, wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}, "d-r"+strconv.Itoa(i), "ccccccc", 11)
			cl, ok, err := q.Claim(t.Context(), "w/0", time.Minute)
			if err != nil || !ok {
				t.Fatalf("claim: %v, %v", ok, err)
			}
			if err := q.Retry(t.Context(), cl, tt.cause); err != nil {
				t.Fatalf("retry: %v", err)
			}
			st, err := db.JobState(t.Context(), rec.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tt.state || st.LastError != tt.cause.Error() {
				t.Errorf("job after retry: %s %q, want %s %q", st.State, st.LastError, tt.state, tt.cause.Error())
			}
			if tt.state == store.StateQueued {
				if wait := st.NextAttemptAt.Sub(c.now); wait < tt.least {
					t.Errorf("next attempt in %v, want at least %v", wait, tt.least)
				}
				if len(fin.got) != 0 {
					t.Errorf("a job queued again had its check run finished: %+v", fin.got)
				}
			} else if len(fin.got) != 1 || fin.got[0].Conclusion != review.ConclusionNeutral || !fin.got[0].NoReview ||
				!strings.Contains(fin.got[0].Title, "gave up") {
				// A job that will not run again leaves no check run in
				// progress.
				t.Errorf("finished check runs %+v, want one neutral 'gave up'", fin.got)
			}
			if err := q.Retry(t.Context(), cl, tt.cause); !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("second retry of one claim: %v, want ErrLeaseLost", err)
			}
		})
	}
}

func TestServeRunRecord(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	usd := 0.0042
	tel := executors.Telemetry{
		Requested: "e2b", Shadow: "managed-e2b", Primary: "local", Status: executors.ShadowOK,
		Steps: []executors.StepAgreement{
			{Name: "install", Primary: validation.StatusPassed, Shadow: validation.StatusPassed, Agree: true},
			{Name: "test", Primary: validation.StatusPassed, Shadow: validation.StatusFailed},
		},
		ShadowWall: 4 * time.Second, ShadowStarted: t0, ShadowFinished: t0.Add(4 * time.Second),
	}
	res := review.Result{
		Record: validation.Record{Outcome: validation.OutcomePassed, Executor: "local", Started: t0, Finished: t0.Add(2 * time.Second)},
		Shadow: &review.ShadowReport{Executor: "managed-e2b", Status: string(executors.ShadowOK), Data: tel},
		Spans: []costs.Span{
			{Lane: costs.LanePrimary, Executor: "local", Started: t0, Finished: t0.Add(2 * time.Second), Method: costs.MethodWallClock},
			{Lane: costs.LaneShadow, Executor: "managed-e2b", Started: t0, Finished: t0.Add(4 * time.Second), VCPU: 2, MemoryGiB: 0.5,
				USD: &usd, Method: costs.MethodWallClock},
			{Lane: costs.LaneSemantic, Executor: "model:m", Started: t0, Finished: t0.Add(time.Second), InputTokens: 1200, OutputTokens: 0,
				USD: &usd, Method: costs.MethodTokens},
			{Lane: costs.LaneSemantic, Executor: "model:m", Started: t0, Finished: t0.Add(time.Second), Method: costs.MethodTokens},
		},
		Artifacts: []evidence.Stored{{Kind: evidence.KindTestOutput, Step: "test", Name: "test.log", BodyBytes: 120, BodySHA256: "ab",
			Ref: validation.EvidenceRef{Kind: "test-output", Key: "review-artifacts/o%2Fr/sha/evidence/job-1/test-output/test.log"}}},
		UploadFailures: []evidence.UploadFailure{{Kind: evidence.KindLog, Name: "run.log", Key: "k", Reason: "503 Slow Down"}},
	}
	got := runRecord(res)
	two, half := 2.0, 0.5
	in, zero := int64(1200), int64(0)
	want := store.RunRecord{
		Record: res.Record,
		Spans: []store.CostSpan{
			{Lane: store.LanePrimary, Executor: "local", Started: t0, Finished: t0.Add(2 * time.Second), Method: costs.MethodWallClock},
			{Lane: store.LaneShadow, Executor: "managed-e2b", Started: t0, Finished: t0.Add(4 * time.Second), VCPU: &two, MemoryGiB: &half,
				USD: &usd, Method: costs.MethodWallClock},
			// Known counts are kept, a 0 beside a known other too; none
			// reported stays nil, never 0.
			{Lane: store.LaneSemantic, Executor: "model:m", Started: t0, Finished: t0.Add(time.Second), InputTokens: &in, OutputTokens: &zero,
				USD: &usd, Method: costs.MethodTokens},
			{Lane: store.LaneSemantic, Executor: "model:m", Started: t0, Finished: t0.Add(time.Second), Method: costs.MethodTokens},
		},
		Artifacts: []store.Artifact{
			{Key: "review-artifacts/o%2Fr/sha/evidence/job-1/test-output/test.log", Kind: "test-output", Bytes: 120, SHA256: "ab", Status: store.ArtifactPersisted},
			{Key: "k", Kind: "log", Status: store.ArtifactFailed, Err: "503 Slow Down"},
		},
		Shadow: &store.ShadowTelemetry{
			Executor: "managed-e2b", Outcome: validation.OutcomeFailed, Wall: 4 * time.Second, USD: &usd,
			Steps: []store.StepAgreement{
				{Step: "install", Primary: validation.StatusPassed, Shadow: validation.StatusPassed, Agree: true},
				{Step: "test", Primary: validation.StatusPassed, Shadow: validation.StatusFailed},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run record (-want +got):\n%s", diff)
	}

	timedOut := runRecord(review.Result{
		Record: validation.Record{Outcome: validation.OutcomeGap},
		Shadow: &review.ShadowReport{Executor: "self-host", Status: string(executors.ShadowTimeout), Summary: "shadow self-host ended timeout",
			Data: executors.Telemetry{Shadow: "self-host", Status: executors.ShadowTimeout}},
	})
	if timedOut.Shadow.Outcome != "" || timedOut.Shadow.Err != "shadow self-host ended timeout" || timedOut.Shadow.USD != nil || len(timedOut.Spans) != 0 {
		t.Errorf("timed-out shadow of a gap: %+v, spans %v", timedOut.Shadow, timedOut.Spans)
	}
}

// githubFixture is a GitHub client against the fake API, and a store with
// one job for the fake's pull request.
type githubFixture struct {
	srv *githubtest.Server
	c   *github.Client
	db  *store.DB
	job review.Job
}

func newGitHubFixture(t *testing.T, opts githubtest.Options) githubFixture {
	t.Helper()
	k := newAppKey(t)
	opts.AppID, opts.PublicKey = serveAppID, &k.key.PublicKey
	srv := githubtest.New(t, opts)
	c, err := github.New(github.Config{AppID: serveAppID, PrivateKey: k.key, BaseURL: srv.URL,
		DownloadHosts: []string{srv.CodeloadHost()}, Retry: github.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	db := newTestStore(t, nil)
	m := newServeMetrics(db)
	pr := githubPRs{c: c}
	// The fake's defaults are the real example's pull request.
	j := review.Job{InstallationID: 1, Owner: "octocat", Repo: "Hello-World", Number: 1347, HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e"}
	if opts.HeadSHA != "" {
		j.HeadSHA = opts.HeadSHA
	}
	if _, err := pr.PullRequest(t.Context(), j); err != nil && !opts.HeadRepoMissing {
		t.Fatalf("the fixture's job does not match the fake: %v", err)
	}
	res, err := wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}.RecordDelivery(t.Context(),
		validation.Delivery{ID: "gh-1", Event: "pull_request", Action: "opened", ReceivedAt: time.Now(),
			Status: validation.DeliveryQueued, Body: []byte(`{}`)},
		&validation.JobSpec{Repo: j.FullName(), PR: j.Number, HeadSHA: j.HeadSHA, BaseRef: "master", InstallationID: 1, Trigger: "opened"})
	if err != nil {
		t.Fatal(err)
	}
	j.ID = res.JobID
	return githubFixture{srv: srv, c: c, db: db, job: j}
}

func TestServeGitHubPullRequest(t *testing.T) {
	tests := []struct {
		name string
		opts githubtest.Options
		want review.PR
	}{
		{"open pull request", githubtest.Options{Author: "octo", Labels: []string{"bug"}, Draft: true},
			review.PR{HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", BaseRef: "master", Draft: true, Author: "octo", Labels: []string{"bug"},
				BaseSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", CloneURL: "https://github.com/octocat/Hello-World.git",
				Title: "Amazing new feature", Body: "Please pull these awesome changes in!"}},
		{"deleted head fork", githubtest.Options{HeadRepoMissing: true},
			review.PR{HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", BaseRef: "master", HeadRepoMissing: true, Author: "octocat", Labels: []string{"bug"},
				BaseSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", CloneURL: "https://github.com/octocat/Hello-World.git",
				Title: "Amazing new feature", Body: "Please pull these awesome changes in!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newGitHubFixture(t, tt.opts)
			got, err := githubPRs{c: f.c}.PullRequest(t.Context(), f.job)
			if err != nil {
				t.Fatalf("PullRequest: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PR (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServeGitHubChangedFilesTruncated(t *testing.T) {
	k := newAppKey(t)
	names := make([]string, 5)
	for i := range names {
		names[i] = fmt.Sprintf("docs/page%d.md", i)
	}
	srv := githubtest.New(t, githubtest.Options{AppID: serveAppID, PublicKey: &k.key.PublicKey, Files: names})
	j := review.Job{InstallationID: 1, Owner: "octocat", Repo: "Hello-World", Number: 1347}
	for _, tt := range []struct {
		max  int
		want []string
	}{
		{5, names}, // exactly at the cap: complete
		{4, append(append([]string(nil), names[:4]...), truncatedFileList)},
	} {
		t.Run(fmt.Sprintf("cap %d", tt.max), func(t *testing.T) {
			c, err := github.New(github.Config{AppID: serveAppID, PrivateKey: k.key, BaseURL: srv.URL, MaxChangedFiles: tt.max})
			if err != nil {
				t.Fatal(err)
			}
			files, err := githubPRs{c: c}.ChangedFiles(t.Context(), j)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				got = append(got, f.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			// Docs only when complete; a truncated list is code.
			wantClass := review.DiffDocsOnly
			if tt.max < len(names) {
				wantClass = review.DiffCode
			}
			if c := review.ClassifyDiff(files, nil); c != wantClass {
				t.Errorf("class %s, want %s", c, wantClass)
			}
		})
	}
}

func TestServeGitHubPublish(t *testing.T) {
	f := newGitHubFixture(t, githubtest.Options{})
	pub := githubPublisher{c: f.c, posted: f.db}
	p := review.Publication{HeadSHA: f.job.HeadSHA, Body: "## gilf validation: ✅ passed", Event: "COMMENT",
		Conclusion: review.ConclusionSuccess, Title: "gilf validation: ✅ passed", Summary: "2 of 2 steps passed"}
	if err := pub.Publish(t.Context(), f.job, p); err != nil {
		t.Fatalf("publish: %v", err)
	}
	reviews, checks := f.srv.Reviews(), f.srv.CheckRuns()
	if len(reviews) != 1 || len(checks) != 1 {
		t.Fatalf("%d reviews, %d check runs; want 1 and 1", len(reviews), len(checks))
	}
	if body, _ := reviews[0]["body"].(string); !strings.Contains(body, "<!-- gilf:job="+strconv.FormatInt(f.job.ID, 10)+" -->") {
		t.Errorf("review body lacks the job marker:\n%s", body)
	}
	posted, ok, err := f.db.PostedReview(t.Context(), f.job.ID)
	if err != nil || !ok || float64(posted.ReviewID) != toFloat(reviews[0]["id"]) || float64(posted.CheckRunID) != toFloat(checks[0]["id"]) {
		t.Errorf("store recorded %+v (%v, %v); GitHub has review %v and check run %v", posted, ok, err, reviews[0]["id"], checks[0]["id"])
	}
	// A retry (the worker died after posting) finds both and posts nothing.
	if err := pub.Publish(t.Context(), f.job, p); err != nil {
		t.Fatalf("publish again: %v", err)
	}
	if n, m := f.srv.Count(githubtest.CreateReview), f.srv.Count(githubtest.CreateCheckRun); n != 1 || m != 1 {
		t.Errorf("a retry posted again: %d review posts, %d check-run posts", n, m)
	}

	// The head moved on: nothing is posted, and the pipeline sees
	// ErrStaleHead.
	f.srv.SetHeadSHA("0000000000000000000000000000000000000001")
	stale := f.job
	stale.ID++
	err = pub.Publish(t.Context(), stale, p)
	if !errors.Is(err, review.ErrStaleHead) {
		t.Errorf("publish on a moved head: %v, want review.ErrStaleHead", err)
	}
	if n := f.srv.Count(githubtest.CreateReview); n != 1 {
		t.Errorf("a stale result was posted: %d review posts", n)
	}
}

// finisher records the check runs a queue finishes alone.
type finisher struct{ got []review.Publication }

func (f *finisher) FinishCheck(ctx context.Context, j review.Job, p review.Publication) error {
	f.got = append(f.got, p)
	return nil
}

// A job whose lease was lost because a newer head superseded it gets its
// check run completed; one another worker took over keeps its own.
func TestServeQueueAbandoned(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	db := newTestStore(t, c)
	m := newServeMetrics(db)
	in := wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}
	q := newStoreQueue(db, slog.New(slog.DiscardHandler), m)
	fin := &finisher{}
	q.finish = fin

	queueJob(t, in, "d-a1", "aaaaaaa", 11)
	old, ok, err := q.Claim(t.Context(), "w/0", time.Second)
	if err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	c.now = c.now.Add(time.Second)
	taken, ok, err := q.Claim(t.Context(), "w/1", time.Minute)
	if err != nil || !ok || taken.Job.ID != old.Job.ID {
		t.Fatalf("take-over claim: %+v, %v, %v", taken, ok, err)
	}
	q.Abandoned(t.Context(), old)
	if len(fin.got) != 0 {
		t.Fatalf("a job another worker holds had its check run finished: %+v", fin.got)
	}

	queueJob(t, in, "d-a2", "bbbbbbb", 11) // a newer head of the same pull request
	st, err := db.JobState(t.Context(), taken.Job.ID)
	if err != nil || st.State != store.StateSuperseded {
		t.Fatalf("old head's job: %+v, %v; want superseded", st, err)
	}
	q.Abandoned(t.Context(), taken)
	if len(fin.got) != 1 || fin.got[0].Conclusion != review.ConclusionNeutral || !fin.got[0].NoReview ||
		!strings.Contains(fin.got[0].Title, "superseded") || !strings.Contains(fin.got[0].Summary, "bbbbbbb") ||
		fin.got[0].HeadSHA != "aaaaaaa" {
		t.Errorf("finished %+v, want one neutral 'superseded' check run on the old head", fin.got)
	}
}
