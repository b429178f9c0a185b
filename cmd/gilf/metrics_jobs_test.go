package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// queuePR records a delivery that queues a job for pull request pr.
func queuePR(t *testing.T, in wakingInbox, pr int, at time.Time) {
	t.Helper()
	sha := fmt.Sprintf("%040x", pr)
	if _, err := in.RecordDelivery(t.Context(), validation.Delivery{
		ID: fmt.Sprintf("d-%d", pr), Event: "pull_request", Action: "opened", InstallationID: 11, Repo: "octo/hello",
		PR: pr, HeadSHA: sha, ReceivedAt: at, Status: validation.DeliveryQueued, Body: []byte(`{}`),
	}, &validation.JobSpec{Repo: "octo/hello", PR: pr, HeadSHA: sha, BaseRef: "main", InstallationID: 11,
		Trigger: "opened", PRUpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
}

// TestJobMetricsScrape runs two jobs through the store queue — one that
// ran steps and lost two evidence uploads, one refused before an executor
// was chosen — leaves a third queued, lets a real GitHub client make a
// call, and expects /metrics to show every operator metric with its
// labels.
func TestJobMetricsScrape(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	db := newTestStore(t, c)
	m := newServeMetrics(db)
	log := slog.New(slog.DiscardHandler)
	in := newWakingInbox(db, m)
	q := newStoreQueue(db, log, m)
	clockNow := c.now
	q.now = func() time.Time { return clockNow }
	srv := routesServer(t, db, m, testHook(t, in, webhook.Config{}), nil, 0)

	_, before := httpGet(t, srv.URL, "/metrics")
	if strings.Contains(before, "gilf_github_rate_limit_remaining ") {
		t.Error("the rate-limit gauge shows a value before GitHub answered")
	}

	for pr := 1; pr <= 3; pr++ {
		queuePR(t, in, pr, c.now)
	}
	ran := review.Result{
		Record: validation.Record{Executor: "local", Outcome: validation.OutcomeFailed, Steps: []validation.StepResult{
			{Name: "install", Status: validation.StatusPassed, Duration: 1500 * time.Millisecond},
			{Name: "test", Status: validation.StatusFailed, DurationMs: 2000},
			{Name: "lint", Status: validation.StatusNotRun},
		}},
		UploadFailures: []evidence.UploadFailure{{Name: "install.log", Reason: "503"}, {Name: "test.log", Reason: "503"}},
	}
	refused := review.Result{Record: validation.Record{Outcome: validation.OutcomeRefused,
		Refusal: validation.Refuse(validation.CodeLocalNotAllowed, "local validation is not allowed")}}
	for i, res := range []review.Result{ran, refused} {
		claim, ok, err := q.Claim(t.Context(), "w", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim %d: %v %v", i, ok, err)
		}
		clockNow = clockNow.Add(90 * time.Second)
		if err := q.Complete(t.Context(), claim, res); err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}

	// A real client against the fake GitHub reports the remaining limit.
	key := newAppKey(t)
	gh := githubtest.New(t, githubtest.Options{AppID: serveAppID, PublicKey: &key.key.PublicKey, InstallationID: 11})
	gc, err := github.New(github.Config{AppID: serveAppID, PrivateKey: key.key, BaseURL: gh.URL,
		RateLimitRemaining: m.jobs.rateRemaining.set})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gc.PullRequest(t.Context(), github.Repo{InstallationID: 11, Owner: "octocat", Name: "Hello-World"}, 1347); err != nil {
		t.Fatal(err)
	}

	_, b := httpGet(t, srv.URL, "/metrics")
	for _, want := range []string{
		`gilf_jobs{state="queued"} 1`,
		`gilf_jobs{state="done"} 2`,
		`gilf_jobs{state="running"} 0`,
		`gilf_jobs{state="dead"} 0`,
		`gilf_jobs_oldest_queued_age_seconds `,
		`gilf_job_duration_seconds_count{executor="local",outcome="failed"} 1`,
		`gilf_job_duration_seconds_sum{executor="local",outcome="failed"} 90`,
		`gilf_job_duration_seconds_count{executor="none",outcome="refused"} 1`,
		`gilf_step_duration_seconds_sum{executor="local",step="install"} 1.5`,
		`gilf_step_duration_seconds_sum{executor="local",step="test"} 2`,
		`gilf_refusals_total{code="local_not_allowed"} 1`,
		`gilf_evidence_upload_failures_total 2`,
		fmt.Sprintf("gilf_github_rate_limit_remaining %d", githubtest.RateLimit-len(gh.Requests())),
	} {
		if !strings.Contains(b, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Every label set starts at zero (metrics_more.go): a step that did
	// not run has none observed.
	if !strings.Contains(b, `gilf_step_duration_seconds_count{executor="local",step="lint"} 0`+"\n") {
		t.Error("a step that did not run has a duration")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", b)
	}
}

// TestQueueCollectorAge: the oldest due job's age is read against the
// collector's clock; no due job is 0.
func TestQueueCollectorAge(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	db := newTestStore(t, c)
	m := newServeMetrics(db)
	in := wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}
	now := c.now.Add(42 * time.Second)
	col := newQueueCollector(db, func() time.Time { return now })
	check := func(want float64) {
		t.Helper()
		reg := prometheus.NewRegistry()
		reg.MustRegister(col)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "gilf_jobs_oldest_queued_age_seconds" {
				if got := mf.GetMetric()[0].GetGauge().GetValue(); got != want {
					t.Errorf("oldest due age %v, want %v", got, want)
				}
				return
			}
		}
		t.Error("no gilf_jobs_oldest_queued_age_seconds")
	}
	check(0)
	queuePR(t, in, 1, c.now)
	check(42)
}
