package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// dataDirEnv is an Env whose GILF_DATA_DIR is dir, with extra settings.
func dataDirEnv(out *bytes.Buffer, dir string, extra map[string]string) Env {
	return Env{Stdout: out, Stderr: out, Getenv: func(k string) string {
		if k == "GILF_DATA_DIR" {
			return dir
		}
		return extra[k]
	}}
}

// recordJob records one pull_request delivery asking for a job of o/r.
func recordJob(t *testing.T, db *store.DB, pr int, head string, at time.Time) int64 {
	t.Helper()
	res, err := db.RecordDelivery(context.Background(), validation.Delivery{ID: "d-" + head[:8], Event: "pull_request",
		Action: "opened", InstallationID: 1, Repo: "o/r", PR: pr, HeadSHA: head, ReceivedAt: at,
		Status: validation.DeliveryQueued, Body: []byte(`{"action":"opened"}`)},
		&validation.JobSpec{Repo: "o/r", PR: pr, HeadSHA: head, InstallationID: 1, Trigger: "opened"})
	if err != nil {
		t.Fatalf("record delivery: %v", err)
	}
	return res.JobID
}

// TestJobsCommand lists, cancels and retries jobs with `gilf jobs` while
// another handle — serve's — holds the store open with a running job.
func TestJobsCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, DBFileName), slog.New(slog.DiscardHandler), store.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	now := time.Now()
	dead := recordJob(t, db, 1, strings.Repeat("a", 40), now)
	j, ok, err := db.Claim(ctx, "serve", time.Minute)
	if err != nil || !ok || j.ID != dead {
		t.Fatalf("claim: %+v %v %v", j, ok, err)
	}
	if _, err := db.Retry(ctx, j.Lease, store.Failure{Err: errors.New("github: 502 \x1b[31mBad Gateway\x1b[0m\nsecond line"), Transient: true}); err != nil {
		t.Fatal(err)
	}
	running := recordJob(t, db, 2, strings.Repeat("b", 40), now)
	lease, ok, err := db.Claim(ctx, "serve", time.Minute)
	if err != nil || !ok || lease.ID != running {
		t.Fatalf("claim: %+v %v %v", lease, ok, err)
	}
	gilf := func(want int, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if code := run(ctx, dataDirEnv(&out, dir, nil), append([]string{"jobs"}, args...)); code != want {
			t.Fatalf("gilf jobs %q exited %d, want %d: %s", args, code, want, out.String())
		}
		return out.String()
	}

	list := gilf(exitOK)
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("list:\n%s", list)
	}
	for i, want := range [][]string{
		{"2", "o/r#2", "bbbbbbb", "running", " 1 "},
		{"1", "o/r#1", "aaaaaaa", "dead", "github: 502 Bad Gateway second line (attempt 1 of 1)"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %d lacks %q:\n%s", i+1, w, list)
			}
		}
	}
	if strings.Contains(list, "\x1b") {
		t.Errorf("list holds an escape sequence:\n%q", list)
	}
	if got := gilf(exitOK, "--state", "dead"); strings.Contains(got, "running") || !strings.Contains(got, "dead") {
		t.Errorf("--state dead:\n%s", got)
	}
	var rows []jobRow
	if err := json.Unmarshal([]byte(gilf(exitOK, "--json", "--limit", "1")), &rows); err != nil || len(rows) != 1 || rows[0].ID != running {
		t.Errorf("--json --limit 1 = %+v, %v", rows, err)
	}
	if got := gilf(exitOK, "--repo", "x/y", "--json"); strings.TrimSpace(got) != "[]" {
		t.Errorf("--repo x/y --json = %q; want []", got)
	}

	if got := gilf(exitOK, "cancel", "2"); !strings.Contains(got, "job 2 cancelled") {
		t.Errorf("cancel: %s", got)
	}
	if _, err := db.Heartbeat(ctx, lease.Lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("serve's heartbeat after cancel = %v; want ErrLeaseLost", err)
	}
	if got := gilf(exitJobState, "cancel", "2"); !strings.Contains(got, "already cancelled") {
		t.Errorf("second cancel: %s", got)
	}
	if got := gilf(exitOK, "retry", "1"); !strings.Contains(got, "job 1 queued again as re-run 1") {
		t.Errorf("retry: %s", got)
	}
	if st, err := db.JobState(ctx, dead); err != nil || st.State != store.StateQueued || st.Attempts != 0 || st.Reruns != 1 {
		t.Errorf("retried job = %+v, %v", st, err)
	}
	if got := gilf(exitJobState, "retry", "1"); !strings.Contains(got, "it is queued") {
		t.Errorf("retry of a queued job: %s", got)
	}
	if got := gilf(exitJobUnknown, "cancel", "99"); !strings.Contains(got, "no job 99") {
		t.Errorf("cancel of an unknown job: %s", got)
	}
	gilf(exitJobUnknown, "retry", "99")
	gilf(exitUsage, "retry", "x")
	gilf(exitUsage, "retry")
	gilf(exitUsage, "--state", "zombie")
	gilf(exitUsage, "--limit", "0")
	gilf(exitUsage, "extra")
	gilf(exitOK, "--help")
}

func TestJobsCommandWithoutStore(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), dataDirEnv(&out, t.TempDir(), nil), []string{"jobs"}); code != exitUsage || !strings.Contains(out.String(), "no store at") {
		t.Errorf("gilf jobs without a store exited %d: %s", code, out.String())
	}
}
