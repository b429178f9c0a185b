package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/webhook"
)

// TestServeRoutes checks the HTTP surface over a real store: the webhook
// is mounted for POST only, /healthz is liveness (it answers whatever the
// store), /readyz follows the store, and /metrics reports a store it
// cannot read as an error, not as zero.
func TestServeRoutes(t *testing.T) {
	db := newTestStore(t, nil)
	m := newServeMetrics(db)
	srv := routesServer(t, db, m, testHook(t, newWakingInbox(db, m), webhook.Config{}), nil, 1)

	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	if code, r := deliver(t, srv.URL, newGUID(t), "ping", body, signature(serveSecret, body)); code != http.StatusOK {
		t.Errorf("signed ping answered %d %+v, want 200", code, r)
	}
	tests := []struct {
		name, path string
		code       int
		has        []string
	}{
		{"healthz", "/healthz", http.StatusOK, []string{"ok"}},
		{"readyz", "/readyz", http.StatusOK, []string{"ready"}},
		{"metrics", "/metrics", http.StatusOK, []string{
			`gilf_webhook_deliveries_total{status="recorded"} 1`, "gilf_deliveries_stored 1", "gilf_jobs_running 0", "go_goroutines"}},
		{"webhook is POST only", "/webhook", http.StatusMethodNotAllowed, nil},
		{"unknown path", "/admin", http.StatusNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := httpGet(t, srv.URL, tt.path)
			if code != tt.code {
				t.Errorf("GET %s: %d, want %d\n%s", tt.path, code, tt.code, b)
			}
			for _, s := range tt.has {
				if !strings.Contains(b, s) {
					t.Errorf("GET %s lacks %q", tt.path, s)
				}
			}
		})
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code, b := httpGet(t, srv.URL, "/healthz"); code != http.StatusOK || b != "ok\n" {
		t.Errorf("/healthz with a closed store: %d %q, want 200 ok (liveness only)", code, b)
	}
	if code, b := httpGet(t, srv.URL, "/readyz"); code != http.StatusServiceUnavailable || b != "not ready: store refuses writes\n" {
		t.Errorf("/readyz with a closed store: %d %q, want 503 with a public reason", code, b)
	}
	code, b := httpGet(t, srv.URL, "/metrics")
	if code != http.StatusOK || strings.Contains(b, "gilf_deliveries_stored ") || !strings.Contains(b, `gilf_webhook_deliveries_total{status="recorded"} 1`) {
		t.Errorf("/metrics with a closed store: %d, want the process metrics without gilf_deliveries_stored:\n%s", code, b)
	}
}

// stuckStore never answers before its context ends, like a store whose
// disk hangs.
type stuckStore struct{}

func (stuckStore) Ready(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (stuckStore) CountDeliveries(ctx context.Context) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (stuckStore) QueueStats(ctx context.Context) (store.QueueStats, error) {
	<-ctx.Done()
	return store.QueueStats{}, ctx.Err()
}

// TestServeRoutesStuckStore checks the store waits of the HTTP surface end
// at their limits: /readyz answers 503 after HealthTimeout, /metrics
// leaves out the store gauge after storeScrapeTimeout, and /healthz does
// not wait for the store at all.
func TestServeRoutesStuckStore(t *testing.T) {
	srv := routesServer(t, stuckStore{}, newServeMetrics(stuckStore{}), http.NotFoundHandler(), nil, 0)
	tests := []struct {
		path     string
		min, max time.Duration
		code     int
	}{
		{"/readyz", HealthTimeout, HealthTimeout + 5*time.Second, http.StatusServiceUnavailable},
		{"/metrics", storeScrapeTimeout, storeScrapeTimeout + 5*time.Second, http.StatusOK},
		{"/healthz", 0, time.Second, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			start := time.Now()
			code, b := httpGet(t, srv.URL, tt.path)
			took := time.Since(start)
			if code != tt.code {
				t.Errorf("GET %s: %d, want %d", tt.path, code, tt.code)
			}
			if took < tt.min || took > tt.max {
				t.Errorf("GET %s took %v, want from %v to %v", tt.path, took, tt.min, tt.max)
			}
			if strings.Contains(b, "gilf_deliveries_stored ") {
				t.Errorf("GET %s reported a store gauge it could not read", tt.path)
			}
		})
	}
}
