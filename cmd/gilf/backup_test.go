package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// TestBackupCommand backs a store up while its handle stays open, and the
// backup opens as a store with every delivery and its body.
func TestBackupCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, DBFileName), slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 5 {
		if _, err := db.RecordDelivery(ctx, validation.Delivery{ID: fmt.Sprintf("d%d", i), Event: "ping", ReceivedAt: time.Now(),
			Status: validation.DeliveryIgnored, Body: []byte(fmt.Sprintf(`{"n":%d}`, i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	dest := filepath.Join(t.TempDir(), "backup")
	var out bytes.Buffer
	if code := run(ctx, dataDirEnv(&out, dir, nil), []string{"backup", dest}); code != exitOK {
		t.Fatalf("gilf backup exited %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "backed up 5 deliveries to "+filepath.Join(dest, DBFileName)) {
		t.Errorf("gilf backup said:\n%s", out.String())
	}
	cp, err := sqlite.Open(ctx, filepath.Join(dest, DBFileName), slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	for i := range 5 {
		if d, err := cp.Delivery(ctx, fmt.Sprintf("d%d", i)); err != nil || string(d.Body) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("backup's d%d = %+v, %v", i, d, err)
		}
	}
	out.Reset()
	if code := run(ctx, dataDirEnv(&out, dir, nil), []string{"backup", dest}); code != exitUsage || !strings.Contains(out.String(), "already exists") {
		t.Errorf("gilf backup over a backup exited %d: %s", code, out.String())
	}
	if code := run(ctx, dataDirEnv(&out, dir, nil), []string{"backup"}); code != exitUsage {
		t.Errorf("gilf backup without DEST exited %d", code)
	}
}
