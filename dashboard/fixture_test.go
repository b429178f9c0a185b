package dashboard_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/dashboard"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

const testToken = "correct-horse-battery-staple-42"

// logKey holds the failed run's log in the fixture's evidence store.
const (
	logKey  = "review-artifacts/acme%2Fweb/abc/evidence/1/log.txt"
	logBody = "FAIL src/app.test.ts > adds\n  expected 3, got 4 <script>alert(2)</script>\n"
)

// fsEvidence is the dashboard's Evidence over the filesystem store, as
// gilf serve wires it.
type fsEvidence struct{ s *evidence.FSStore }

func (e fsEvidence) OpenEvidence(_ context.Context, key string) (dashboard.EvidenceObject, error) {
	rc, err := e.s.Open(key)
	return dashboard.EvidenceObject{Body: rc}, err
}

// xss is untrusted text that must reach every page escaped.
const xss = `<script>alert("x")</script><img src=x onerror=alert(1)>`

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ptr[T any](v T) *T { return &v }

// fixture is a store filled the way gilf serve fills it, through the
// store's own write functions.
type fixture struct {
	db    *store.DB
	clock *clock
	ev    *evidence.FSStore // holds the failed run's log artifact
	// Runs by role.
	failedRun, refusedRun, passedRun, xssRun int64
	deadJob, queuedJob, runningJob           int64
	failedJob, cancelledJob                  int64
	n                                        int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := &clock{t: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)}
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gilf.db"), slog.New(slog.NewTextHandler(io.Discard, nil)),
		store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	ev, err := evidence.NewFSStore(t.TempDir(), evidence.FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	if _, err := ev.Put(context.Background(), evidence.Object{Key: logKey, Kind: evidence.KindLog, Body: []byte(logBody)}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, clock: c, ev: ev}
	f.fill(t)
	return f
}

