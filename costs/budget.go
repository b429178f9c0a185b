package costs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

var errNoReader = errors.New("no spend reader configured")

// DefaultE2BBudgetUSD is GILF_E2B_BUDGET_USD's default monthly ceiling.
const DefaultE2BBudgetUSD = 50.0

// SpendReader reads recorded spend. The store implements it.
type SpendReader interface {
	// SpendSince sums the estimated USD of executor's recorded spans
	// started at or after since (spans without a cost count 0).
	SpendSince(ctx context.Context, executor string, since time.Time) (float64, error)
}

// ParseBudget parses GILF_E2B_BUDGET_USD: empty means
// DefaultE2BBudgetUSD; otherwise a finite number >= 0.
func ParseBudget(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultE2BBudgetUSD, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("GILF_E2B_BUDGET_USD: %q is not a non-negative number of dollars", s)
	}
	return v, nil
}

// MonthStart is the first instant of now's calendar month in UTC.
func MonthStart(now time.Time) time.Time {
	u := now.UTC()
	return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// BudgetGuard withholds the managed-e2b shadow lane once this month's
// recorded managed-e2b spend reaches the ceiling. It is not a reservation
// nor a hard cap: in-flight spend is not counted, and when the spend
// cannot be read the lane goes through unchanged (and an error is
// logged).
type BudgetGuard struct {
	CeilingUSD float64
	Reader     SpendReader
	Logger     *slog.Logger
	Now        func() time.Time
}

// ShadowDecision says whether the shadow selector goes through.
type ShadowDecision struct {
	// Selector is the shadow executor to start; empty when withheld.
	Selector string `json:"selector"`
	Withheld bool   `json:"withheld"`
	// SpentUSD is the month's recorded spend when it was read.
	SpentUSD   float64 `json:"spentUsd"`
	CeilingUSD float64 `json:"ceilingUsd"`
	// Reason says in plain words why the lane was withheld, or why the
	// guard could not decide.
	Reason string `json:"reason,omitempty"`
}

// Shadow applies the guard to a shadow selector. Only the exact
// "managed-e2b" selector (canonical name) is guarded; any other passes
// unchanged without a read.
func (g BudgetGuard) Shadow(ctx context.Context, selector string) ShadowDecision {
	d := ShadowDecision{Selector: selector, CeilingUSD: g.CeilingUSD}
	if selector != ExecutorE2B {
		return d
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	since := MonthStart(now())
	var spent float64
	err := errNoReader
	if g.Reader != nil {
		spent, err = g.Reader.SpendSince(ctx, ExecutorE2B, since)
	}
	if err != nil {
		if g.Logger != nil {
			g.Logger.ErrorContext(ctx, "e2b budget: spend read failed; shadow lane forwarded unchanged",
				logkey.Executor, ExecutorE2B, "since", since, logkey.Err, err)
		}
		d.Reason = "budget not checked: spend read failed"
		return d
	}
	d.SpentUSD = spent
	if spent >= g.CeilingUSD {
		d.Selector, d.Withheld = "", true
		d.Reason = fmt.Sprintf("managed-e2b shadow withheld: estimated spend $%.2f since %s reached the $%.2f monthly budget",
			spent, since.Format("2006-01-02"), g.CeilingUSD)
	}
	return d
}
