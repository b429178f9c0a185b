package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// storeScrapeTimeout bounds the store queries of one /metrics scrape.
const storeScrapeTimeout = 2 * time.Second

// serveMetrics are the Prometheus metrics of one gilf serve process, on
// their own registry (no global state). Counters count what this process
// did since it started; gilf_deliveries_stored is read from the store at
// each scrape, so it counts every replica's intake.
type serveMetrics struct {
	reg        *prometheus.Registry
	deliveries *prometheus.CounterVec // by intake status
	claimed    prometheus.Counter
	running    prometheus.Gauge
	finished   *prometheus.CounterVec // by how the attempt ended
	runs       *prometheus.CounterVec // by outcome
	operator   *prometheus.CounterVec // by refusal code
	jobs       jobMetrics             // metrics_jobs.go
	more       moreMetrics            // metrics_more.go
}

// deliveryCounter reads the number of stored deliveries.
type deliveryCounter interface {
	CountDeliveries(ctx context.Context) (int, error)
}

// metricsStore is what the scrape reads from the store.
type metricsStore interface {
	deliveryCounter
	queueStatter
}

func newServeMetrics(db metricsStore) *serveMetrics {
	m := &serveMetrics{
		reg:  prometheus.NewRegistry(),
		jobs: newJobMetrics(),
		more: newMoreMetrics(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_webhook_deliveries_total",
			Help: "Webhook deliveries handled by this process, by intake status (queued, ignored, skipped, recorded, invalid, duplicate, error).",
		}, []string{"status"}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gilf_jobs_claimed_total",
			Help: "Review jobs this process claimed (a retried job counts once per attempt).",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gilf_jobs_running",
			Help: "Review jobs this process is running now.",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_job_attempts_finished_total",
			Help: "Job attempts this process ended, by result: done, queued (retry later), failed, dead, lease_lost, store_error.",
		}, []string{"result"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_runs_total",
			Help: "Validation runs this process recorded, by outcome (passed, failed, gap, skipped, refused, inconclusive).",
		}, []string{"outcome"}),
		operator: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gilf_operator_errors_total",
			Help: "Runs that ended because this worker is not set up to validate (an executor not configured or not runnable, a sandbox or package manager it lacks), by code: the operator's to fix, never the pull request's.",
		}, []string{"code"}),
	}
	m.reg.MustRegister(m.deliveries, m.claimed, m.running, m.finished, m.runs, m.operator,
		storeCollector{db: db, desc: prometheus.NewDesc("gilf_deliveries_stored",
			"Webhook deliveries recorded in the store (every replica's).", nil, nil)},
		buildInfoMetric(readBuildVersion()),
		newQueueCollector(db, time.Now),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.reg.MustRegister(m.jobs.collectors()...)
	m.reg.MustRegister(m.more.collectors()...)
	m.initLabels()
	return m
}

// storeCollector reads gauges from the store at scrape time. A failed
// read is reported as an invalid metric (the scrape shows the error), not
// as zero.
type storeCollector struct {
	db   deliveryCounter
	desc *prometheus.Desc
}

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), storeScrapeTimeout)
	defer cancel()
	n, err := c.db.CountDeliveries(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}
