package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/webhook"
)

// BenchmarkServeWebhookIntake measures signed deliveries through the
// serve routes into a real SQLite store (synchronous=FULL, group commit),
// over loopback HTTP, with parallel clients like GitHub's bursts. Each
// delivery is the real opened payload under a new GUID: it is stored and
// attached to the pull request's one job.
func BenchmarkServeWebhookIntake(b *testing.B) {
	body, err := os.ReadFile(shared.Data(b, "webhooks", "pull_request", "opened.json"))
	if err != nil {
		b.Fatal(err)
	}
	db := newTestStore(b, nil)
	m := newServeMetrics(db)
	srv := routesServer(b, db, m, testHook(b, newWakingInbox(db, m), webhook.Config{}), nil, 0)
	sig := signature(serveSecret, body)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhook", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("X-GitHub-Delivery", newGUID(b))
			req.Header.Set("X-GitHub-Event", "pull_request")
			req.Header.Set("X-Hub-Signature-256", sig)
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				b.Error(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	if n, err := db.CountDeliveries(b.Context()); err != nil || n != b.N {
		b.Errorf("stored %d deliveries (%v), want %d", n, err, b.N)
	}
}
