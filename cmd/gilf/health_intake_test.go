package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestReadinessAndIntakeAgree puts the data directory (store included)
// on a real 8 MiB file system and checks /readyz and /webhook together:
// both accept while the free space is above the floor; both answer 503,
// and nothing is stored, once it is below the floor and once the file
// system is full; both accept again when the space is freed.
func TestReadinessAndIntakeAgree(t *testing.T) {
	const floor = 2 << 20
	dir := smallFS(t, "8m")
	srv, _, db := readyServer(t, dir, floor)
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	stored := 0
	both := func(state string, code int) {
		t.Helper()
		got, b := httpGet(t, srv.URL, "/readyz")
		dcode, rep := deliver(t, srv.URL, newGUID(t), "ping", body, signature(serveSecret, body))
		accepted := dcode < 300
		if accepted {
			stored++
		}
		if got != code || accepted != (code == http.StatusOK) {
			t.Fatalf("%s: /readyz %d %q, /webhook %d %+v; want both %s", state, got, b, dcode, rep,
				map[bool]string{true: "to accept", false: "to refuse (503)"}[code == http.StatusOK])
		}
		if !accepted && dcode != http.StatusServiceUnavailable {
			t.Fatalf("%s: /webhook %d, want 503", state, dcode)
		}
		if n, err := db.CountDeliveries(t.Context()); err != nil || n != stored {
			t.Fatalf("%s: %d deliveries stored, %v; want %d", state, n, err, stored)
		}
	}
	both("room to spare", http.StatusOK)

	filler := filepath.Join(dir, "filler")
	fillBelow(t, filler, dir, floor)
	both("below the floor", http.StatusServiceUnavailable)
	more := filepath.Join(dir, "more")
	fill(t, more)
	both("full", http.StatusServiceUnavailable)
	for _, f := range []string{filler, more} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	both("freed", http.StatusOK)
}

// fillBelow writes path until the file system holding dir has less than
// free bytes free (but is not full).
func fillBelow(t *testing.T, path, dir string, free int64) {
	t.Helper()
	left := func() int64 {
		n, err := freeBytes(dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := writeChunks(path, func() bool { return left() < free }); err != nil {
		t.Fatalf("fill %s below %d bytes free: %v", path, free, err)
	}
	if n := left(); n < fillChunk {
		t.Fatalf("%d bytes left: full, not below the floor", n)
	}
}

// BenchmarkFreeBytes is what intake's floor check adds to a delivery
// (one statfs); compare with BenchmarkServeWebhookIntake in the same run.
func BenchmarkFreeBytes(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := freeBytes(dir); err != nil {
			b.Fatal(err)
		}
	}
}
