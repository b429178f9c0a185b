package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HealthTimeout bounds the store ping of one /healthz request.
const HealthTimeout = 2 * time.Second

// pinger is the store's health check.
type pinger interface {
	Ping(ctx context.Context) error
}

// routes is gilf serve's HTTP surface; this is the one file that imports
// chi.
//
//	POST /webhook  GitHub deliveries (package webhook)
//	GET  /healthz  200 "ok" when the store answers, 503 otherwise
//	GET  /metrics  Prometheus text format
//	/dashboard, /dashboard/*, /api/v1/*  the dashboard (package dashboard),
//	               when dash is not nil (GILF_DASHBOARD_TOKEN is set); else 404
func routes(hook http.Handler, db pinger, m *serveMetrics, log *slog.Logger, dash http.Handler) http.Handler {
	r := chi.NewRouter()
	if dash != nil {
		r.Handle("/dashboard", dash)
		r.Handle("/dashboard/*", dash)
		r.Handle("/api/v1/*", dash)
	}
	r.Method(http.MethodPost, "/webhook", hook)
	r.Get("/healthz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), HealthTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := db.Ping(ctx); err != nil {
			log.Error("health check failed", "err", err)
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		if _, err := w.Write([]byte("ok\n")); err != nil {
			return // the client went away
		}
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return r
}
