package store

import (
	"context"
	"fmt"
	"regexp"
)

// storeIDRe is what migration 0009 makes: 16 lower-case hex digits.
var storeIDRe = regexp.MustCompile(`^[0-9a-f]{16}$`)

// StoreID is this store's own id: made once by migration 0009, kept by
// Backup and its restore (it is a row), never written again. What gilf
// posts on GitHub names it with the job (validation.MarkerID), so another
// store's post — a database reset, a move from SQLite to PostgreSQL — is
// never taken for this store's.
func (d *DB) StoreID(ctx context.Context) (string, error) {
	var id string
	if err := d.r.QueryRowContext(ctx, `SELECT id FROM store_identity`).Scan(&id); err != nil {
		return "", fmt.Errorf("read store id: %w", err)
	}
	if !storeIDRe.MatchString(id) {
		return "", fmt.Errorf("read store id: %q is not 16 lower-case hex digits", id)
	}
	return id, nil
}
