package costs

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
)

// DayTotal is the estimated spend of one executor on one UTC day.
type DayTotal struct {
	Day string `json:"day"` // YYYY-MM-DD, UTC, of the span's start
	// Repository is owner/name when the totals are by repository; when
	// any total has one, WriteText adds a REPOSITORY column.
	Repository string  `json:"repository,omitempty"`
	Executor   string  `json:"executor"`
	USD        float64 `json:"usd"`
	// Spans counts every span; Unpriced counts those whose cost is null
	// (they add nothing to USD).
	Spans    int `json:"spans"`
	Unpriced int `json:"unpriced"`
	// InputTokens and OutputTokens sum the model spans' token counts (0
	// for an executor).
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
}

// Aggregate sums spans by UTC day and executor, ordered by day then
// executor.
func Aggregate(spans []Span) []DayTotal {
	type k struct{ day, exec string }
	idx := map[k]int{}
	var out []DayTotal
	for _, s := range spans {
		key := k{s.Started.UTC().Format("2006-01-02"), s.Executor}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, DayTotal{Day: key.day, Executor: key.exec})
		}
		out[i].Spans++
		out[i].InputTokens += s.InputTokens
		out[i].OutputTokens += s.OutputTokens
		if s.USD == nil {
			out[i].Unpriced++
			continue
		}
		out[i].USD += *s.USD
	}
	slices.SortFunc(out, func(a, b DayTotal) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Executor, b.Executor))
	})
	return out
}

// WriteText writes totals as the table `gilf costs` prints, with a total
// line and the reminder that these are estimates, and how each was made.
func WriteText(w io.Writer, totals []DayTotal) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	byRepo := slices.ContainsFunc(totals, func(t DayTotal) bool { return t.Repository != "" })
	repo := func(s string) string {
		if !byRepo {
			return ""
		}
		return s + "\t"
	}
	fmt.Fprintln(tw, "DAY\t"+repo("REPOSITORY")+"EXECUTOR\tRUNS\tUNPRICED\tEST. USD\tTOKENS IN/OUT")
	var sum DayTotal
	for _, t := range totals {
		amount := usd(t.USD)
		if t.Spans > 0 && t.Unpriced == t.Spans {
			amount = "no estimate" // never "$0.0000" for runs nobody priced
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%d\t%d\t%s\t%s\n", t.Day, repo(t.Repository), t.Executor, t.Spans, t.Unpriced, amount, tokens(t))
		sum.USD += t.USD
		sum.Spans += t.Spans
		sum.Unpriced += t.Unpriced
		sum.InputTokens += t.InputTokens
		sum.OutputTokens += t.OutputTokens
	}
	fmt.Fprintf(tw, "total\t%s\t%d\t%d\t%s\t%s\n", repo(""), sum.Spans, sum.Unpriced, usd(sum.USD), tokens(sum))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write cost table: %w", err)
	}
	_, err := fmt.Fprintln(w, "Costs are estimates, not bills: executors by "+MethodWallClock+" × rate card, models by "+
		MethodTokens+" × model card; unpriced runs have no card, no resource inputs or no token counts.")
	if err != nil {
		return fmt.Errorf("write cost table: %w", err)
	}
	return nil
}

// tokens shows a row's input/output tokens, "-" for a row of none.
func tokens(t DayTotal) string {
	if t.InputTokens == 0 && t.OutputTokens == 0 {
		return "-"
	}
	return strconv.FormatInt(t.InputTokens, 10) + "/" + strconv.FormatInt(t.OutputTokens, 10)
}

func usd(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 4, 64) }
