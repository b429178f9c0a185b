package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HealthTimeout bounds the checks of one /readyz request.
const HealthTimeout = 2 * time.Second

// routes is gilf serve's HTTP surface; this is the one file that imports
// chi.
//
//	POST /webhook  GitHub deliveries (package webhook)
//	GET  /healthz  liveness: 200 "ok" while the process serves HTTP
//	GET  /readyz   readiness: 200 "ready", or 503 with the reason (health.go)
//	GET  /metrics  Prometheus text format
//	/dashboard, /dashboard/*, /api/v1/*  the dashboard (package dashboard),
//	               when dash is not nil (GILF_DASHBOARD_TOKEN is set); else 404
func routes(hook http.Handler, ready *readiness, m *serveMetrics, log *slog.Logger, dash http.Handler) http.Handler {
	r := chi.NewRouter()
	if dash != nil {
		r.Handle("/dashboard", dash)
		r.Handle("/dashboard/*", dash)
		r.Handle("/api/v1/*", dash)
	}
	r.Method(http.MethodPost, "/webhook", hook)
	r.Get("/healthz", serveHealthz)
	r.Get("/readyz", ready.serveReadyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return r
}
