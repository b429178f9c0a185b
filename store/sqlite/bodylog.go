package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/store"
)

// legacyVersion is the schema version of the database behind w before
// Open migrates it: 0 for a new database.
func legacyVersion(ctx context.Context, w *sql.DB) (int, error) {
	var n, v int
	err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE name = 'schema_migrations'`).Scan(&n)
	if err != nil || n == 0 {
		return 0, err
	}
	err = w.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// importBodyLog copies into its row every body the body log of a
// database from migrations 0002–0011 holds (<path>.bodies/*.seg: snappy
// blocks a row names by segment, offset, length and CRC-32C), before
// migration 0012 drops those columns, and then removes the body log. A
// block that is missing or fails its CRC-32C leaves its row's body empty:
// it reads as ErrBodyCorrupt until GitHub's redelivery heals it, as
// before, and the directory is kept for the operator.
func importBodyLog(ctx context.Context, w *sql.DB, path string, was int, log *slog.Logger) error {
	dir := path + ".bodies"
	q := `SELECT id, body_segment, body_offset, body_length, body_crc32c FROM deliveries WHERE body_segment IS NOT NULL`
	if was >= 4 { // retention (0004) marks pruned bodies, whose segments are gone
		q += ` AND body_pruned_at IS NULL`
	}
	rows, err := w.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("import body log: %w", err)
	}
	var ids []string
	var blocks [][]byte
	lost := 0
	for rows.Next() {
		var id, seg string
		var off, n, crc int64
		if err := rows.Scan(&id, &seg, &off, &n, &crc); err != nil {
			return errors.Join(fmt.Errorf("import body log: %w", err), rows.Close())
		}
		b, err := readBlock(filepath.Join(dir, filepath.Base(seg)), off, n)
		if err != nil || crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) != uint32(crc) {
			lost++
			b = []byte{}
		}
		ids, blocks = append(ids, id), append(blocks, b)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("import body log: %w", err)
	}
	if err := update(ctx, w, ids, blocks, nil); err != nil {
		return fmt.Errorf("import body log: %w", err)
	}
	if lost > 0 {
		log.Warn("body log imported; bodies missing or damaged in it read as corrupt until redelivered", "lost", lost, logkey.Dir, dir)
		return nil
	}
	if len(ids) > 0 {
		log.Info("body log imported into the rows; its directory is removed", "bodies", len(ids), logkey.Dir, dir)
	}
	return os.RemoveAll(dir)
}

// encodeRawBodies encodes the bodies rows from before migration 0002 keep
// as they came (no CRC-32C), as every row now keeps its body.
func encodeRawBodies(ctx context.Context, w *sql.DB) error {
	rows, err := w.QueryContext(ctx, `SELECT id, body FROM deliveries WHERE body_pruned_at IS NULL AND body_crc32c IS NULL`)
	if err != nil {
		return fmt.Errorf("encode raw bodies: %w", err)
	}
	var ids []string
	var blocks [][]byte
	var crcs []uint32
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return errors.Join(fmt.Errorf("encode raw bodies: %w", err), rows.Close())
		}
		b, crc := store.EncodeBody(body)
		ids, blocks, crcs = append(ids, id), append(blocks, b), append(crcs, crc)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("encode raw bodies: %w", err)
	}
	if err := update(ctx, w, ids, blocks, crcs); err != nil {
		return fmt.Errorf("encode raw bodies: %w", err)
	}
	return nil
}

// update sets the body of each delivery of ids (and its CRC-32C, when
// crcs is set), in one transaction.
func update(ctx context.Context, w *sql.DB, ids []string, blocks [][]byte, crcs []uint32) error {
	if len(ids) == 0 {
		return nil
	}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for i, id := range ids {
		crc := sql.NullInt64{}
		if crcs != nil {
			crc = sql.NullInt64{Int64: int64(crcs[i]), Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET body = ?, body_crc32c = COALESCE(?, body_crc32c) WHERE id = ?`,
			blocks[i], crc, id); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// readBlock reads n bytes at off of the segment file at path.
func readBlock(path string, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || n > store.MaxBodyLen {
		return nil, fmt.Errorf("segment %s: bad range %d+%d", path, off, n)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, err
	}
	return b, nil
}
