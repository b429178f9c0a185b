package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/webhook"
)

// readyServer serves gilf's routes over a real store in dataDir, with
// the free-space floor minFree.
func readyServer(t *testing.T, dataDir string, minFree int64) (*httptest.Server, *readiness, *store.DB) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), filepath.Join(dataDir, DBFileName), log, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Logf("close store: %v", err) // a store the test broke may fail to close
		}
	})
	m := newServeMetrics(db)
	ready := newReadiness(db, dataDir, minFree, log)
	hook, err := webhook.New(ready.intake(wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}), log,
		webhook.Config{Secret: []byte(serveSecret)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(routes(hook, ready, m, log, nil))
	t.Cleanup(srv.Close)
	return srv, ready, db
}

// smallFS mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends (after everything registered later, such as a store
// on it, was closed).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mount a %s tmpfs on %s (the test runs as root): %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes path until the file system is full (ENOSPC).
func fill(t *testing.T, path string) {
	t.Helper()
	if err := writeChunks(path, func() bool { return false }); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fill %s: %v, want ENOSPC", path, err)
	}
}

// fillChunk is what writeChunks writes at a time.
const fillChunk = 64 << 10

// writeChunks creates path and writes fillChunk bytes at a time until
// done says so (nil) or a write fails (its error).
func writeChunks(path string, done func() bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte("x"), fillChunk)
	for !done() {
		if _, err := f.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

func wantReadyz(t *testing.T, url string, code int, body string) {
	t.Helper()
	got, b := httpGet(t, url, "/readyz")
	if got != code || !strings.Contains(b, body) {
		t.Fatalf("/readyz: %d %q, want %d with %q", got, b, code, body)
	}
	if c, b := httpGet(t, url, "/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz: %d %q, want 200 whatever the readiness", c, b)
	}
}

// TestReadyzFullDisk puts the data directory on a real 4 MiB file system,
// fills it, and expects /readyz to say so; freeing the space makes it
// ready again.
func TestReadyzFullDisk(t *testing.T) {
	dir := smallFS(t, "4m")
	srv, _, _ := readyServer(t, dir, 1<<20)
	wantReadyz(t, srv.URL, http.StatusOK, "ready")

	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	wantReadyz(t, srv.URL, http.StatusServiceUnavailable, "not ready: low free space: ")
	_, b := httpGet(t, srv.URL, "/readyz")
	if !strings.Contains(b, "GILF_MIN_FREE_BYTES=1048576") || strings.Contains(b, dir) {
		t.Errorf("/readyz body %q: want the floor named and no path", b)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wantReadyz(t, srv.URL, http.StatusOK, "ready")
}

// TestReadyzPoisonedStore makes the store's WAL fsync fail for real — the
// WAL removed from under the store, so the sync cannot reach the file the
// commits went to — and expects the delivery refused (503) and /readyz to
// report the store as refusing writes from then on.
func TestReadyzPoisonedStore(t *testing.T) {
	dir := t.TempDir()
	srv, _, db := readyServer(t, dir, 0)
	wantReadyz(t, srv.URL, http.StatusOK, "ready")
	if err := os.Remove(filepath.Join(dir, DBFileName+"-wal")); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	if code, r := deliver(t, srv.URL, newGUID(t), "ping", body, signature(serveSecret, body)); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery after the WAL went: %d %+v, want 503", code, r)
	}
	wantReadyz(t, srv.URL, http.StatusServiceUnavailable, "not ready: store refuses writes")
	if err := db.Ready(t.Context()); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("store Ready: %v, want ErrNotDurable", err)
	}
}

// TestReadyzDraining: once the process drains, /readyz answers 503 and
// intake refuses deliveries with 503; /healthz still answers.
func TestReadyzDraining(t *testing.T) {
	srv, ready, db := readyServer(t, t.TempDir(), 0)
	wantReadyz(t, srv.URL, http.StatusOK, "ready")
	ready.drain()
	wantReadyz(t, srv.URL, http.StatusServiceUnavailable, "not ready: draining")
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	if code, r := deliver(t, srv.URL, newGUID(t), "ping", body, signature(serveSecret, body)); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery while draining: %d %+v, want 503", code, r)
	}
	if n, err := db.CountDeliveries(t.Context()); err != nil || n != 0 {
		t.Fatalf("deliveries stored while draining: %d, %v; want 0", n, err)
	}
}

// waitNotReady polls a serve subprocess's /readyz until it answers 503
// with body, bounded by serveStopBound.
func waitNotReady(t *testing.T, p *serveProc, body string) {
	t.Helper()
	deadline := time.Now().Add(serveStopBound)
	for {
		code, b := httpGet(t, p.url, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(b, body) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %q after %v, want 503 with %q:\n%s", code, b, serveStopBound, body, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
}

// TestReadinessLogsChanges: readiness is logged when what is wrong
// changes, not on every probe.
func TestReadinessLogsChanges(t *testing.T) {
	var buf bytes.Buffer
	r := newReadiness(nil, "", 0, slog.New(slog.NewTextHandler(&buf, nil)))
	low := func(free int) *notReady {
		return &notReady{kind: "low_free_space", reason: fmt.Sprintf("low free space: %d bytes free", free), cause: errors.New("x")}
	}
	for _, nr := range []*notReady{nil, low(3), low(2), {kind: "draining", reason: "draining", cause: errDraining}, nil, nil} {
		r.logChange(nr)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		_, msg, _ := strings.Cut(l, "msg=")
		got = append(got, msg)
	}
	want := []string{`"not ready" reason="low free space: 3 bytes free" err=x`, `"not ready" reason=draining err="draining: this process is stopping"`, `"ready again"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
