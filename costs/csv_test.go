package costs

import (
	"bytes"
	"encoding/csv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteCSV(t *testing.T) {
	usd := 0.125
	rows := []Row{
		{Day: "2026-12-01", Repository: "acme/web", Executor: "managed-e2b", Lane: LanePrimary, Spans: 2, Priced: 2, USD: &usd, Seconds: 61.5},
		{Day: "2026-12-01", Repository: "=cmd|' /c calc'!A0", Executor: "model:m", Lane: LaneSemantic, Spans: 1, InputTokens: 10, OutputTokens: 5},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows, true); err != nil {
		t.Fatal(err)
	}
	got, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		CSVHeader(true),
		{"2026-12-01", "acme/web", "managed-e2b", "primary", "2", "2", "0.125", "61.500", "0", "0", MethodWallClock},
		{"2026-12-01", "'=cmd|' /c calc'!A0", "model:m", "semantic", "1", "0", "", "0.000", "10", "5", MethodTokens},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("by repository (-want +got):\n%s", d)
	}
	b.Reset()
	if err := WriteCSV(&b, rows[:1], false); err != nil {
		t.Fatal(err)
	}
	got, err = csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want = [][]string{
		{"day", "executor", "lane", "spans", "priced_spans", "usd", "seconds", "input_tokens", "output_tokens", "method"},
		{"2026-12-01", "managed-e2b", "primary", "2", "2", "0.125", "61.500", "0", "0", MethodWallClock},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("by day (-want +got):\n%s", d)
	}
}
