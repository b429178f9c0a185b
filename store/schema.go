package store

import (
	"context"
	"fmt"
)

// SchemaVersion is the newest migration applied to the database.
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := d.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}
