package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// The metrics of issue 31: what intake refused and how long it took,
// what validation cost, how long jobs waited, how often the shadow lane
// agreed. Every label set that can be known at start is made at start
// (initLabels), so a rate over a counter that has not moved yet is 0, not
// absent.

type moreMetrics struct {
	rejected   *prometheus.CounterVec   // by reason
	webhookDur *prometheus.HistogramVec // by code
	costUSD    *prometheus.CounterVec   // by executor, lane
	queueWait  prometheus.Histogram
	shadowRuns *prometheus.CounterVec // by result
	shadowStep *prometheus.CounterVec // by result
}

func newMoreMetrics() moreMetrics {
	return moreMetrics{
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_webhook_rejected_total",
			Help: "Webhook deliveries this process refused, by reason: bad_signature (401), rate_limited (429), too_large (413), malformed (400), method (405), unavailable (503), internal (500).",
		}, []string{"reason"}),
		webhookDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gilf_webhook_duration_seconds",
			Help:    "Time this process took to answer POST /webhook (reading the body, verifying, committing to the store), by HTTP status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"code"}),
		costUSD: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_validation_cost_usd_total",
			Help: "Estimated cost in USD of the spans of the runs this process recorded, by executor (model:<name> for the semantic lane) and lane (primary, shadow, semantic, base, retry); spans without a price add nothing (an estimate, not a bill).",
		}, []string{"executor", "lane"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gilf_job_queue_wait_seconds",
			Help:    "How long a job waited from the delivery that queued it to its first claim by this process (first attempts of jobs that are not re-runs: retries wait their backoff on purpose).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16), // 50 ms to about 27 min
		}),
		shadowRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_shadow_runs_total",
			Help: "Runs this process recorded with a shadow lane, by result: agreed (the shadow's outcome was the primary's), disagreed, error (the shadow errored or timed out).",
		}, []string{"result"}),
		shadowStep: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_shadow_steps_total",
			Help: "Steps the shadow lane compared with the primary's, by result: agreed or disagreed.",
		}, []string{"result"}),
	}
}

func (m moreMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.rejected, m.webhookDur, m.costUSD, m.queueWait, m.shadowRuns, m.shadowStep}
}

// webhookCodes are the statuses POST /webhook answers with.
func webhookCodes() []int {
	return []int{http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusUnauthorized,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusServiceUnavailable}
}

// metricExecutors are the canonical executor names, and "none" for a
// run that ended before one was chosen.
func metricExecutors() []string {
	return []string{executors.NameLocal, executors.NameSelfHost, executors.NameManagedE2B,
		executors.NameManagedCFSandbox, executors.NameManagedCrabbox}
}

// metricOutcomes are the run outcomes.
func metricOutcomes() []validation.Outcome {
	return []validation.Outcome{validation.OutcomePassed, validation.OutcomeFailed, validation.OutcomeGap,
		validation.OutcomeSkipped, validation.OutcomeRefused, validation.OutcomeInconclusive, validation.OutcomeError}
}

// metricCodes are the refusal codes (validation/refusal.go);
// TestMetricCodesAreEveryCode keeps the list whole.
func metricCodes() []validation.Code {
	return []validation.Code{validation.CodeExecutorUnknown, validation.CodeExecutorUnconfigured,
		validation.CodeExecutorUnavailable, validation.CodeLocalNotAllowed, validation.CodeIsolationTierUnmet,
		validation.CodeIsolationTierUnknown, validation.CodeSandboxUserUnknown, validation.CodeCommandRootEscape,
		validation.CodeCommandRootUnknown, validation.CodeCommandRedacted, validation.CodeScriptTooLong,
		validation.CodeEgressUnknown, validation.CodeArtifactCeiling, validation.CodeBudgetExceeded,
		validation.CodeInstallationMissing, validation.CodeHeadRepositoryMissing, validation.CodeSandboxUserUnavailable,
		validation.CodeArchiveTooLarge, validation.CodeSecretLeak, validation.CodePackageManagerUnavailable,
		validation.CodePackageManagerNotInstalled, validation.CodeRepoConfigInvalid}
}

