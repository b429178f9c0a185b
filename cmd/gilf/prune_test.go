package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// TestPruneCommand prunes a real store: an old delivery's closed segment
// goes, a fresh delivery's stays.
func TestPruneCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, d := range []struct {
		id string
		at time.Time
	}{{"old", time.Now().Add(-31 * 24 * time.Hour)}, {"new", time.Now()}} {
		db, err := sqlite.Open(ctx, filepath.Join(dir, DBFileName), slog.New(slog.DiscardHandler), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.RecordDelivery(ctx, validation.Delivery{ID: d.id, Event: "ping", ReceivedAt: d.at,
			Status: validation.DeliveryIgnored, Body: []byte(`{"zen":"` + d.id + `"}`)}, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if code := run(ctx, dataDirEnv(&out, dir, map[string]string{"GILF_RETENTION_DAYS": "30"}), []string{"prune"}); code != exitOK {
		t.Fatalf("gilf prune exited %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "(30 days): 1 delivery bodies, step output of") {
		t.Errorf("gilf prune said:\n%s", out.String())
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, DBFileName), slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d, err := db.Delivery(ctx, "old"); err != nil || d.BodyPrunedAt.IsZero() {
		t.Errorf("old = %+v, %v; want pruned", d, err)
	}
	if d, err := db.Delivery(ctx, "new"); err != nil || string(d.Body) != `{"zen":"new"}` {
		t.Errorf("new = %+v, %v; want kept", d, err)
	}

	out.Reset()
	if code := run(ctx, dataDirEnv(&out, dir, map[string]string{"GILF_RETENTION_DAYS": "0"}), []string{"prune"}); code != exitOK || !strings.Contains(out.String(), "retention is off") {
		t.Errorf("gilf prune with retention off exited %d: %s", code, out.String())
	}
	if code := run(ctx, dataDirEnv(&out, dir, nil), []string{"prune", "now"}); code != exitUsage {
		t.Errorf("gilf prune now exited %d", code)
	}
	if code := run(ctx, dataDirEnv(&out, t.TempDir(), nil), []string{"prune"}); code != exitUsage {
		t.Errorf("gilf prune without a store exited %d", code)
	}
}

// callPruner records the cutoffs it is asked to prune before.
type callPruner struct{ calls chan time.Time }

func (c callPruner) Prune(_ context.Context, before time.Time) (store.PruneResult, error) {
	c.calls <- before
	return store.PruneResult{Before: before}, errors.New("disk on fire") // logged, not fatal
}

// The pruner runs at start and at every tick, a failure does not stop
// it, and it stops with its context.
func TestPrunerRun(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	db := callPruner{calls: make(chan time.Time)}
	p := newPruner(db, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, 30*24*time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, ticks) }()
	want := now.Add(-30 * 24 * time.Hour)
	if got := <-db.calls; !got.Equal(want) {
		t.Errorf("first prune before %v; want %v", got, want)
	}
	ticks <- now
	if got := <-db.calls; !got.Equal(want) {
		t.Errorf("second prune before %v; want %v", got, want)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v; want context.Canceled", err)
	}
}

// TestPrunerSkipsWhileAnotherReplicaPrunes: the pruner prunes through its
// exclusive runner, under the task name "prune", and not while another
// replica holds it.
func TestPrunerSkipsWhileAnotherReplicaPrunes(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	db := callPruner{calls: make(chan time.Time, 4)}
	p := newPruner(db, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, 24*time.Hour)
	asked := make(chan string, 4)
	held := true
	p.exclusive = func(ctx context.Context, name string, fn func(context.Context) error) (bool, error) {
		asked <- name
		if held {
			return false, nil
		}
		return true, fn(ctx)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one pass: Run prunes at start, then sees the end
	if err := p.Run(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if name := <-asked; name != "prune" || len(db.calls) != 0 {
		t.Fatalf("task %q, %d prunes while held; want prune and none", name, len(db.calls))
	}
	held = false
	if err := p.Run(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if len(db.calls) != 1 {
		t.Fatalf("%d prunes once free, want 1", len(db.calls))
	}
}
