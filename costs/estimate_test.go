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

func TestEstimateTokens(t *testing.T) {
	cards := Cards{
		"model:gpt-4.1-mini": {InputUsdPerMTok: 0.4, OutputUsdPerMTok: 1.6},
		"model:free":         {},
		"model:unknown":      {InputUsdPerMTok: 1, OutputUsdPerMTok: 1}, // ParseRates refuses it; never priced anyway
		"managed-e2b":        {VCPUUsdPerSec: 0.000014, MemoryGibUsdPerSec: 0.0000045},
	}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	span := func(exec string, in, out int64) Span {
		return Span{Lane: LaneSemantic, Executor: exec, Started: t0, Finished: t0.Add(2 * time.Second), InputTokens: in, OutputTokens: out}
	}
	tests := []struct {
		name string
		span Span
		want *float64
	}{
		{name: "priced", span: span("model:gpt-4.1-mini", 1234, 567), want: usdp(1234/1e6*0.4 + 567/1e6*1.6)},
		{name: "a million of each", span: span("model:gpt-4.1-mini", 1_000_000, 1_000_000), want: usdp(2.0)},
		{name: "input only", span: span("model:gpt-4.1-mini", 1000, 0), want: usdp(1000 / 1e6 * 0.4)},
		{name: "output only", span: span("model:gpt-4.1-mini", 0, 1000), want: usdp(1000 / 1e6 * 1.6)},
		{name: "free card is zero, not null", span: span("model:free", 10, 10), want: usdp(0)},
		{name: "no end still priced: tokens, not time", span: Span{Lane: LaneSemantic, Executor: "model:gpt-4.1-mini", InputTokens: 1e6}, want: usdp(0.4)},
		{name: "zero tokens with a card is null", span: span("model:gpt-4.1-mini", 0, 0)},
		{name: "no card is null", span: span("model:gpt-5", 1234, 567)},
		{name: "model:unknown is never priced", span: span("model:unknown", 1234, 567)},
		{name: "negative input is null", span: span("model:gpt-4.1-mini", -1, 567)},
		{name: "negative output is null", span: span("model:gpt-4.1-mini", 1234, -1)},
		{name: "an executor card prices no tokens", span: span("managed-e2b", 1234, 567)},
		{name: "stale usd is replaced", span: Span{Executor: "model:gpt-5", InputTokens: 1, USD: usdp(9)}},
		{name: "a dated snapshot takes its model's card", span: span("model:gpt-4.1-mini-2025-04-14", 1e6, 0), want: usdp(0.4)},
		{name: "a four-digit snapshot too", span: span("model:gpt-4.1-mini-0613", 1e6, 0), want: usdp(0.4)},
		{name: "another model is not a snapshot", span: span("model:gpt-4.1-mini-high", 1e6, 0)},
		{name: "a date alone names no model", span: span("model:2025-04-14", 1e6, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cards.EstimateTokens(tt.span)
			if got.Method != MethodTokens {
				t.Errorf("method = %q, want %q", got.Method, MethodTokens)
			}
			if got.InputTokens != tt.span.InputTokens || got.OutputTokens != tt.span.OutputTokens || got.Executor != tt.span.Executor {
				t.Errorf("span changed beyond its price: %+v", got)
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

func TestMethodFor(t *testing.T) {
	for lane, want := range map[string]string{LanePrimary: MethodWallClock, LaneShadow: MethodWallClock, LaneSemantic: MethodTokens} {
		if got := MethodFor(lane); got != want {
			t.Errorf("MethodFor(%q) = %q, want %q", lane, got, want)
		}
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
		{Lane: LaneSemantic, Executor: "model:m", Started: day1, InputTokens: 1000, OutputTokens: 50, USD: usdp(0.01)},
		{Lane: LaneSemantic, Executor: "model:m", Started: day1, InputTokens: 200, OutputTokens: 7},
	}
	got := Aggregate(spans)
	want := []DayTotal{
		{Day: "2026-11-29", Executor: "local", USD: 0, Spans: 1, Unpriced: 1},
		{Day: "2026-11-29", Executor: "managed-cf-sandbox", USD: 0.25, Spans: 2, Unpriced: 1},
		{Day: "2026-11-29", Executor: "managed-e2b", USD: 3, Spans: 2},
		{Day: "2026-11-29", Executor: "model:m", USD: 0.01, Spans: 2, Unpriced: 1, InputTokens: 1200, OutputTokens: 57},
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
		{Day: "2026-11-30", Executor: "model:gpt-4.1-mini", USD: 0.0014, Spans: 1, InputTokens: 1234, OutputTokens: 567},
		{Day: "2026-11-30", Executor: "model:unknown", Spans: 1, Unpriced: 1},
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, totals); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"DAY         EXECUTOR            RUNS  UNPRICED  EST. USD     TOKENS IN/OUT\n" +
		"2026-11-29  managed-cf-sandbox  2     1         $0.2500      -\n" +
		"2026-11-30  managed-e2b         12    0         $3.5000      -\n" +
		"2026-11-30  model:gpt-4.1-mini  1     0         $0.0014      1234/567\n" +
		"2026-11-30  model:unknown       1     1         no estimate  -\n" +
		"total                           16    2         $3.7514      1234/567\n" +
		"Costs are estimates, not bills: executors by estimate:wall-clock × rate card, models by estimate:tokens × model card; unpriced runs have no card, no resource inputs or no token counts.\n"
	if d := cmp.Diff(want, buf.String()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}
