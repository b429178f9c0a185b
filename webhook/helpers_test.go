package webhook_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/webhook"
)

// The store is the Inbox cmd/gilf wires in.
var _ webhook.Inbox = (*store.DB)(nil)

type env struct {
	srv    *httptest.Server
	db     *store.DB
	path   string
	secret []byte
	seq    int
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newSecret(t testing.TB) []byte {
	t.Helper()
	s := make([]byte, 32)
	if _, err := rand.Read(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newEnv starts the real handler over a real SQLite store on a loopback
// test server.
func newEnv(t testing.TB, cfg webhook.Config, opts store.Options) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gilf.db")
	db, err := sqlite.Open(context.Background(), path, testLogger(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	if cfg.Secret == nil {
		cfg.Secret = newSecret(t)
	}
	h, err := webhook.New(db, testLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{srv: srv, db: db, path: path, secret: cfg.Secret}
}

// nextID returns a fresh GUID-like delivery id.
func (e *env) nextID() string {
	e.seq++
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", e.seq)
}

type answer struct {
	code int
	body struct {
		Status     string `json:"status"`
		Delivery   string `json:"delivery"`
		Reason     string `json:"reason"`
		Job        int64  `json:"job"`
		JobState   string `json:"jobState"`
		Superseded int    `json:"superseded"`
		Cancelled  int    `json:"cancelled"`
		Rerun      int    `json:"rerun"`
		Error      string `json:"error"`
	}
}

// send posts body as GitHub would: signed, with event and delivery
// headers; edit may change the request before it goes.
func (e *env) send(t testing.TB, event, id string, body []byte, edit func(*http.Request)) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/webhook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/123abc")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", webhook.Sign(e.secret, body))
	if edit != nil {
		edit(req)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	a.code = resp.StatusCode
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return a
}

func (e *env) count(t testing.TB) int {
	t.Helper()
	n, err := e.db.CountDeliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) jobState(t testing.TB, id int64) store.JobStatus {
	t.Helper()
	st, err := e.db.JobState(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// realPayload reads a real payload from the shared data.
func realPayload(t testing.TB, event, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(shared.Data(t, "webhooks", event, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// derive edits a real payload (a derived fixture, built at test time).
func derive(t testing.TB, event, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(realPayload(t, event, name), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pr(m map[string]any) map[string]any { return m["pull_request"].(map[string]any) }

// withHead sets the head sha and the PR's updated_at.
func withHead(sha string, updated time.Time) func(map[string]any) {
	return func(m map[string]any) {
		pr(m)["head"].(map[string]any)["sha"] = sha
		pr(m)["updated_at"] = updated.UTC().Format(time.RFC3339)
	}
}
