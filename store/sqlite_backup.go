package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// BackupBodyWait bounds how long Backup waits for a body the copied
// database names but the body log has yet to hold: a delivery committed
// just before the copy whose body its handle is still writing (bodies.go).
// Past it the body is copied as it is (it then reads as corrupt, as it
// would in the store).
const BackupBodyWait = 10 * time.Second

// backupPoll is how often Backup looks again at a segment that is still
// shorter than the copied database needs.
const backupPoll = 5 * time.Millisecond

// BackupResult is what Backup copied.
type BackupResult struct {
	Path         string // the copied database
	Deliveries   int    // delivery rows in the copy
	Segments     int    // body log segments copied
	SegmentBytes int64
	// Pruned counts segments the copied database named that retention
	// deleted before they could be copied; the copy marks their
	// deliveries' bodies pruned, as the store did.
	Pruned int
	// Short counts segments still shorter after BackupBodyWait than the
	// copy needs (a body whose write failed in the store).
	Short int
}

// Backup writes a consistent copy of the store to dest (a database file
// that must not exist; its body log goes to dest.bodies), while other
// handles — `gilf serve` — keep writing.
//
// The database is copied first, with VACUUM INTO: one read transaction,
// so the copy holds exactly the commits before it and nothing after.
// Only then are the body log segments copied, and only as far as the
// copy's rows reach. That order is the consistent one because a segment
// is append-only: a byte range a row names is reserved before the row
// commits, written by its handle at once, and never rewritten — so a
// segment copied after the snapshot holds every body the snapshot names
// (Backup waits, up to BackupBodyWait, for one still being written).
// Copying the segments first would not do: a delivery committed between
// the segment copy and the snapshot would be in the copied database with
// its body missing from the copied segments. The one change to a segment
// after its rows commit is retention deleting it, once its rows are
// marked pruned; a segment gone before it was copied gets its rows marked
// pruned in the copy too.
func (d *DB) Backup(ctx context.Context, dest string) (BackupResult, error) {
	return d.eng.backup(ctx, dest)
}

// backup is Backup on SQLite.
func (e *sqliteEngine) backup(ctx context.Context, dest string) (BackupResult, error) {
	res := BackupResult{Path: dest}
	fail := func(err error) (BackupResult, error) {
		return res, fmt.Errorf("backup to %s: %w", dest, err)
	}
	for _, p := range []string{dest, bodyDir(dest)} {
		if _, err := os.Lstat(p); err == nil {
			return fail(fmt.Errorf("%s already exists", p))
		} else if !errors.Is(err, os.ErrNotExist) {
			return fail(err)
		}
	}
	if err := os.MkdirAll(bodyDir(dest), 0o700); err != nil {
		return fail(err)
	}
	if _, err := e.ck.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		return fail(fmt.Errorf("copy database: %w", err))
	}
	cp, err := sql.Open("sqlite", dest+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return fail(err)
	}
	cp.SetMaxOpenConns(1)
	err = e.copySegments(ctx, cp, dest, &res)
	if err == nil {
		err = cp.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries`).Scan(&res.Deliveries)
	}
	if err := errors.Join(err, cp.Close()); err != nil {
		return fail(err)
	}
	if err := errors.Join(syncFile(dest), syncDir(bodyDir(dest)), syncDir(filepath.Dir(dest))); err != nil {
		return fail(err)
	}
	return res, nil
}

// copySegments copies the part of each segment the copied database names.
func (e *sqliteEngine) copySegments(ctx context.Context, cp *sql.DB, dest string, res *BackupResult) error {
	rows, err := cp.QueryContext(ctx, `SELECT body_segment, MAX(body_offset + body_length) FROM deliveries
		WHERE body_segment IS NOT NULL AND body_pruned_at IS NULL GROUP BY body_segment`)
	if err != nil {
		return fmt.Errorf("read copied database: %w", err)
	}
	need := map[string]int64{}
	for rows.Next() {
		var seg string
		var end int64
		if err := rows.Scan(&seg, &end); err != nil {
			rows.Close()
			return fmt.Errorf("read copied database: %w", err)
		}
		need[seg] = end
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("read copied database: %w", err)
	}
	for seg, end := range need {
		if !validSegment(seg) {
			return fmt.Errorf("copied database names segment %q: not a segment name", seg)
		}
		n, err := copySegment(ctx, filepath.Join(e.bodies.dir, seg), filepath.Join(bodyDir(dest), seg), end)
		switch {
		case errors.Is(err, os.ErrNotExist):
			res.Pruned++
			if _, err := cp.ExecContext(ctx, `UPDATE deliveries SET body_pruned_at = ? WHERE body_segment = ? AND body_pruned_at IS NULL`,
				e.d.nowMs(), seg); err != nil {
				return fmt.Errorf("mark segment %s pruned in the copy: %w", seg, err)
			}
			continue
		case err != nil:
			return fmt.Errorf("copy segment %s: %w", seg, err)
		}
		res.Segments++
		res.SegmentBytes += n
		if n < end {
			res.Short++
		}
	}
	return nil
}

// copySegment copies the first n bytes of src to a new file dst, waiting
// up to BackupBodyWait for src to reach n bytes, and syncs it.
func copySegment(ctx context.Context, src, dst string, n int64) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	deadline := time.Now().Add(BackupBodyWait)
	for {
		info, err := in.Stat()
		if err != nil {
			return 0, err
		}
		if info.Size() >= n || time.Now().After(deadline) {
			break
		}
		t := time.NewTimer(backupPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	copied, err := io.CopyN(out, in, n)
	if errors.Is(err, io.EOF) {
		err = nil // short: counted by the caller
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return copied, err
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}
