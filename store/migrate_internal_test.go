package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/gilf-review/gilf/migrations"
)

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name    string
		fs      fstest.MapFS
		want    []int
		wantErr string
	}{
		{"ordered by number", fstest.MapFS{"0002_b.sql": {}, "0001_a.sql": {}, "0010_c.sql": {}}, []int{1, 2, 10}, ""},
		{"bad name", fstest.MapFS{"1_a.sql": {}}, nil, "not NNNN_name.sql"},
		{"not sql", fstest.MapFS{"0001_a.txt": {}}, nil, "not NNNN_name.sql"},
		{"duplicate number", fstest.MapFS{"0001_a.sql": {}, "0001_b.sql": {}}, nil, "share number 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.fs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("versions (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := loadMigrations(migrations.FS); err != nil {
		t.Fatalf("embedded migrations: %v", err)
	}
}

// TestQueryPlans: the hot statements search an index, never the whole
// jobs table, whose rows are mostly finished jobs.
func TestQueryPlans(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	const table = `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`
	if err := Migrate(context.Background(), db, table, migrations.FS, time.Now, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		q     string
		index []string
	}{
		{"due", sqlDue, []string{"jobs_ready", "jobs_lease"}},
		{"dead leases", sqlDeadLeases, []string{"jobs_lease"}},
		{"rescue", sqlRescue, []string{"jobs_lease"}},
		{"claim", fmt.Sprintf(sqlClaim, ""), []string{"jobs_ready"}},
		{"look up job", sqlLookupJob, []string{"INDEX jobs_pr_updated (", "sqlite_autoindex_jobs_1"}},
		{"recorded delivery's job", sqlDupJob, []string{"PRIMARY KEY", "sqlite_autoindex_jobs_1"}},
		{"supersede", sqlSupersede, []string{"INDEX jobs_pr ("}},
		{"cancel", fmt.Sprintf(sqlCancel, "json_each(?5)"), []string{"INDEX jobs_pr"}},
		{"re-run job", sqlRerunJob, []string{"INTEGER PRIMARY KEY", "INDEX jobs_pr_updated ("}},
		{"re-run job state", sqlRerunState, []string{"INTEGER PRIMARY KEY"}},
		{"re-run head", sqlRerunHead, []string{"(repo=?", "INDEX jobs_pr_updated ("}},
		{"last run outcome", sqlLastOutcome, []string{"runs_job"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := db.Query("EXPLAIN QUERY PLAN "+tt.q, placeholders(tt.q)...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			all := strings.Join(plan, "\n")
			// A scan of jobs_pr reads only unfinished jobs (a partial
			// index): the queue, not the history.
			if strings.Contains(strings.ReplaceAll(all, "SCAN jobs USING INDEX jobs_pr", ""), "SCAN jobs") {
				t.Fatalf("full scan of jobs:\n%s", all)
			}
			for _, ix := range tt.index {
				if !strings.Contains(all, ix) {
					t.Fatalf("plan does not use %s:\n%s", ix, all)
				}
			}
		})
	}
}

// placeholders is one argument (1) for each of q's placeholders: ? or ?N.
func placeholders(q string) []any {
	n := strings.Count(q, "?")
	for _, m := range regexp.MustCompile(`\?(\d+)`).FindAllStringSubmatch(q, -1) {
		if k, _ := strconv.Atoi(m[1]); k > n || n == strings.Count(q, "?") {
			n = k // numbered: the highest
		}
	}
	args := make([]any, 0, n)
	for range n {
		args = append(args, 1)
	}
	return args
}

// bytecode is the opcodes SQLite compiles q to on conn (EXPLAIN).
