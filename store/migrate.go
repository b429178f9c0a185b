package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// migrationName is NNNN_name.sql.
var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads and orders the embedded migrations. A file that
// does not follow NNNN_name.sql, or two files with one number, is an error.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %q: name is not NNNN_name.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("migration %q: %w", e.Name(), err)
		}
		if prev, ok := seen[v]; ok {
			return nil, fmt.Errorf("migrations %q and %q share number %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		out = append(out, migration{version: v, name: m[2], sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Migrator is what migrations run on: the SQLite writer, or the one
// PostgreSQL connection holding the migration lock.
type Migrator interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Migrate applies every migration of fsys not yet recorded in
// schema_migrations (table creates it, in the engine's types), each in its own (on SQLite, IMMEDIATE) transaction
// together with its record, so a crash leaves the schema at a whole
// version.
func Migrate(ctx context.Context, w Migrator, table string, fsys fs.FS, now func() time.Time, log *slog.Logger) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	if _, err := w.ExecContext(ctx, table); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var newest sql.NullInt64
	if err := w.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if len(ms) > 0 && newest.Valid && newest.Int64 > int64(ms[len(ms)-1].version) {
		return fmt.Errorf("database schema version %d is newer than this binary's %d", newest.Int64, ms[len(ms)-1].version)
	}
	for _, m := range ms {
		applied, err := applyMigration(ctx, w, m, now)
		if err != nil {
			return err
		}
		if applied {
			log.Info("migration applied", logkey.Version, m.version, "name", m.name)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, w Migrator, m migration, now func() time.Time) (applied bool, err error) {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migration %04d_%s: begin: %w", m.version, m.name, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, rollback(tx))
		}
	}()
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&done); err != nil {
		return false, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
	}
	if done > 0 {
		if err := tx.Commit(); err != nil {
			return false, fmt.Errorf("migration %04d_%s: commit: %w", m.version, m.name, err)
		}
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migration %04d_%s: record: %w", m.version, m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %04d_%s: commit: %w", m.version, m.name, err)
	}
	return true, nil
}

// rollback ends a failed transaction; an already-finished one is fine.
func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}
