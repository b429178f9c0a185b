package store_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/gilf-review/gilf/store"
)

var storeIDShape = regexp.MustCompile(`^[0-9a-f]{16}$`)

// TestStoreID: each new SQLite store makes its own id; reopening and a
// backup (restored by opening the copy) keep it.
func TestStoreID(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gilf.db")
	db := openAt(t, path, store.Options{})
	id := storeID(t, db)

	other := storeID(t, openAt(t, filepath.Join(t.TempDir(), "gilf.db"), store.Options{}))
	if other == id {
		t.Fatalf("two fresh stores share the id %s", id)
	}
	if again := storeID(t, openAt(t, path, store.Options{})); again != id {
		t.Errorf("reopened: id %s, was %s", again, id)
	}
	dest := filepath.Join(t.TempDir(), "restored.db")
	if _, err := db.Backup(ctx, dest); err != nil {
		t.Fatalf("backup: %v", err)
	}
	if restored := storeID(t, openAt(t, dest, store.Options{})); restored != id {
		t.Errorf("restored backup: id %s, was %s", restored, id)
	}
}

// TestPostgresStoreIDs: PostgreSQL stores make their own ids too, kept
// by every handle (replica) of one database, and none is SQLite's.
func TestPostgresStoreIDs(t *testing.T) {
	if pg == nil {
		t.Fatal("no PostgreSQL server (pgtest.Main)")
	}
	url := pg.NewDatabase(t)
	a := storeID(t, openAt(t, url, store.Options{}))
	if b := storeID(t, openAt(t, url, store.Options{})); b != a {
		t.Errorf("two handles of one database: %s and %s", a, b)
	}
	if c := storeID(t, openAt(t, pg.NewDatabase(t), store.Options{})); c == a {
		t.Errorf("two databases share the id %s", a)
	}
}

func storeID(t *testing.T, db *store.DB) string {
	t.Helper()
	id, err := db.StoreID(context.Background())
	if err != nil {
		t.Fatalf("StoreID: %v", err)
	}
	if !storeIDShape.MatchString(id) {
		t.Fatalf("StoreID = %q, want 16 lower-case hex digits", id)
	}
	return id
}
