package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSettleStartsTheWALOver: between two runs the SQLite WAL is copied
// into the database and starts over at its size, while another
// connection (the servers' store) keeps the database open.
func TestSettleStartsTheWALOver(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "intake.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (v TEXT)"); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (?)", fmt.Sprintf("%01000d", i)); err != nil {
			t.Fatal(err)
		}
	}
	wal := func() int64 {
		info, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	before := wal()
	if before < 200*1000 {
		t.Fatalf("WAL before settling: %d bytes, want the 200 rows' pages", before)
	}
	st, err := newSettler(ctx, path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(ctx)
	// A reader still in its transaction keeps the WAL from starting over:
	// settle tries again until its time is up, and says so.
	reader, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 4*settleRetry)
	err = st.settle(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "could not finish") {
		t.Fatalf("settle beside an open reader: %v, want the checkpoint unfinished at the deadline", err)
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := st.settle(ctx); err != nil {
		t.Fatal(err)
	}
	// Every frame is in the database and the WAL starts over, at the
	// size it had: the next write goes to its first frames.
	if n := wal(); n != before {
		t.Fatalf("WAL after settling: %d bytes, want the %d it had", n, before)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES ('after')"); err != nil {
		t.Fatal(err)
	}
	var busy, frames, done int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &done); err != nil {
		t.Fatal(err)
	}
	if frames < 1 || frames > 4 {
		t.Fatalf("WAL after settling and one insert: %d frames, want the insert's few", frames)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&rows); err != nil || rows != 201 {
		t.Fatalf("rows after settling: %d, %v; want 201", rows, err)
	}
	if st.runs != 1 {
		t.Fatalf("settled %d times, want 1", st.runs)
	}
	var none *settler // -settle=false
	if err := none.settle(ctx); err != nil {
		t.Fatal(err)
	}
}
