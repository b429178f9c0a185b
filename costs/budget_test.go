package costs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// spendLog is a SpendReader over recorded spans, like the store's: it sums
// the priced spans of an executor started at or after since.
type spendLog struct {
	spans []Span
	err   error
	calls []time.Time
}

func (l *spendLog) SpendSince(_ context.Context, executor string, since time.Time) (float64, error) {
	l.calls = append(l.calls, since)
	if l.err != nil {
		return 0, l.err
	}
	var sum float64
	for _, s := range l.spans {
		if s.Executor == executor && !s.Started.Before(since) && s.USD != nil {
			sum += *s.USD
		}
	}
	return sum, nil
}

func TestMonthStart(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	tests := []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"mid month", time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{"first instant", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{"last instant", time.Date(2026, 11, 30, 23, 59, 59, 999999999, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{"local next month, UTC this month", time.Date(2026, 12, 1, 8, 0, 0, 0, tokyo), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{"january", time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MonthStart(tt.now)
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Fatalf("MonthStart(%v) = %v, want %v", tt.now, got, tt.want)
			}
		})
	}
}

func TestParseBudget(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"", DefaultE2BBudgetUSD, false},
		{"50", 50, false},
		{" 12.5 ", 12.5, false},
		{"0", 0, false},
		{"-1", 0, true},
		{"NaN", 0, true},
		{"Inf", 0, true},
		{"fifty", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBudget(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseBudget(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestBudgetGuard(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC)
	lastMonth := time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
	thisMonth := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	e2b := func(at time.Time, v float64) Span { return Span{Executor: "managed-e2b", Started: at, USD: usdp(v)} }
	tests := []struct {
		name         string
		selector     string
		spans        []Span
		wantSelector string
		wantWithheld bool
		wantReads    int
	}{
		{name: "below ceiling", selector: "managed-e2b", spans: []Span{e2b(thisMonth, 49.99)},
			wantSelector: "managed-e2b", wantReads: 1},
		{name: "exactly at ceiling", selector: "managed-e2b", spans: []Span{e2b(thisMonth, 30), e2b(thisMonth, 20)},
			wantWithheld: true, wantReads: 1},
		{name: "above ceiling", selector: "managed-e2b", spans: []Span{e2b(thisMonth, 80)},
			wantWithheld: true, wantReads: 1},
		{name: "last month's spend does not count", selector: "managed-e2b", spans: []Span{e2b(lastMonth, 500), e2b(thisMonth, 1)},
			wantSelector: "managed-e2b", wantReads: 1},
		{name: "other executors' spend does not count", selector: "managed-e2b",
			spans:        []Span{{Executor: "managed-cf-sandbox", Started: thisMonth, USD: usdp(100)}},
			wantSelector: "managed-e2b", wantReads: 1},
		{name: "unpriced spans count nothing", selector: "managed-e2b", spans: []Span{{Executor: "managed-e2b", Started: thisMonth}},
			wantSelector: "managed-e2b", wantReads: 1},
		{name: "other selector passes without a read", selector: "managed-cf-sandbox", spans: []Span{e2b(thisMonth, 80)},
			wantSelector: "managed-cf-sandbox"},
		{name: "only the exact selector is guarded", selector: "e2b", spans: []Span{e2b(thisMonth, 80)},
			wantSelector: "e2b"},
		{name: "no shadow", selector: "", spans: []Span{e2b(thisMonth, 80)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &spendLog{spans: tt.spans}
			g := BudgetGuard{CeilingUSD: 50, Reader: log, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}
			d := g.Shadow(t.Context(), tt.selector)
			if d.Selector != tt.wantSelector || d.Withheld != tt.wantWithheld {
				t.Fatalf("Shadow(%q) = %+v; want selector %q withheld %v", tt.selector, d, tt.wantSelector, tt.wantWithheld)
			}
			if d.Withheld && !strings.Contains(d.Reason, "budget") {
				t.Errorf("withheld without a reason: %+v", d)
			}
			if len(log.calls) != tt.wantReads {
				t.Fatalf("reads = %d, want %d", len(log.calls), tt.wantReads)
			}
			for _, since := range log.calls {
				if !since.Equal(thisMonth) {
					t.Errorf("read since %v, want the UTC month start %v", since, thisMonth)
				}
			}
		})
	}
}

func TestBudgetGuardReadFailure(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	g := BudgetGuard{
		CeilingUSD: 50,
		Reader:     &spendLog{err: errors.New("database is locked")},
		Logger:     logger,
		Now:        func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) },
	}
	d := g.Shadow(t.Context(), "managed-e2b")
	want := ShadowDecision{Selector: "managed-e2b", CeilingUSD: 50, Reason: "budget not checked: spend read failed"}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "database is locked") {
		t.Fatalf("read failure not logged as an error: %s", logs.String())
	}

	// No reader at all behaves like a failed read: forwarded, not withheld.
	g.Reader = nil
	if d := g.Shadow(t.Context(), "managed-e2b"); d.Withheld || d.Selector != "managed-e2b" {
		t.Fatalf("without a reader: %+v", d)
	}
}
