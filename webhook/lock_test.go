package webhook_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
)

// lockDB holds BEGIN EXCLUSIVE on the store's file from another connection
// until the returned func is called.
func lockDB(t *testing.T, path string) (release func()) {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := raw.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				t.Errorf("rollback: %v", err)
			}
			conn.Close()
			raw.Close()
		})
	}
	t.Cleanup(release)
	return release
}
