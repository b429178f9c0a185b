package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/webhook"
)

// BenchmarkIntake measures the whole intake of a real pull_request/opened
// delivery — read, HMAC, decode, durable group commit to a real SQLite
// file — through ServeHTTP, from 32 goroutines per CPU (as many concurrent
// deliveries as a busy App sees) so group commit has company. Every
// iteration is a new delivery for a new head.
func BenchmarkIntake(b *testing.B) {
	path := filepath.Join(b.TempDir(), "gilf.db")
	db, err := sqlite.Open(context.Background(), path, testLogger(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	secret := newSecret(b)
	h, err := webhook.New(db, testLogger(), webhook.Config{Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	base := realPayload(b, "pull_request", "opened")
	const head = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	at := bytes.Index(base, []byte(head))
	if at < 0 {
		b.Fatal("head sha not in payload")
	}
	b.SetBytes(int64(len(base)))
	b.ReportAllocs()
	b.SetParallelism(32)
	var seq atomicCounter
	b.RunParallel(func(pb *testing.PB) {
		body := bytes.Clone(base)
		for pb.Next() {
			n := seq.next()
			sha := fmt.Sprintf("%040x", n)
			for i := at; i >= 0; { // every occurrence: head.sha is what intake reads
				copy(body[i:], sha)
				j := bytes.Index(body[i+40:], []byte(head))
				if j < 0 {
					break
				}
				i += 40 + j
			}
			req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
			req.Header.Set("X-GitHub-Event", "pull_request")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("00000000-0000-4000-8000-%012x", n))
			req.Header.Set("X-Hub-Signature-256", webhook.Sign(secret, body))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusAccepted {
				b.Fatalf("answer %d: %s", w.Code, w.Body)
			}
		}
	})
}
