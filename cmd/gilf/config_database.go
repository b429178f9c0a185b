package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/postgres"
	"github.com/gilf-review/gilf/store/sqlite"
)

// DatabaseURLEnv selects the PostgreSQL store.
const DatabaseURLEnv = "GILF_DATABASE_URL"

// MaxDatabaseConns bounds GILF_DATABASE_MAX_CONNS: more connections per
// replica than this only queue inside the server.
const MaxDatabaseConns = 256

// DatabaseConfig is where the store lives.
type DatabaseConfig struct {
	// URL is GILF_DATABASE_URL: postgres:// or postgresql://; unset, the
	// embedded SQLite file under GILF_DATA_DIR.
	URL Secret
	// MaxConns is GILF_DATABASE_MAX_CONNS: the write pool per replica on
	// PostgreSQL (default postgres.DefaultMaxConns).
	MaxConns int
	// FSShared is GILF_EVIDENCE_FS_SHARED=1: the filesystem evidence
	// directory is one every replica shares (without it, the filesystem
	// evidence store is refused with PostgreSQL: a replica's local
	// directory would scatter a run's evidence across machines).
	FSShared bool
}

// Postgres reports whether the store is PostgreSQL.
func (d DatabaseConfig) Postgres() bool { return d.URL.IsSet() }

func loadDatabase(getenv func(string) string, ev EvidenceConfig, errs []error) (DatabaseConfig, []error) {
	var d DatabaseConfig
	if raw := strings.TrimSpace(getenv(DatabaseURLEnv)); raw != "" {
		if !postgres.IsURL(raw) {
			// The value is not quoted: it may hold a password.
			errs = append(errs, fmt.Errorf("%s: want a postgres:// or postgresql:// URL (unset for the embedded SQLite store under GILF_DATA_DIR)", DatabaseURLEnv))
		} else if _, err := url.Parse(raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: not a valid URL", DatabaseURLEnv))
		} else {
			d.URL = Secret{v: raw}
		}
	}
	var err error
	if d.MaxConns, err = intSetting(getenv, "GILF_DATABASE_MAX_CONNS", postgres.DefaultMaxConns, 1, MaxDatabaseConns); err != nil {
		errs = append(errs, err)
	}
	if d.FSShared, err = flag01(getenv, "GILF_EVIDENCE_FS_SHARED"); err != nil {
		errs = append(errs, err)
	}
	if d.URL.IsSet() && ev.Options.Enabled && ev.S3Bucket == "" && !d.FSShared {
		errs = append(errs, fmt.Errorf("GILF_EVIDENCE_ARTIFACTS=1 with %s stores evidence on this replica's disk, which the other replicas cannot read: set GILF_EVIDENCE_S3_BUCKET, or GILF_EVIDENCE_FS_SHARED=1 if GILF_DATA_DIR's evidence directory is shared by every replica", DatabaseURLEnv))
	}
	return d, errs
}

// storeWhere names the store for messages: the SQLite file's path, or the
// PostgreSQL server and database without credentials.
func storeWhere(cfg Config) string {
	if !cfg.Database.Postgres() {
		return filepath.Join(cfg.DataDir, DBFileName)
	}
	u, err := url.Parse(cfg.Database.URL.Reveal())
	if err != nil {
		return "PostgreSQL (" + DatabaseURLEnv + ")"
	}
	host := u.Host
	if h := u.Query().Get("host"); host == "" && h != "" {
		host = h
	}
	return fmt.Sprintf("PostgreSQL %s%s (%s)", host, u.Path, DatabaseURLEnv)
}

// openStore opens the configured store: PostgreSQL when GILF_DATABASE_URL
// is set, else the SQLite file under GILF_DATA_DIR, which must already
// exist when existing is set (commands that read a store never create an
// empty one).
func openStore(ctx context.Context, cfg Config, log *slog.Logger, opts store.Options, existing bool) (*store.DB, error) {
	if cfg.Database.Postgres() {
		opts.MaxConns = cfg.Database.MaxConns
		return postgres.Open(ctx, cfg.Database.URL.Reveal(), log, opts)
	}
	path := filepath.Join(cfg.DataDir, DBFileName)
	if existing {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no store at %s (GILF_DATA_DIR, or %s for PostgreSQL): %w", path, DatabaseURLEnv, err)
		}
	}
	db, err := sqlite.Open(ctx, path, log, opts)
	if err != nil {
		return nil, err
	}
	return db, nil
}