// job records a delivery that creates a job for repo's pull request.
func (f *fixture) job(t *testing.T, repo string, pr int) int64 {
	t.Helper()
	f.n++
	head := fmt.Sprintf("%x", sha1.Sum([]byte(fmt.Sprint("head", f.n))))
	now := f.clock.Now()
	res, err := f.db.RecordDelivery(context.Background(), validation.Delivery{
		ID: fmt.Sprintf("0b6d6f40-0000-11ef-8000-%012d", f.n), Event: "pull_request", Action: "synchronize",
		InstallationID: 7, Repo: repo, PR: pr, HeadSHA: head, ReceivedAt: now, Status: validation.DeliveryQueued,
		Body: []byte(`{"action":"synchronize"}`),
	}, &validation.JobSpec{Repo: repo, PR: pr, HeadSHA: head, HeadRepo: repo, BaseRef: "main", InstallationID: 7,
		Trigger: "synchronize", PRUpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return res.JobID
}

func (f *fixture) claim(t *testing.T, want int64) store.Job {
	t.Helper()
	j, ok, err := f.db.Claim(context.Background(), "worker-1", time.Hour)
	if err != nil || !ok || j.ID != want {
		t.Fatalf("claim: %v %v job %d, want %d", err, ok, j.ID, want)
	}
	return j
}

// run records a job and finishes it with run (times filled in).
func (f *fixture) run(t *testing.T, repo string, pr int, run store.RunRecord, took time.Duration) int64 {
	t.Helper()
	j := f.claim(t, f.job(t, repo, pr))
	start := f.clock.Now()
	run.Record.Started, run.Record.Finished = start, start.Add(took)
	for i := range run.Spans {
		run.Spans[i].Started, run.Spans[i].Finished = start, start.Add(took)
	}
	id, err := f.db.Finish(context.Background(), j.Lease, run)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(3 * time.Hour)
	return id
}

func steps(statuses ...validation.Status) []validation.StepResult {
	names := []string{"install", "build", "lint", "test"}
	var out []validation.StepResult
	for i, s := range statuses {
		r := validation.StepResult{Name: names[i], Argv: []string{"pnpm", "run", names[i]}, Status: s, DurationMs: int64(800 * (i + 1)),
			Output: validation.Output{Bytes: int64(1500 * (i + 1))}}
		switch s {
		case validation.StatusPassed:
			r.ExitCode = ptr(0)
		case validation.StatusFailed:
			r.ExitCode = ptr(1)
		case validation.StatusNotRun:
			r.Reason, r.DurationMs = "not run because an earlier step failed", 0
		}
		out = append(out, r)
	}
	return out
}

func (f *fixture) fill(t *testing.T) {
	t.Helper()
	p, fl, nr := validation.StatusPassed, validation.StatusFailed, validation.StatusNotRun
	// Four days of ordinary runs on two executors, some with a shadow.
	for day := 0; day < 4; day++ {
		for i := 0; i < 2; i++ {
			f.run(t, "acme/web", 10+day, store.RunRecord{
				Record: validation.Record{Outcome: validation.OutcomePassed, Executor: "managed-e2b", IsolationTier: validation.TierRemote,
					Steps: steps(p, p, p, p)},
				Spans: []store.CostSpan{
					{Lane: store.LanePrimary, Executor: "managed-e2b", VCPU: ptr(2.0), MemoryGiB: ptr(4.0), USD: ptr(0.012 * float64(day+1)), Method: "estimate:wall-clock"},
					{Lane: store.LaneShadow, Executor: "crabbox", Method: "estimate:wall-clock"},
				},
				Shadow: &store.ShadowTelemetry{Executor: "crabbox", Outcome: validation.OutcomePassed, Wall: 40 * time.Second,
					Steps: []store.StepAgreement{{Step: "install", Primary: p, Shadow: p, Agree: true}, {Step: "test", Primary: p, Shadow: p, Agree: true}}},
			}, 35*time.Second)
		}
		f.clock.Advance(18 * time.Hour)
	}
	f.passedRun = f.run(t, "acme/api", 3, store.RunRecord{
		Record: validation.Record{Outcome: validation.OutcomePassed, Executor: "local", IsolationTier: validation.TierNoNetwork,
			Steps: steps(p, p)},
		Spans: []store.CostSpan{{Lane: store.LanePrimary, Executor: "local", Method: "estimate:wall-clock"}},
	}, 12*time.Second)
	f.failedRun = f.run(t, "acme/web", 42, store.RunRecord{
		Record: validation.Record{Outcome: validation.OutcomeFailed, Executor: "managed-e2b", IsolationTier: validation.TierRemote,
			PackageManager: "pnpm", Platform: validation.Platform{OS: "linux", Arch: "amd64", Node: "22.11.0"},
			Steps: steps(p, p, fl, nr),
			Findings: []validation.Finding{{Severity: validation.SeverityHigh, Step: "lint", Path: "src/app.ts",
				Title: "lint failed: 3 errors", Body: "src/app.ts:12:5  error  'x' is assigned a value but never used",
				ExecutionClaim: true, EvidenceStatus: "attached", Evidence: []validation.EvidenceRef{
					{Kind: "log", Key: "review-artifacts/acme%2Fweb/abc/evidence/1/log.txt", URL: "https://evidence.example.com/acme/log.txt"},
					{Kind: "test-output", Key: "review-artifacts/acme%2Fweb/abc/evidence/1/out.txt", URL: "javascript:alert(1)"},
					{Kind: "junit", Key: "review-artifacts/acme%2Fweb/abc/evidence/1/junit.xml"},
				}}},
			Notes:    []string{"lint ran with the repository's own config"},
			Controls: []validation.ControlDecision{{Control: "executor", Passed: true}, {Control: "isolation_tier", Passed: true, Detail: "remote"}}},
		Artifacts: []store.Artifact{
			{Key: "review-artifacts/acme%2Fweb/abc/evidence/1/log.txt", Kind: "log", Bytes: 4096, SHA256: "9f86d081", Status: store.ArtifactPersisted, URL: "https://evidence.example.com/acme/log.txt"},
			{Key: "review-artifacts/acme%2Fweb/abc/evidence/1/out.txt", Kind: "test-output", Bytes: 120, Status: store.ArtifactPersisted, URL: "javascript:alert(1)"},
			{Key: "review-artifacts/acme%2Fweb/abc/evidence/1/junit.xml", Kind: "junit", Bytes: 900, Status: store.ArtifactFailed, Err: "s3: 503 SlowDown"},
		},
		Spans: []store.CostSpan{
			{Lane: store.LanePrimary, Executor: "managed-e2b", USD: ptr(0.031), Method: "estimate:wall-clock"},
			{Lane: store.LaneShadow, Executor: "crabbox", USD: ptr(0.02), Method: "estimate:wall-clock"},
			{Lane: store.LaneSemantic, Executor: "model:gpt-4.1-mini", InputTokens: ptr(int64(1234)), OutputTokens: ptr(int64(567)),
				USD: ptr(0.0014), Method: "estimate:tokens"},
		},
		Shadow: &store.ShadowTelemetry{Executor: "crabbox", Outcome: validation.OutcomePassed, Wall: 51 * time.Second, USD: ptr(0.02),
			Steps: []store.StepAgreement{{Step: "install", Primary: p, Shadow: p, Agree: true}, {Step: "lint", Primary: fl, Shadow: p}}},
	}, 48*time.Second)
	f.refusedRun = f.run(t, "evil/fork", 7, store.RunRecord{
		Record: validation.Record{Outcome: validation.OutcomeRefused, Executor: "local", Refusal: &validation.Refusal{
			Code: validation.CodeLocalNotAllowed, Msg: "the local executor runs only the operator's own code"}},
	}, 0)
	f.xssRun = f.run(t, "o/"+xss, 1, store.RunRecord{
		Record: validation.Record{Outcome: validation.OutcomeFailed, Reason: xss, Executor: "local", Steps: steps(fl),
			Findings: []validation.Finding{{Severity: validation.SeverityBlocker, Title: xss, Body: xss, Path: xss}}},
	}, time.Second)

	// The queue: a dead job, a running one and a queued one.
	f.deadJob = f.job(t, "acme/web", 50)
	for i := 0; i < 2; i++ {
		j := f.claim(t, f.deadJob)
		if _, err := f.db.Retry(context.Background(), j.Lease, store.Failure{Err: errors.New("sandbox api: 503 Service Unavailable"), Transient: true}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
	}
	f.runningJob = f.job(t, "acme/api", 51)
	f.claim(t, f.runningJob)
	// A job a permanent error ended, and one an operator cancelled.
	f.failedJob = f.job(t, "acme/docs", 53)
	j := f.claim(t, f.failedJob)
	if _, err := f.db.Retry(context.Background(), j.Lease, store.Failure{Err: errors.New("get pull request: 404 Not Found"), Transient: false}); err != nil {
		t.Fatal(err)
	}
	f.cancelledJob = f.job(t, "acme/docs", 54)
	if _, err := f.db.CancelJob(context.Background(), f.cancelledJob, "cancelled by an operator"); err != nil {
		t.Fatal(err)
	}
	f.queuedJob = f.job(t, "acme/web", 52)
}

// server serves the fixture's dashboard on 127.0.0.1.
func (f *fixture) server(t *testing.T) *httptest.Server {
	t.Helper()
	h, err := dashboard.New(dashboard.Config{Token: testToken, Reader: f.db, Queue: f.db, Cancel: f.db, Evidence: fsEvidence{f.ev},
		IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
