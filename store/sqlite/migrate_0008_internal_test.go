package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/gilf-review/gilf/store"
)

// 0008 gives the runs recorded without times (refusals) their job's last
// update, leaves every other run as it was, and starts recording attempts
// for jobs claimed after it.
func TestMigration0008StampsRefusedRuns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	w := openAt(t, path, "0001_init.sql", "0002_delivery_body_log.sql", "0003_job_reruns.sql", "0004_retention.sql",
		"0005_semantic_spans.sql", "0006_jobs_state_check.sql")
	for _, q := range []string{
		`INSERT INTO jobs (id, repo, pr, head_sha, base_ref, delivery_id, trigger_action, state, attempts, last_error, next_attempt_at, created_at, updated_at)
			VALUES (5, 'o/r', 7, 'abc', 'main', 'd-job', 'opened', 'done', 1, '', 1, 1000, 86400000)`,
		`INSERT INTO runs (id, job_id, lease_gen, outcome, refusal, record, started_at, finished_at) VALUES
			(1, 5, 1, 'refused', 'repo_config_invalid', '{}', 0, 0),
			(2, 5, 1, 'passed', '', '{}', 5000, 9000)`,
	} {
		if _, err := w.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	upgrade(t, w, path)
	r, err := sql.Open("sqlite", dsn(path, store.Options{}.WithDefaults(), true))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id, want := range map[int][2]int64{1: {86400000, 86400000}, 2: {5000, 9000}} {
		var s, f int64
		if err := r.QueryRowContext(ctx, `SELECT started_at, finished_at FROM runs WHERE id = ?`, id).Scan(&s, &f); err != nil {
			t.Fatal(err)
		}
		if s != want[0] || f != want[1] {
			t.Errorf("run %d: %d – %d, want %d – %d", id, s, f, want[0], want[1])
		}
	}
	// The old job's attempt ran before 0008: none recorded, none made up.
	var n int
	if err := r.QueryRowContext(ctx, `SELECT COUNT(*) FROM job_attempts`).Scan(&n); err != nil || n != 0 {
		t.Errorf("attempts after 0008: %d, %v", n, err)
	}
}
