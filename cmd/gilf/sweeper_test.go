package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// sweepKey is the App key of the sweeper tests, generated once per test
// binary.
var sweepKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// sweepClock is the time of the client, the fake GitHub and the sweeper;
// it moves only when the test moves it, and the client's retry waits
// return at once.
type sweepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *sweepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *sweepClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func (c *sweepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type sweepEnv struct {
	srv   *githubtest.Server
	db    *store.DB
	clock *sweepClock
	logs  *lockedBuffer
	sw    *sweeper
}

// newSweepEnv wires a sweeper to a real client, a fake GitHub and a real
// SQLite store in a temporary directory.
func newSweepEnv(t *testing.T) *sweepEnv {
	t.Helper()
	clock := &sweepClock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	srv := githubtest.New(t, githubtest.Options{AppID: serveAppID, PublicKey: &sweepKey().PublicKey, Now: clock.Now})
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	gc, err := github.New(github.Config{AppID: serveAppID, PrivateKey: sweepKey(), BaseURL: srv.URL, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), DBFileName), log, store.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return &sweepEnv{srv: srv, db: db, clock: clock, logs: logs, sw: newSweeper(gc, db, log, clock.Now)}
}

// store records a delivery as intake would have.
func (e *sweepEnv) store(t *testing.T, guid string) {
	t.Helper()
	if _, err := e.db.RecordDelivery(t.Context(), validation.Delivery{
		ID: guid, Event: "ping", ReceivedAt: e.clock.Now(), Status: validation.DeliveryRecorded, Body: []byte(`{}`),
	}, nil); err != nil {
		t.Fatal(err)
	}
}

func (e *sweepEnv) sweep(t *testing.T) sweepCounts {
	t.Helper()
	n, err := e.sw.Sweep(t.Context())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return n
}

func (e *sweepEnv) ago(d time.Duration) time.Time { return e.clock.Now().Add(-d) }

// TestSweeperRedeliversLostOnce: a delivery that got a 503 and is not
// stored is redelivered once across two sweeps, even though its
// redelivery failed too; a stored one and one a later attempt delivered
// are not redelivered.
func TestSweeperRedeliversLostOnce(t *testing.T) {
	e := newSweepEnv(t)
	e.store(t, "g-stored")
	e.srv.SetDeliveries([]githubtest.Delivery{
		{ID: 1, GUID: "g-ok", DeliveredAt: e.ago(20 * time.Minute), StatusCode: 202, Event: "pull_request"},
		{ID: 2, GUID: "g-lost", DeliveredAt: e.ago(15 * time.Minute), StatusCode: 503, Event: "pull_request", Action: "opened"},
		{ID: 3, GUID: "g-stored", DeliveredAt: e.ago(14 * time.Minute), StatusCode: 503, Event: "ping"},
		{ID: 4, GUID: "g-fixed", DeliveredAt: e.ago(13 * time.Minute), StatusCode: 503, Event: "pull_request"},
		{ID: 5, GUID: "g-fixed", DeliveredAt: e.ago(12 * time.Minute), StatusCode: 202, Redelivery: true, Event: "pull_request"},
	})
	e.srv.SetRedeliveryResult(http.StatusServiceUnavailable) // gilf is still failing

	got := e.sweep(t)
	if diff := cmp.Diff(sweepCounts{Failed: 2, Stored: 1, Redelivered: 1}, got); diff != "" {
		t.Errorf("first sweep counts (-want +got):\n%s", diff)
	}
	e.clock.Advance(2 * time.Minute)
	got = e.sweep(t)
	// The failed redelivery (a new attempt of g-lost) is listed again.
	if diff := cmp.Diff(sweepCounts{Failed: 1, Asked: 1}, got); diff != "" {
		t.Errorf("second sweep counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{2}, e.srv.Redeliveries()); diff != "" {
		t.Errorf("redeliveries (-want +got):\n%s", diff)
	}
	var sweeps []map[string]any
	for _, l := range e.logs.logLines() {
		if l["msg"] == "redelivery sweep" {
			sweeps = append(sweeps, l)
		}
	}
	if len(sweeps) != 2 || sweeps[0]["redelivered"] != float64(1) || sweeps[1]["asked_before"] != float64(1) {
		t.Errorf("want one log line per sweep with counts, got %v", sweeps)
	}
}

// TestSweeperCapPerSweep: at most MaxRedeliveriesPerSweep per sweep,
// oldest first; the rest are redelivered by the next sweep, each once.
func TestSweeperCapPerSweep(t *testing.T) {
	tests := []struct {
		name         string
		lost         int
		first, again int
	}{
		{"one under the cap", MaxRedeliveriesPerSweep - 1, MaxRedeliveriesPerSweep - 1, 0},
		{"at the cap", MaxRedeliveriesPerSweep, MaxRedeliveriesPerSweep, 0},
		{"one over the cap", MaxRedeliveriesPerSweep + 1, MaxRedeliveriesPerSweep, 1},
		{"over by more than a page", 2*MaxRedeliveriesPerSweep + 10, MaxRedeliveriesPerSweep, MaxRedeliveriesPerSweep},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSweepEnv(t)
			var ds []githubtest.Delivery
			for i := range tc.lost {
				ds = append(ds, githubtest.Delivery{ID: int64(i + 1), GUID: fmt.Sprintf("g-%03d", i),
					DeliveredAt: e.ago(50*time.Minute - time.Duration(i)*time.Second), StatusCode: 0, Event: "pull_request"})
			}
			e.srv.SetDeliveries(ds)
			n := e.sweep(t)
			if n.Redelivered != tc.first || n.Deferred != tc.lost-tc.first {
				t.Fatalf("first sweep: %+v, want %d redelivered, %d deferred", n, tc.first, tc.lost-tc.first)
			}
			first := e.srv.Redeliveries()
			for i, id := range first {
				if id != int64(i+1) {
					t.Fatalf("first sweep asked %v, want the oldest first", first)
				}
			}
			// The next sweep starts at the oldest deferred delivery, not
			// where the first began: deferred ones are not lost.
			e.clock.Advance(5 * time.Minute)
			n = e.sweep(t)
			if n.Redelivered != tc.again || n.Asked != 0 {
				t.Errorf("second sweep: %+v, want %d redelivered, none listed that was asked before", n, tc.again)
			}
			all := e.srv.Redeliveries()
			slices.Sort(all)
			if len(slices.Compact(slices.Clone(all))) != len(all) {
				t.Errorf("a delivery was redelivered twice: %v", all)
			}
			if want := min(tc.lost, tc.first+tc.again); len(all) != want {
				t.Errorf("%d redelivered in two sweeps, want %d", len(all), want)
			}
		})
	}
}

