package github

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/review/github/githubtest"
)

// testKey is generated once per test binary (RSA 2048 takes a moment).
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

const testAppID = 4242

// fakeClock advances only when slept on, and records every sleep.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now().Truncate(time.Second)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	f.mu.Unlock()
	return ctx.Err()
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeClock) Sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	srv   *githubtest.Server
	c     *Client
	clock *fakeClock
	logs  *syncBuffer
	repo  Repo
}

// newEnv starts a fake GitHub and a client wired to it. mod may change
// the server options and the client config.
func newEnv(t *testing.T, opts githubtest.Options, mod func(*Config)) *env {
	t.Helper()
	clock := newFakeClock()
	opts.AppID = testAppID
	opts.PublicKey = &testKey().PublicKey
	opts.Now = clock.Now
	srv := githubtest.New(t, opts)
	logs := &syncBuffer{}
	cfg := Config{
		AppID:         testAppID,
		PrivateKey:    testKey(),
		BaseURL:       srv.URL,
		DownloadHosts: []string{srv.CodeloadHost()},
		Logger:        slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:         clock,
		BotLogin:      "gilf[bot]",
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &env{srv: srv, c: c, clock: clock, logs: logs, repo: Repo{InstallationID: 1, Owner: "octocat", Name: "Hello-World"}}
}

// calls lists "METHOD /path" of the requests for the given endpoints.
func calls(reqs []githubtest.Request, eps ...githubtest.Endpoint) []string {
	var out []string
	for _, r := range reqs {
		for _, ep := range eps {
			if r.Endpoint == ep {
				out = append(out, r.Method+" "+r.Path)
			}
		}
	}
	return out
}

func testDataRepos(t *testing.T) string {
	t.Helper()
	return shared.Data(t, "repos")
}