// metricSteps are the steps a plan can have.
func metricSteps() []string { return []string{"install", "test", "typecheck", "lint", "build"} }

// initLabels makes every label set of m that is known at start.
func (m *serveMetrics) initLabels() {
	for _, s := range []validation.DeliveryStatus{validation.DeliveryQueued, validation.DeliveryIgnored,
		validation.DeliverySkipped, validation.DeliveryRecorded, validation.DeliveryInvalid} {
		m.deliveries.WithLabelValues(string(s))
	}
	m.deliveries.WithLabelValues("duplicate")
	m.deliveries.WithLabelValues("error")
	for _, r := range []string{string(store.StateDone), string(store.StateQueued), string(store.StateFailed),
		string(store.StateDead), "lease_lost", "store_error"} {
		m.finished.WithLabelValues(r)
	}
	for _, o := range metricOutcomes() {
		m.runs.WithLabelValues(string(o))
	}
	execs := append(metricExecutors(), noExecutor)
	for _, c := range metricCodes() {
		m.jobs.refusals.WithLabelValues(string(c))
		if validation.OperatorCode(c) {
			m.operator.WithLabelValues(string(c))
		}
	}
	for _, e := range execs {
		for _, o := range metricOutcomes() {
			m.jobs.jobDuration.WithLabelValues(e, string(o))
		}
	}
	for _, e := range metricExecutors() {
		for _, s := range metricSteps() {
			m.jobs.stepDuration.WithLabelValues(e, s)
		}
		for _, lane := range []string{costs.LanePrimary, costs.LaneShadow} {
			m.more.costUSD.WithLabelValues(e, lane)
		}
	}
	for _, r := range webhook.RejectReasons() {
		m.more.rejected.WithLabelValues(r)
	}
	for _, c := range webhookCodes() {
		m.more.webhookDur.WithLabelValues(strconv.Itoa(c))
	}
	for _, r := range []string{"agreed", "disagreed", "error"} {
		m.more.shadowRuns.WithLabelValues(r)
	}
	for _, r := range []string{"agreed", "disagreed"} {
		m.more.shadowStep.WithLabelValues(r)
	}
}

// reject counts a refused delivery (webhook.Config.Rejected).
func (m moreMetrics) reject(reason string) { m.rejected.WithLabelValues(reason).Inc() }

// observeRun counts what a recorded run cost and how its shadow lane
// compared.
func (m moreMetrics) observeRun(res review.Result, run store.RunRecord) {
	for _, s := range res.Spans {
		if s.USD != nil && *s.USD > 0 {
			m.costUSD.WithLabelValues(s.Executor, s.Lane).Add(*s.USD)
		}
	}
	sh := run.Shadow
	if sh == nil {
		return
	}
	switch {
	case sh.Err != "" || sh.Outcome == "":
		m.shadowRuns.WithLabelValues("error").Inc()
	case sh.Outcome == res.Record.Outcome:
		m.shadowRuns.WithLabelValues("agreed").Inc()
	default:
		m.shadowRuns.WithLabelValues("disagreed").Inc()
	}
	for _, s := range sh.Steps {
		if s.Agree {
			m.shadowStep.WithLabelValues("agreed").Inc()
		} else {
			m.shadowStep.WithLabelValues("disagreed").Inc()
		}
	}
}

// observeClaim records a first attempt's wait from its creation.
func (m moreMetrics) observeClaim(j store.Job, now time.Time) {
	if j.Attempts != 1 || j.Rerun != 0 || j.CreatedAt.IsZero() {
		return
	}
	m.queueWait.Observe(max(now.Sub(j.CreatedAt).Seconds(), 0))
}

// timeWebhook observes how long h takes to answer, by status code.
func (m moreMetrics) timeWebhook(h http.Handler, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.webhookDur.WithLabelValues(strconv.Itoa(sw.code)).Observe(now().Sub(start).Seconds())
	})
}

// statusWriter remembers the status an answer was written with.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
