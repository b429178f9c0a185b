package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
)

// pruneBodies deletes whole body log segments: see Prune.
func (e *sqliteEngine) pruneBodies(ctx context.Context, cutoff int64, res *PruneResult) error {
	d := e.d
	dir := e.bodies.dir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	// Lock first, then read which rows name the segments: a handle that
	// closed meanwhile has committed all it will.
	locked := map[string]*os.File{}
	sizes := map[string]int64{}
	defer func() {
		for _, f := range locked {
			f.Close() // read-only, and only to release the lock
		}
	}()
	for _, e := range entries {
		name := e.Name()
		if !validSegment(name) { // this handle's own is locked like any live one
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) { // another prune took it
			continue
		}
		if err != nil {
			return err
		}
		ok, err := tryLockExclusive(f)
		if err != nil || !ok {
			f.Close()
			if err != nil {
				return err
			}
			res.LiveSegments++
			continue
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		locked[name], sizes[name] = f, info.Size()
	}
	// The segments some unpruned delivery at or after the cutoff needs.
	rows, err := d.r.QueryContext(ctx, `SELECT DISTINCT body_segment FROM deliveries
		WHERE body_segment IS NOT NULL AND body_pruned_at IS NULL AND received_at >= ?`, cutoff)
	if err != nil {
		return err
	}
	for rows.Next() {
		var seg string
		if err := rows.Scan(&seg); err != nil {
			rows.Close()
			return err
		}
		if f, ok := locked[seg]; ok {
			f.Close()
			delete(locked, seg)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	drop := make([]string, 0, len(locked))
	for name := range locked {
		drop = append(drop, name)
	}
	if err := d.pruneRowBodies(ctx, cutoff, drop, res); err != nil {
		return err
	}
	// The rows say "pruned" (durably: writeTx syncs) before any file goes.
	for _, name := range drop {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		res.Segments++
		res.SegmentBytes += sizes[name]
	}
	if len(drop) > 0 {
		return syncDir(dir)
	}
	return nil
}
