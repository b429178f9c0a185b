package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/webhook"
)

// routesServer serves gilf serve's routes: hook at /webhook, readiness
// over st (minFree bytes free), metrics m and dash at /dashboard (nil: no
// dashboard), logs discarded; it is closed when the test ends.
func routesServer(t testing.TB, st readyStore, m *serveMetrics, hook, dash http.Handler, minFree int64) *httptest.Server {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(routes(hook, newReadiness(st, t.TempDir(), minFree, log), m, log, dash))
	t.Cleanup(srv.Close)
	return srv
}

// newWakingInbox is the inbox gilf serve records deliveries in: db, a
// wake-up for the workers, metrics m.
func newWakingInbox(db *store.DB, m *serveMetrics) wakingInbox {
	return wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}
}

// testHook is the webhook handler over in, its logs discarded; deliveries
// are signed with serveSecret unless cfg names another secret.
func testHook(t testing.TB, in webhook.Inbox, cfg webhook.Config) *webhook.Handler {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = []byte(serveSecret)
	}
	hook, err := webhook.New(in, slog.New(slog.DiscardHandler), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return hook
}

// missingMetrics is the lines of want that a /metrics body lacks, each
// matched as a whole line's end.
func missingMetrics(body string, want []string) []string {
	var out []string
	for _, l := range want {
		if !strings.Contains(body, l+"\n") {
			out = append(out, l)
		}
	}
	return out
}
