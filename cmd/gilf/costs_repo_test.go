package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// openCostsStore makes a store in a fresh GILF_DATA_DIR, for `gilf
// costs` to read once the test closed it.
func openCostsStore(t *testing.T) (*store.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, DBFileName), slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, dir
}

// finishWithSpans records a job of repo and finishes it with spans.
func finishWithSpans(t *testing.T, db *store.DB, repo string, n int, spans ...store.CostSpan) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	sha := fmt.Sprintf("%040x", n)
	if _, err := db.RecordDelivery(ctx, validation.Delivery{ID: fmt.Sprintf("d-%08x", n), Event: "pull_request", Action: "opened",
		InstallationID: 1, Repo: repo, PR: n, HeadSHA: sha, ReceivedAt: now, Status: validation.DeliveryQueued, Body: []byte("{}")},
		&validation.JobSpec{Repo: repo, PR: n, HeadSHA: sha, InstallationID: 1, Trigger: "opened"}); err != nil {
		t.Fatalf("record delivery: %v", err)
	}
	job, ok, err := db.Claim(ctx, "test", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := db.Finish(ctx, job.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}, Spans: spans}); err != nil {
		t.Fatalf("finish: %v", err)
	}
}

// `gilf costs --by repository` answers "what did each repository cost
// per day, by executor" as a table, JSON and CSV.
func TestCostsByRepository(t *testing.T) {
	ctx := context.Background()
	db, dir := openCostsStore(t)
	now := time.Now().UTC()
	span := func(exec string, usd *float64) store.CostSpan {
		return store.CostSpan{Lane: store.LanePrimary, Executor: exec, Started: now.Add(-time.Minute), Finished: now, USD: usd, Method: costs.MethodWallClock}
	}
	a, b := 0.5, 0.25
	finishWithSpans(t, db, "acme/web", 1, span(costs.ExecutorE2B, &a))
	finishWithSpans(t, db, "acme/web", 2, span(costs.ExecutorE2B, &b))
	finishWithSpans(t, db, "acme/api", 3, span("self-host", nil))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	run1 := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := run(ctx, Env{Stdout: &out, Stderr: &out, Getenv: func(k string) string {
			if k == "GILF_DATA_DIR" {
				return dir
			}
			return ""
		}}, append([]string{"costs"}, args...))
		return code, out.String()
	}
	code, text := run1("--by", "repository")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, text)
	}
	for _, want := range []string{"REPOSITORY", "acme/web", "managed-e2b (primary)", "$0.7500", "acme/api", "self-host (primary)", "no estimate"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	code, js := run1("--by", "repository", "--json")
	var rows []costRow
	if code != exitOK || json.Unmarshal([]byte(js), &rows) != nil || len(rows) != 2 {
		t.Fatalf("json (%d): %s", code, js)
	}
	if rows[0].Repository != "acme/api" || rows[0].USD != nil || rows[1].Repository != "acme/web" || rows[1].USD == nil || *rows[1].USD != 0.75 || rows[1].Runs != 2 {
		t.Errorf("json rows %+v", rows)
	}
	code, c := run1("--by", "repository", "--csv")
	recs, err := csv.NewReader(strings.NewReader(c)).ReadAll()
	if code != exitOK || err != nil || len(recs) != 3 || recs[0][1] != "repository" || recs[2][1] != "acme/web" || recs[2][6] != "0.75" || recs[1][6] != "" {
		t.Errorf("csv (%d, %v): %q", code, err, recs)
	}
	code, text = run1()
	if code != exitOK || strings.Contains(text, "REPOSITORY") || !strings.Contains(text, "$0.7500") {
		t.Errorf("by day (%d):\n%s", code, text)
	}
	for _, bad := range [][]string{{"--by", "week"}, {"--json", "--csv"}} {
		if code, out := run1(bad...); code != exitUsage {
			t.Errorf("%q exited %d: %s", bad, code, out)
		}
	}
	if code, out := run1("-h"); code != exitOK || !strings.Contains(out, "Estimated validation spend") {
		t.Errorf("-h (%d): %s", code, out)
	}
}
