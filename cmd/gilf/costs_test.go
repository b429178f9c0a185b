package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/store"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":           time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"2026-10-05": time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC),
		"48h":        now.Add(-48 * time.Hour),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-5h", "2026-13-01", "0s"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("parseSince(%q) accepted", bad)
		}
	}
}

// TestCostsCommand records two runs' spans in a real store and reads them
// back through `gilf costs`, as table and as JSON.
func TestCostsCommand(t *testing.T) {
	ctx := context.Background()
	db, dir := openCostsStore(t)
	now := time.Now().UTC()
	usd, modelUSD := 0.0046, 0.0014
	in, out := int64(1234), int64(567)
	for i, spans := range [][]store.CostSpan{
		{{Lane: store.LanePrimary, Executor: costs.ExecutorE2B, Started: now.Add(-time.Minute), Finished: now, USD: &usd, Method: costs.MethodWallClock}},
		{{Lane: store.LanePrimary, Executor: "local", Started: now.Add(-time.Minute), Finished: now, Method: costs.MethodWallClock},
			{Lane: store.LaneSemantic, Executor: "model:m", Started: now.Add(-time.Second), Finished: now,
				InputTokens: &in, OutputTokens: &out, USD: &modelUSD, Method: costs.MethodTokens}},
	} {
		finishWithSpans(t, db, "o/r", i+1, spans...)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	env := func(out *bytes.Buffer) Env {
		return Env{Stdout: out, Stderr: out, Getenv: func(k string) string {
			if k == "GILF_DATA_DIR" {
				return dir
			}
			return ""
		}}
	}
	var text bytes.Buffer
	if code := run(ctx, env(&text), []string{"costs"}); code != exitOK {
		t.Fatalf("gilf costs exited %d: %s", code, text.String())
	}
	for _, want := range []string{"managed-e2b (primary)", "$0.0046", "local (primary)", "no estimate", "estimates",
		"model:m (semantic)", "$0.0014", "1234/567", "estimate:tokens"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if code := run(ctx, env(&js), []string{"costs", "--json", "--since", "24h"}); code != exitOK {
		t.Fatalf("gilf costs --json exited %d: %s", code, js.String())
	}
	var rows []costRow
	if err := json.Unmarshal(js.Bytes(), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, js.String())
	}
	if len(rows) != 3 {
		t.Fatalf("rows = %+v", rows)
	}
	for _, r := range rows {
		if (r.Executor == "local") != (r.USD == nil) {
			t.Errorf("row %+v: a local run has no estimate (null), an e2b one has a number", r)
		}
		want := costRow{Day: r.Day, Executor: r.Executor, Lane: "primary", Runs: 1, USD: r.USD, Seconds: r.Seconds, Method: costs.MethodWallClock}
		switch r.Executor {
		case "local":
			want.Unpriced = 1
		case "model:m":
			want.Lane, want.InputTokens, want.OutputTokens, want.Method = "semantic", 1234, 567, costs.MethodTokens
		}
		if d := cmp.Diff(want, r); d != "" {
			t.Errorf("row (-want +got):\n%s", d)
		}
	}
	var bad bytes.Buffer
	if code := run(ctx, env(&bad), []string{"costs", "--since", "soon"}); code != exitUsage {
		t.Errorf("bad --since exited %d", code)
	}
}

func TestMigrateCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var out bytes.Buffer
	env := Env{Stdout: &out, Stderr: &out, Getenv: func(k string) string {
		if k == "GILF_DATA_DIR" {
			return dir
		}
		return ""
	}}
	for range 2 { // creating, then already current
		out.Reset()
		if code := run(context.Background(), env, []string{"migrate"}); code != exitOK {
			t.Fatalf("gilf migrate exited %d: %s", code, out.String())
		}
		var v int
		if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "schema version"):], "schema version %d", &v); err != nil || v < 1 {
			t.Fatalf("output %q names no applied schema version (%v)", out.String(), err)
		}
	}
	if code := run(context.Background(), env, []string{"migrate", "extra"}); code != exitUsage {
		t.Errorf("gilf migrate with an argument exited %d, want %d", code, exitUsage)
	}
}
