package store

import (
	"context"
	"errors"
	"fmt"
)

// ProbeWrite checks that the database takes a write: on the writer
// connection it begins an IMMEDIATE transaction (the write lock), creates
// a table and inserts a row, then rolls everything back. Nothing is left.
func (d *DB) ProbeWrite(ctx context.Context) (err error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("probe write: begin: %w", err)
	}
	defer func() { err = errors.Join(err, rollback(tx)) }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE gilf_probe (v INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("probe write: create: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO gilf_probe (v) VALUES (1)`); err != nil {
		return fmt.Errorf("probe write: insert: %w", err)
	}
	return nil
}
