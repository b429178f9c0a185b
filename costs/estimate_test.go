package costs

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func usdp(v float64) *float64 { return &v }

func TestEstimate(t *testing.T) {
	cards := Cards{
		"managed-e2b": {VCPUUsdPerSec: 0.000014, MemoryGibUsdPerSec: 0.0000045},
		"free":        {VCPUUsdPerSec: 0, MemoryGibUsdPerSec: 0},
	}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		span Span
		want *float64
	}{
		{name: "priced", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0.Add(100 * time.Second), VCPU: 2, MemoryGiB: 1},
			want: usdp(100 * (2*0.000014 + 1*0.0000045))},
		{name: "fractional seconds", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0.Add(1500 * time.Millisecond), VCPU: 8, MemoryGiB: 4},
			want: usdp(1.5 * (8*0.000014 + 4*0.0000045))},
		{name: "zero duration with inputs is zero", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0, VCPU: 2, MemoryGiB: 1},
			want: usdp(0)},
		{name: "free card is zero, not null", span: Span{Executor: "free", Started: t0, Finished: t0.Add(time.Hour), VCPU: 2, MemoryGiB: 1},
			want: usdp(0)},
		{name: "no card is null", span: Span{Executor: "local", Started: t0, Finished: t0.Add(time.Minute), VCPU: 2, MemoryGiB: 1}},
		{name: "vcpu unknown is null", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0.Add(time.Minute), MemoryGiB: 1}},
		{name: "memory unknown is null", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0.Add(time.Minute), VCPU: 2}},
		{name: "negative vcpu is null", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0.Add(time.Minute), VCPU: -2, MemoryGiB: 1}},
		{name: "NaN memory is null", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0.Add(time.Minute), VCPU: 2, MemoryGiB: math.NaN()}},
		{name: "end before start is null", span: Span{Executor: "managed-e2b", Started: t0, Finished: t0.Add(-time.Second), VCPU: 2, MemoryGiB: 1}},
		{name: "no end is null", span: Span{Executor: "managed-e2b", Started: t0, VCPU: 2, MemoryGiB: 1}},
		{name: "stale usd is replaced", span: Span{Executor: "local", Started: t0, Finished: t0.Add(time.Minute), VCPU: 2, MemoryGiB: 1, USD: usdp(9)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cards.Estimate(tt.span)
			if got.Method != MethodWallClock {
				t.Errorf("method = %q, want %q", got.Method, MethodWallClock)
			}
			if (got.USD == nil) != (tt.want == nil) {
				t.Fatalf("USD = %v, want %v", fmtp(got.USD), fmtp(tt.want))
			}
			if tt.want != nil && math.Abs(*got.USD-*tt.want) > 1e-12 {
				t.Fatalf("USD = %v, want %v", *got.USD, *tt.want)
			}
		})
	}
}

func fmtp(p *float64) any {
	if p == nil {
		return "null"
	}
	return *p
}

func TestAggregate(t *testing.T) {
	day1 := time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC)
	// 00:30 on Nov 30 in UTC is still Nov 29 in New York: days are UTC.
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	day2 := time.Date(2026, 11, 29, 19, 30, 0, 0, ny) // = 2026-11-30T00:30Z
	spans := []Span{
		{Executor: "managed-e2b", Started: day2, USD: usdp(0.5)},
		{Executor: "managed-e2b", Started: day1, USD: usdp(1)},
		{Executor: "managed-e2b", Started: day1.Add(10 * time.Minute), USD: usdp(2)},
		{Executor: "local", Started: day1},
		{Executor: "managed-cf-sandbox", Started: day1, USD: usdp(0.25)},
		{Executor: "managed-cf-sandbox", Started: day1},
	}
	got := Aggregate(spans)
	want := []DayTotal{
		{Day: "2026-11-29", Executor: "local", USD: 0, Spans: 1, Unpriced: 1},
		{Day: "2026-11-29", Executor: "managed-cf-sandbox", USD: 0.25, Spans: 2, Unpriced: 1},
		{Day: "2026-11-29", Executor: "managed-e2b", USD: 3, Spans: 2},
		{Day: "2026-11-30", Executor: "managed-e2b", USD: 0.5, Spans: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if got := Aggregate(nil); len(got) != 0 {
		t.Fatalf("Aggregate(nil) = %v", got)
	}
}

func TestWriteText(t *testing.T) {
	totals := []DayTotal{
		{Day: "2026-11-29", Executor: "managed-cf-sandbox", USD: 0.25, Spans: 2, Unpriced: 1},
		{Day: "2026-11-30", Executor: "managed-e2b", USD: 3.5, Spans: 12},
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, totals); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"DAY         EXECUTOR            RUNS  UNPRICED  EST. USD\n" +
		"2026-11-29  managed-cf-sandbox  2     1         $0.2500\n" +
		"2026-11-30  managed-e2b         12    0         $3.5000\n" +
		"total                           14    1         $3.7500\n" +
		"Costs are estimates (estimate:wall-clock × rate card), not bills; unpriced runs have no card or no resource inputs.\n"
	if d := cmp.Diff(want, buf.String()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}