// TestSweeperWindow: the first sweep looks back RedeliveryFirstLookback;
// later sweeps start where the last one began, less the overlap.
func TestSweeperWindow(t *testing.T) {
	e := newSweepEnv(t)
	e.srv.SetDeliveries([]githubtest.Delivery{
		{ID: 1, GUID: "too-old", DeliveredAt: e.ago(RedeliveryFirstLookback + time.Second), StatusCode: 503, Event: "pull_request"},
		{ID: 2, GUID: "at-the-edge", DeliveredAt: e.ago(RedeliveryFirstLookback), StatusCode: 503, Event: "pull_request"},
	})
	e.sweep(t)
	if diff := cmp.Diff([]int64{2}, e.srv.Redeliveries()); diff != "" {
		t.Errorf("first sweep (-want +got):\n%s", diff)
	}
	start := e.clock.Now()
	e.clock.Advance(10 * time.Minute)
	e.srv.SetDeliveries(append(e.srv.Deliveries(),
		githubtest.Delivery{ID: 3, GUID: "before-overlap", DeliveredAt: start.Add(-RedeliverySweepOverlap - time.Second), StatusCode: 503, Event: "pull_request"},
		githubtest.Delivery{ID: 4, GUID: "in-overlap", DeliveredAt: start.Add(-RedeliverySweepOverlap), StatusCode: 503, Event: "pull_request"},
	))
	e.sweep(t)
	if diff := cmp.Diff([]int64{2, 4}, e.srv.Redeliveries()); diff != "" {
		t.Errorf("after the second sweep (-want +got):\n%s", diff)
	}
}

// flakyStore fails the first lookup of each GUID in fail.
type flakyStore struct {
	db   *store.DB
	mu   sync.Mutex
	fail map[string]bool
}

func (f *flakyStore) Delivery(ctx context.Context, id string) (store.StoredDelivery, error) {
	f.mu.Lock()
	failNow := f.fail[id]
	delete(f.fail, id)
	f.mu.Unlock()
	if failNow {
		return store.StoredDelivery{}, fmt.Errorf("delivery %q: %w", id, store.ErrClosed)
	}
	return f.db.Delivery(ctx, id)
}

