package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gilf-review/gilf/store"
)

// Backup writes a consistent copy of the database to dest (a file that
// must not exist) with VACUUM INTO: one read transaction, so the copy
// holds exactly the commits before it and nothing after, bodies included
// (they are in their rows). The copy and its directory are fsynced.
func (e *driver) Backup(ctx context.Context, dest string) (store.BackupResult, error) {
	res := store.BackupResult{Path: dest}
	fail := func(err error) (store.BackupResult, error) {
		return res, fmt.Errorf("backup to %s: %w", dest, err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return fail(fmt.Errorf("%s already exists", dest))
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	if _, err := e.ck.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		return fail(fmt.Errorf("copy database: %w", err))
	}
	cp, err := sql.Open("sqlite", dest+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return fail(err)
	}
	err = cp.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries`).Scan(&res.Deliveries)
	if err := errors.Join(err, cp.Close(), syncPath(dest), syncPath(filepath.Dir(dest))); err != nil {
		return fail(err)
	}
	return res, nil
}

// syncPath fsyncs a file or a directory (so a new name in it is durable).
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
