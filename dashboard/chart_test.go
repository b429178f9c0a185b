package dashboard

import (
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

func TestCostChart(t *testing.T) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	usd := func(v float64) *float64 { return &v }
	c := costChart(since, 3, []store.CostDay{
		{Day: "2026-11-01", Executor: "b", Lane: "primary", Spans: 2, Priced: 2, USD: usd(0.06)},
		{Day: "2026-11-01", Executor: "a", Lane: "shadow", Spans: 1, Priced: 1, USD: usd(0.02)},
		{Day: "2026-11-03", Executor: "a", Lane: "primary", Spans: 3, Priced: 1, USD: usd(0.01)},
		{Day: "2026-10-31", Executor: "c", Lane: "primary", Spans: 1, Priced: 1, USD: usd(9)}, // outside the window
	})
	if c.Empty || len(c.Bars) != 3 || len(c.Unknown) != 1 || len(c.Legend) != 2 {
		t.Fatalf("chart: %d bars, %d unknown, %d legend", len(c.Bars), len(c.Unknown), len(c.Legend))
	}
	if got := c.Ticks[4].Label; got != "$0.100" {
		t.Errorf("top tick %q, want $0.100 (0.08 rounded up, as many decimals as the quarter ticks need)", got)
	}
	if got := c.Ticks[1].Label; got != "$0.025" {
		t.Errorf("first tick %q, want $0.025", got)
	}
	// Stacked: a's bar sits on the baseline, b's on top of it.
	plotBottom := float64(chartH - chartBottom)
	if a, b := c.Bars[0], c.Bars[1]; a.Y+a.H != plotBottom || b.Y+b.H != a.Y || a.Color == b.Color {
		t.Errorf("stack: %+v %+v", a, b)
	}
	if e := costChart(since, 7, nil); !e.Empty || len(e.Bars) != 0 || e.Ticks[4].Label != "$1.00" {
		t.Errorf("empty chart: %+v", e)
	}
}