// TestSweeperErrorsAreRetried: a failed store lookup, a failed
// redelivery request or a failed listing does not count as asked; the
// next sweep tries again, and still asks once.
func TestSweeperErrorsAreRetried(t *testing.T) {
	e := newSweepEnv(t)
	e.sw.db = &flakyStore{db: e.db, fail: map[string]bool{"g-lookup": true}}
	e.srv.SetDeliveries([]githubtest.Delivery{
		{ID: 1, GUID: "g-lookup", DeliveredAt: e.ago(30 * time.Minute), StatusCode: 503, Event: "pull_request"},
		{ID: 2, GUID: "g-refused", DeliveredAt: e.ago(20 * time.Minute), StatusCode: 503, Event: "pull_request"},
	})
	// g-lookup fails in the store, so g-refused is the first request.
	e.srv.Fail(githubtest.Redeliver, githubtest.Fault{Kind: githubtest.Status, Status: http.StatusNotFound})
	n := e.sweep(t)
	if diff := cmp.Diff(sweepCounts{Failed: 2, Errors: 2}, n); diff != "" {
		t.Errorf("first sweep (-want +got):\n%s", diff)
	}
	e.srv.Fail(githubtest.ListDeliveries, githubtest.Fault{Kind: githubtest.Unauthorized})
	e.clock.Advance(5 * time.Minute)
	if _, err := e.sw.Sweep(t.Context()); err == nil {
		t.Fatal("a refused listing: want an error")
	}
	e.clock.Advance(5 * time.Minute)
	n = e.sweep(t)
	if diff := cmp.Diff(sweepCounts{Failed: 2, Redelivered: 2}, n); diff != "" {
		t.Errorf("third sweep (-want +got):\n%s", diff)
	}
	e.clock.Advance(5 * time.Minute)
	e.sweep(t)
	if diff := cmp.Diff([]int64{1, 2}, e.srv.Redeliveries()); diff != "" {
		t.Errorf("redeliveries (-want +got):\n%s", diff)
	}
}

// TestSweeperAskedIsBounded: the asked set holds MaxRedeliveryAsked GUIDs
// and forgets the oldest first.
func TestSweeperAskedIsBounded(t *testing.T) {
	s := newSweeper(nil, nil, slog.New(slog.DiscardHandler), time.Now)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range MaxRedeliveryAsked {
		s.remember(fmt.Sprintf("g-%d", i), t0.Add(time.Duration(i)*time.Second))
	}
	if len(s.asked) != MaxRedeliveryAsked {
		t.Fatalf("%d remembered, want %d", len(s.asked), MaxRedeliveryAsked)
	}
	s.remember("g-new", t0.Add(time.Duration(MaxRedeliveryAsked)*time.Second))
	if len(s.asked) != MaxRedeliveryAsked {
		t.Errorf("%d remembered past the bound, want %d", len(s.asked), MaxRedeliveryAsked)
	}
	if _, ok := s.asked["g-0"]; ok {
		t.Error("the oldest GUID is still remembered")
	}
	for _, g := range []string{"g-1", "g-new"} {
		if _, ok := s.asked[g]; !ok {
			t.Errorf("%s was forgotten", g)
		}
	}
}

// TestSweeperRunStops: Run sweeps at start and on each tick, and returns
// promptly when its context is canceled.
func TestSweeperRunStops(t *testing.T) {
	e := newSweepEnv(t)
	e.srv.SetDeliveries([]githubtest.Delivery{
		{ID: 1, GUID: "g-lost", DeliveredAt: e.ago(time.Minute), StatusCode: 503, Event: "pull_request"},
	})
	ctx, cancel := context.WithCancel(t.Context())
	ticks := make(chan time.Time)
	done := make(chan error, 1)
	go func() { done <- e.sw.Run(ctx, ticks) }()
	for range 2 {
		select {
		case ticks <- time.Time{}: // taken only after the previous sweep
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not take a tick within 10s")
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop within 10s of cancel")
	}
	if n := e.srv.Count(githubtest.ListDeliveries); n < 2 {
		t.Errorf("%d listings, want a sweep at start and per tick (at least 2 before cancel)", n)
	}
	if diff := cmp.Diff([]int64{1}, e.srv.Redeliveries()); diff != "" {
		t.Errorf("redeliveries (-want +got):\n%s", diff)
	}

	// runEvery, serve's goroutine, returns nil on shutdown.
	ctx2, cancel2 := context.WithCancel(t.Context())
	go func() { done <- e.sw.runEvery(ctx2, time.Hour) }()
	cancel2()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runEvery returned %v on shutdown, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runEvery did not stop within 10s of cancel")
	}
}

