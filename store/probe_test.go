package store_test

import (
	"database/sql"
	"testing"

	_ "modernc.org/sqlite"
)

func TestProbeWrite(t *testing.T) {
	db, path := openTest(t, newClock())
	if err := db.ProbeWrite(t.Context()); err != nil {
		t.Fatalf("ProbeWrite: %v", err)
	}
	raw, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_master WHERE name = 'gilf_probe'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("the probe's table was left in the database")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.ProbeWrite(t.Context()); err == nil {
		t.Error("ProbeWrite on a closed store succeeded")
	}
}
