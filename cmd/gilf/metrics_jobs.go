package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// jobMetrics are what an operator alerts on about the jobs: how long they
// and their steps take, what was refused, what evidence was lost, and how
// much of GitHub's rate limit is left. The queue's own gauges are read
// from the store at scrape (queueCollector). Dead jobs are
// gilf_jobs{state="dead"} (every replica's) and this process's
// gilf_job_attempts_finished_total{result="dead"}; no third metric.
type jobMetrics struct {
	jobDuration    *prometheus.HistogramVec // by executor, outcome
	stepDuration   *prometheus.HistogramVec // by executor, step
	refusals       *prometheus.CounterVec   // by refusal code
	uploadFailures prometheus.Counter
	rateRemaining  *rateLimitGauge
}

// noExecutor labels a run that ended before an executor was chosen.
const noExecutor = "none"

func newJobMetrics() jobMetrics {
	return jobMetrics{
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gilf_job_duration_seconds",
			Help:    "Wall time of a job this process completed with a recorded run, from its claim to its completion (GitHub calls, checkout, validation, posting), by executor (none when refused before one was chosen) and outcome.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 s to 2¼ h
		}, []string{"executor", "outcome"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gilf_step_duration_seconds",
			Help:    "Duration of each validation step that ran (install, test, typecheck, lint, build), by executor and step.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 15), // ½ s to 2¼ h
		}, []string{"executor", "step"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_refusals_total",
			Help: "Runs this process recorded as refused (a control said no before anything ran), by refusal code.",
		}, []string{"code"}),
		uploadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gilf_evidence_upload_failures_total",
			Help: "Evidence artifacts this process failed to store (shown as failed on the review, never as stored).",
		}),
		rateRemaining: newRateLimitGauge(),
	}
}

// collectors are the metrics to register.
func (j jobMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{j.jobDuration, j.stepDuration, j.refusals, j.uploadFailures, j.rateRemaining}
}

// rateLimitGauge is gilf_github_rate_limit_remaining: the last
// X-RateLimit-Remaining GitHub sent, absent until the first answer (a
// made-up 0 would page someone).
type rateLimitGauge struct {
	v    atomic.Int64 // -1: none seen yet
	desc *prometheus.Desc
}

func newRateLimitGauge() *rateLimitGauge {
	g := &rateLimitGauge{desc: prometheus.NewDesc("gilf_github_rate_limit_remaining",
		"X-RateLimit-Remaining of the last GitHub API answer this process received (any token's: the App's or an installation's); absent until the first.", nil, nil)}
	g.v.Store(-1)
	return g
}

// set is github.Config.RateLimitRemaining.
func (g *rateLimitGauge) set(remaining int) { g.v.Store(int64(remaining)) }

func (g *rateLimitGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *rateLimitGauge) Collect(ch chan<- prometheus.Metric) {
	if v := g.v.Load(); v >= 0 {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(v))
	}
}

// observe records what a completed job's result says; took is the job's
// wall time in this process.
func (j jobMetrics) observe(res review.Result, took time.Duration) {
	rec := res.Record
	executor := rec.Executor
	if executor == "" {
		executor = noExecutor
	}
	j.jobDuration.WithLabelValues(executor, string(rec.Outcome)).Observe(took.Seconds())
	for _, s := range rec.Steps {
		switch s.Status {
		case validation.StatusPassed, validation.StatusFailed, validation.StatusTimedOut, validation.StatusKilled:
		default:
			continue // not run: no duration to speak of
		}
		d := s.Duration
		if d == 0 {
			d = time.Duration(s.DurationMs) * time.Millisecond
		}
		j.stepDuration.WithLabelValues(executor, s.Name).Observe(d.Seconds())
	}
	if rec.Refusal != nil {
		j.refusals.WithLabelValues(string(rec.Refusal.Code)).Inc()
	}
	j.uploadFailures.Add(float64(len(res.UploadFailures)))
}

// queueStatter reads the queue's state from the store.
type queueStatter interface {
	QueueStats(ctx context.Context) (store.QueueStats, error)
}

// queueCollector reads gilf_jobs{state} and the oldest due job's age from
// the store at scrape time: every replica's jobs. A failed read is an
// invalid metric (the scrape shows the error), never zero.
type queueCollector struct {
	db     queueStatter
	now    func() time.Time
	jobs   *prometheus.Desc
	oldest *prometheus.Desc
}

func newQueueCollector(db queueStatter, now func() time.Time) queueCollector {
	return queueCollector{
		db: db, now: now,
		jobs: prometheus.NewDesc("gilf_jobs",
			"Review jobs in the store (every replica's), by state: queued, running, done, failed, dead, superseded, cancelled.", []string{"state"}, nil),
		oldest: prometheus.NewDesc("gilf_jobs_oldest_queued_age_seconds",
			"How long the longest-waiting queued job has been due (since its next attempt time; a job in retry backoff is not due); 0 when none is.", nil, nil),
	}
}

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.oldest
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), storeScrapeTimeout)
	defer cancel()
	s, err := c.db.QueueStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, err)
		ch <- prometheus.NewInvalidMetric(c.oldest, err)
		return
	}
	for _, st := range store.States {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(s.Jobs[st]), string(st))
	}
	age := 0.0
	if !s.OldestDue.IsZero() {
		age = max(c.now().Sub(s.OldestDue).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