func TestRedeliverySweepSetting(t *testing.T) {
	tests := []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{value: "", want: 0},
		{value: "0", want: 0},
		{value: " 60000 ", want: time.Minute},
		{value: "3600000", want: time.Hour},
		{value: "59999", wantErr: "at least 60000"},
		{value: "1", wantErr: "at least 60000"},
		{value: "-60000", wantErr: "positive number"},
		{value: "1m", wantErr: "positive number"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.value), func(t *testing.T) {
			s, errs := loadServe(serveEnvMap(map[string]string{"GILF_REDELIVERY_SWEEP_MS": tc.value}), nil)
			err := errors.Join(errs...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "GILF_REDELIVERY_SWEEP_MS") {
					t.Errorf("err = %v, want one naming GILF_REDELIVERY_SWEEP_MS and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.RedeliverySweep != tc.want {
				t.Errorf("RedeliverySweep = %v, want %v", s.RedeliverySweep, tc.want)
			}
		})
	}
}

// TestServeRedeliverySweep runs gilf serve with the sweeper on: its first
// sweep asks GitHub to redeliver the delivery lost while it was down, and
// on SIGTERM the sweeper stops before the store closes.
func TestServeRedeliverySweep(t *testing.T) {
	k := newAppKey(t)
	srv := githubtest.New(t, githubtest.Options{AppID: serveAppID, PublicKey: &k.key.PublicKey})
	now := time.Now()
	srv.SetDeliveries([]githubtest.Delivery{
		{ID: 10, GUID: "lost-while-down", DeliveredAt: now.Add(-10 * time.Minute), StatusCode: 0, Event: "pull_request", Action: "opened"},
		{ID: 11, GUID: "delivered", DeliveredAt: now.Add(-5 * time.Minute), StatusCode: 202, Event: "pull_request", Action: "opened"},
	})
	p := startServe(t, serveEnv(t, srv, k, t.TempDir(), "GILF_REDELIVERY_SWEEP_MS=60000"))
	deadline := time.Now().Add(serveStartBound)
	for !hasLogLine(p.stderr, "redelivery sweep") {
		if time.Now().After(deadline) {
			t.Fatalf("no sweep within %v:\n%s", serveStartBound, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("gilf serve exit: %v\n%s", err, p.stderr.String())
	}
	if diff := cmp.Diff([]int64{10}, srv.Redeliveries()); diff != "" {
		t.Errorf("redeliveries (-want +got):\n%s", diff)
	}
	var order []string
	for _, l := range p.stderr.logLines() {
		switch m, _ := l["msg"].(string); m {
		case "redelivery sweeper started", "redelivery sweeper stopped", "intake and workers stopped; closing the store":
			order = append(order, m)
		}
	}
	want := []string{"redelivery sweeper started", "redelivery sweeper stopped", "intake and workers stopped; closing the store"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("lifecycle log order (-want +got):\n%s", diff)
	}
}

func hasLogLine(b *lockedBuffer, msg string) bool {
	for _, l := range b.logLines() {
		if l["msg"] == msg {
			return true
		}
	}
	return false
}

// TestSweeperSkipsWhileAnotherReplicaSweeps: with an exclusive runner that
// says another replica holds the sweep, a tick lists nothing; once it is
// free, the sweep runs, under the task's name.
func TestSweeperSkipsWhileAnotherReplicaSweeps(t *testing.T) {
	e := newSweepEnv(t)
	e.srv.SetDeliveries([]githubtest.Delivery{
		{ID: 1, GUID: "g-lost", DeliveredAt: e.ago(time.Minute), StatusCode: 503, Event: "pull_request"},
	})
	var held atomic.Bool
	held.Store(true)
	var names []string // appended by Run's goroutine, read after it returned
	e.sw.exclusive = func(ctx context.Context, name string, fn func(context.Context) error) (bool, error) {
		names = append(names, name)
		if held.Load() {
			return false, nil
		}
		return true, fn(ctx)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ticks := make(chan time.Time)
	done := make(chan error, 1)
	go func() { done <- e.sw.Run(ctx, ticks) }()
	ticks <- time.Time{} // taken after the first (skipped) sweep
	if n := e.srv.Count(githubtest.ListDeliveries); n != 0 {
		t.Fatalf("%d listings while another replica sweeps; want none", n)
	}
	held.Store(false)
	ticks <- time.Time{} // the sweep after this tick sees it free
	ticks <- time.Time{} // and is over
	cancel()
	<-done
	if n := e.srv.Count(githubtest.ListDeliveries); n < 1 {
		t.Fatalf("no listing once the sweep was free")
	}
	if diff := cmp.Diff([]int64{1}, e.srv.Redeliveries()); diff != "" {
		t.Errorf("redeliveries (-want +got):\n%s", diff)
	}
	for _, n := range names {
		if n != "redelivery-sweep" {
			t.Errorf("task name %q", n)
		}
	}
}
