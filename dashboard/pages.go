package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// The HTML pages.

// outcomes are the run outcomes the filter offers.
func outcomes() []validation.Outcome {
	return []validation.Outcome{validation.OutcomePassed, validation.OutcomeFailed, validation.OutcomeGap,
		validation.OutcomeSkipped, validation.OutcomeRefused, validation.OutcomeInconclusive, validation.OutcomeError}
}

// runFilter is the runs page's and API's query, as typed and as parsed.
type runFilter struct {
	Repo, Outcome, Executor, From, To string
	Query                             store.RunQuery
}

func parseRunFilter(q url.Values) (runFilter, error) {
	f := runFilter{Repo: strings.TrimSpace(q.Get("repo")), Outcome: q.Get("outcome"),
		Executor: strings.TrimSpace(q.Get("executor")), From: q.Get("from"), To: q.Get("to")}
	f.Query = store.RunQuery{Repo: f.Repo, Outcome: validation.Outcome(f.Outcome), Executor: f.Executor}
	if f.Outcome != "" {
		ok := false
		for _, o := range outcomes() {
			ok = ok || string(o) == f.Outcome
		}
		if !ok {
			return f, badRequest{"unknown outcome " + strconv.Quote(f.Outcome)}
		}
	}
	var err error
	if f.From != "" {
		if f.Query.From, err = time.Parse(time.DateOnly, f.From); err != nil {
			return f, badRequest{"from: want a date YYYY-MM-DD"}
		}
	}
	if f.To != "" {
		to, err := time.Parse(time.DateOnly, f.To)
		if err != nil {
			return f, badRequest{"to: want a date YYYY-MM-DD"}
		}
		f.Query.To = to.AddDate(0, 0, 1) // the whole day
	}
	if v := q.Get("before"); v != "" {
		if f.Query.Before, err = strconv.ParseInt(v, 10, 64); err != nil || f.Query.Before <= 0 {
			return f, badRequest{"before: want a run id"}
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Query.Limit, err = strconv.Atoi(v); err != nil || f.Query.Limit <= 0 {
			return f, badRequest{"limit: want a positive number"}
		}
	}
	return f, nil
}

// values is the filter as a query string, for the next page's link.
func (f runFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"repo": f.Repo, "outcome": f.Outcome, "executor": f.Executor, "from": f.From, "to": f.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Query.Limit != 0 {
		v.Set("limit", strconv.Itoa(f.Query.Limit))
	}
	return v
}

type runsData struct {
	Filter   runFilter
	Outcomes []validation.Outcome
	Runs     []store.RunSummary
	Next     string // the older page's URL; empty on the last page
	First    string // the newest page's URL when this is not it
}

func (h *Handler) runsPage(r *http.Request, v *view) error {
	f, err := parseRunFilter(r.URL.Query())
	if err != nil {
		return err
	}
	page, err := h.cfg.Reader.RunList(r.Context(), f.Query)
	if err != nil {
		return err
	}
	d := runsData{Filter: f, Outcomes: outcomes(), Runs: page.Runs}
	if page.Next != 0 {
		q := f.values()
		q.Set("before", strconv.FormatInt(page.Next, 10))
		d.Next = "/dashboard?" + q.Encode()
	}
	if f.Query.Before != 0 {
		d.First = "/dashboard?" + f.values().Encode()
	}
	v.Template, v.Title, v.Active, v.Data = "runs", "Runs", "runs", d
	return nil
}

// pathID is the {id} of the path.
func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, errNotFound
	}
	return id, nil
}

// evidenceLink is one evidence reference of a finding: a link to the
// dashboard's evidence route or an http(s) URL, else its key as text.
type evidenceLink struct {
	Kind, Key, URL string
}

type findingView struct {
	validation.Finding
	Links []evidenceLink
}

type runData struct {
	Run      store.RunView
	Findings []findingView
	// Links are the artifacts' links, by index ("" for none).
	Links []string
}

func (h *Handler) runPage(r *http.Request, v *view) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	run, err := h.cfg.Reader.RunView(r.Context(), id)
	if err != nil {
		return err
	}
	d := runData{Run: run}
	for _, f := range run.Record.Findings {
		fv := findingView{Finding: f}
		for _, e := range f.Evidence {
			fv.Links = append(fv.Links, evidenceLink{Kind: e.Kind, Key: e.Key, URL: h.evidenceURL(e)})
		}
		d.Findings = append(d.Findings, fv)
	}
	for _, a := range run.Artifacts {
		d.Links = append(d.Links, h.artifactURL(a))
	}
	v.Template, v.Title, v.Active, v.Data = "run", "Run "+strconv.FormatInt(id, 10), "runs", d
	return nil
}

// parseDays reads ?days=N (1–366), the window of the stats pages.
func parseDays(q url.Values) (int, error) {
	v := q.Get("days")
	if v == "" {
		return DefaultCostDays, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 366 {
		return 0, badRequest{"days: want 1 to 366"}
	}
	return n, nil
}

// since is the start of the UTC day days-1 days before now.
func (h *Handler) since(days int) time.Time {
	now := h.cfg.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return today.AddDate(0, 0, -(days - 1))
}

type costsData struct {
	Days       int
	Since      time.Time
	Rows       []store.CostDay
	Totals     []costTotal
	Chart      chart
	RepoRows   []store.RepoCostDay
	RepoTotals []costTotal
	RepoChart  repoChart
	TopRepos   int
}

func (h *Handler) costsPage(r *http.Request, v *view) error {
	cq, err := h.parseCostQuery(r.URL.Query())
	if err != nil {
		return err
	}
	rows, err := h.cfg.Reader.CostsByDay(r.Context(), cq.since)
	if err != nil {
		return err
	}
	repos, err := h.cfg.Reader.CostsByRepo(r.Context(), cq.since)
	if err != nil {
		return err
	}
	rt := repoTotals(repos)
	v.Template, v.Title, v.Active = "costs", "Costs", "costs"
	v.Data = costsData{Days: cq.days, Since: cq.since, Rows: rows, Totals: totals(rows), Chart: costChart(cq.since, cq.days, rows),
		RepoRows: repos, RepoTotals: rt, RepoChart: newRepoChart(rt), TopRepos: TopRepos}
	return nil
}

type refusalsData struct {
	Days  int
	Codes []store.RefusalCount
	Total int
}

func (h *Handler) refusalsPage(r *http.Request, v *view) error {
	days, err := parseDays(r.URL.Query())
	if err != nil {
		return err
	}
	codes, err := h.cfg.Reader.RefusalCounts(r.Context(), h.since(days))
	if err != nil {
		return err
	}
	d := refusalsData{Days: days, Codes: codes}
	for _, c := range codes {
		d.Total += c.Runs
	}
	v.Template, v.Title, v.Active, v.Data = "refusals", "Refusals", "refusals", d
	return nil
}

type shadowData struct {
	Days  int
	Pairs []store.ShadowPair
}

func (h *Handler) shadowPage(r *http.Request, v *view) error {
	days, err := parseDays(r.URL.Query())
	if err != nil {
		return err
	}
	pairs, err := h.cfg.Reader.ShadowPairs(r.Context(), h.since(days))
	if err != nil {
		return err
	}
	v.Template, v.Title, v.Active, v.Data = "shadow", "Shadow agreement", "shadow", shadowData{Days: days, Pairs: pairs}
	return nil
}
