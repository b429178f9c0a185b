package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/store"
)

// Costs by repository: the costs page's table and chart of the top
// repositories, ?group=repository of /api/v1/costs, and the CSV download.

// groupRepository is ?group=repository; the default groups by day.
const (
	groupDay        = "day"
	groupRepository = "repository"
)

// TopRepos is how many repositories the costs page's chart shows, the
// most expensive first.
const TopRepos = 10

type costQuery struct {
	days  int
	since time.Time
	group string
}

func (h *Handler) parseCostQuery(q url.Values) (costQuery, error) {
	days, err := parseDays(q)
	if err != nil {
		return costQuery{}, err
	}
	cq := costQuery{days: days, since: h.since(days), group: groupDay}
	switch g := q.Get("group"); g {
	case "", groupDay:
	case groupRepository:
		cq.group = g
	default:
		return costQuery{}, badRequest{"group: want day or repository"}
	}
	return cq, nil
}

// repoTotals sums rows by repository, the most known cost first (then
// the most spans, then by name).
func repoTotals(rows []store.RepoCostDay) []costTotal {
	out := sumCosts(rows, func(r store.RepoCostDay) string { return r.Repo },
		func(r store.RepoCostDay) store.CostDay { return r.CostDay })
	known := func(t costTotal) float64 {
		if t.USD == nil {
			return -1
		}
		return *t.USD
	}
	slices.SortFunc(out, func(a, b costTotal) int {
		return cmp.Or(cmp.Compare(known(b), known(a)), cmp.Compare(b.Spans, a.Spans), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// repoChart is the horizontal bar chart of the top repositories' known
// cost.
type repoChart struct {
	W, H  int
	Bars  []repoBar
	Empty bool
}

type repoBar struct {
	Y, W       float64
	LabelY     float64
	Repo, Text string
	Title      string
}

// Geometry of the repository chart, in SVG user units.
const (
	repoChartW     = 480
	repoRowH       = 40
	repoBarMaxW    = 260
	repoLabelChars = 56
)

func newRepoChart(totals []costTotal) repoChart {
	top := totals[:min(len(totals), TopRepos)]
	c := repoChart{W: repoChartW, H: max(len(top), 1)*repoRowH + 8, Empty: len(top) == 0}
	maxUSD := 0.0
	for _, t := range top {
		if t.USD != nil {
			maxUSD = max(maxUSD, *t.USD)
		}
	}
	for i, t := range top {
		b := repoBar{LabelY: float64(i*repoRowH) + 17, Y: float64(i*repoRowH) + 23, Repo: t.Key}
		if len([]rune(b.Repo)) > repoLabelChars {
			b.Repo = string([]rune(b.Repo)[:repoLabelChars-1]) + "…"
		}
		amount := "no estimate"
		if t.USD != nil {
			amount = fmt.Sprintf("$%.4f", *t.USD)
			if maxUSD > 0 {
				b.W = max(repoBarMaxW**t.USD/maxUSD, 1)
			}
		}
		if un := t.Spans - t.Priced; un > 0 {
			amount += fmt.Sprintf(" + %d unpriced", un)
		}
		b.Text = amount
		b.Title = fmt.Sprintf("%s: %s over %d span(s)", t.Key, amount, t.Spans)
		c.Bars = append(c.Bars, b)
	}
	return c
}

// costsCSV is the CSV download of the costs page's rows: ?group=day (the
// default) or ?group=repository, ?days=N.
func (h *Handler) costsCSV(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authenticate(r); !ok {
		h.showLogin(w, r, http.StatusUnauthorized, "")
		return
	}
	cq, err := h.parseCostQuery(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var rows []costs.Row
	if cq.group == groupRepository {
		rs, err := h.cfg.Reader.CostsByRepo(r.Context(), cq.since)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, c := range rs {
			rows = append(rows, costRow(c.Repo, c.CostDay))
		}
	} else {
		ds, err := h.cfg.Reader.CostsByDay(r.Context(), cq.since)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, c := range ds {
			rows = append(rows, costRow("", c))
		}
	}
	name := "gilf-costs-by-" + cq.group + "-" + cq.since.Format(time.DateOnly) + "-" + strconv.Itoa(cq.days) + "d.csv"
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	if err := costs.WriteCSV(w, rows, cq.group == groupRepository); err != nil {
		h.cfg.Logger.Warn("costs csv not written", logkey.Err, err)
	}
}

func costRow(repo string, c store.CostDay) costs.Row {
	return costs.Row{Day: c.Day, Repository: repo, Executor: c.Executor, Lane: string(c.Lane), Spans: c.Spans, Priced: c.Priced,
		USD: c.USD, Seconds: c.Seconds, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens}
}
