package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/migrations"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/postgres"
)

// TestCommandsOnPostgres: with GILF_DATABASE_URL the commands that open
// the store open the PostgreSQL database — migrate, jobs, costs — and
// backup refuses, naming the server's own tools; no command prints the
// URL's password.
func TestCommandsOnPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "pw-of-the-test") // trust auth ignores it
	dsn = u.String()
	var out bytes.Buffer
	env := dataDirEnv(&out, t.TempDir(), map[string]string{DatabaseURLEnv: dsn})

	latest, err := fs.Glob(migrations.Postgres, "*.sql")
	if err != nil || len(latest) == 0 {
		t.Fatalf("embedded PostgreSQL migrations: %v, %v", latest, err)
	}
	// The newest file's number (numbers may skip: each engine has the
	// migrations it needs).
	newest, err := strconv.Atoi(path.Base(latest[len(latest)-1])[:4])
	if err != nil {
		t.Fatal(err)
	}
	if code := run(ctx, env, []string{"migrate"}); code != exitOK || !strings.Contains(out.String(), "PostgreSQL") ||
		!strings.Contains(out.String(), fmt.Sprintf("schema version %d", newest)) {
		t.Fatalf("gilf migrate exited %d:\n%s", code, out.String())
	}
	db, err := postgres.Open(ctx, dsn, slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id := recordJob(t, db, 7, strings.Repeat("ab", 20), time.Now())

	out.Reset()
	if code := run(ctx, env, []string{"jobs"}); code != exitOK || !strings.Contains(out.String(), "o/r") {
		t.Fatalf("gilf jobs exited %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := run(ctx, env, []string{"jobs", "cancel", strconv.FormatInt(id, 10)}); code != exitOK {
		t.Fatalf("gilf jobs cancel exited %d:\n%s", code, out.String())
	}
	if st, err := db.JobState(ctx, id); err != nil || st.State != store.StateCancelled {
		t.Fatalf("job after cancel: %+v %v", st, err)
	}
	out.Reset()
	if code := run(ctx, env, []string{"costs", "--json"}); code != exitOK {
		t.Fatalf("gilf costs exited %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := run(ctx, env, []string{"backup", t.TempDir() + "/b"}); code == exitOK || !strings.Contains(out.String(), "pg_dump") {
		t.Fatalf("gilf backup on PostgreSQL exited %d:\n%s", code, out.String())
	}
	if strings.Contains(out.String(), "pw-of-the-test") {
		t.Fatalf("a command printed the database password:\n%s", out.String())
	}
	if _, err := db.Backup(ctx, t.TempDir()); !errors.Is(err, store.ErrBackupPostgres) {
		t.Fatalf("Backup: %v", err)
	}
}

// TestDoctorStoreOnPostgres: doctor's store check opens, migrates and
// probes the PostgreSQL database, and names it without credentials; a
// server that cannot be reached fails the check.
func TestDoctorStoreOnPostgres(t *testing.T) {
	dsn := pg.NewDatabase(t)
	for _, tc := range []struct {
		url, level, says string
	}{
		{dsn, "ok", "is migrated and takes writes"},
		{"postgres://gilf:pw-of-the-test@/nodb?host=/nonexistent-gilf-dir&connect_timeout=2", "FAIL", "open store"},
	} {
		cfg, err := Load(func(k string) string {
			switch k {
			case DatabaseURLEnv:
				return tc.url
			case "GILF_DATA_DIR":
				return t.TempDir()
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		var r doctorReport
		doctorStore(t.Context(), &r, cfg, slog.New(slog.DiscardHandler))
		if len(r.lines) != 1 || string(r.lines[0].Level) != tc.level || !strings.Contains(r.lines[0].Detail, tc.says) ||
			strings.Contains(r.lines[0].Detail, "pw-of-the-test") {
			t.Errorf("%s: doctor store said %+v; want %s %q and no password", tc.url, r.lines, tc.level, tc.says)
		}
		if tc.level == "ok" && !strings.Contains(r.lines[0].Detail, "PostgreSQL") {
			t.Errorf("the store is not named PostgreSQL: %+v", r.lines)
		}
	}
}
