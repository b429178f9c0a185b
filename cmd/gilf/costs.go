package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/store"
)

const costsUsage = `usage: gilf costs [--since D] [--by day|repository] [--json | --csv]

Estimated validation spend recorded in the store (GILF_DATA_DIR, or
GILF_DATABASE_URL): by UTC day, executor and lane, or with --by repository
also by the repository of each job. Costs are estimates (wall-clock seconds
× rate card, tokens × model card), not bills; a row nobody could price says
"no estimate", never $0. It reads the store while gilf serve runs.

`

// runCosts is `gilf costs`: estimated spend by UTC day, executor and
// lane (and repository, --by repository) from the store, the data a cost
// dashboard reads.
func runCosts(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet("costs", costsUsage, env.Stderr, true)
	since := fs.String("since", "", "first UTC day to include, YYYY-MM-DD, or a duration back from now (720h); default: the start of this month")
	by := fs.String("by", "day", "group by day (day × executor × lane) or repository (repository × day × executor × lane)")
	asJSON := fs.Bool("json", false, "print JSON rows instead of a table")
	asCSV := fs.Bool("csv", false, "print CSV (a header line, then one row per group; an unknown cost is an empty cell)")
	if exit, ok := parseFlags(fs, args); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(env.Stderr, "gilf costs: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *by != "day" && *by != "repository" {
		fmt.Fprintf(env.Stderr, "gilf costs: --by %q: want day or repository\n", *by)
		return exitUsage
	}
	if *asJSON && *asCSV {
		fmt.Fprintln(env.Stderr, "gilf costs: --json and --csv: choose one")
		return exitUsage
	}
	from, err := parseSince(*since, time.Now())
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf costs: %v\n", err)
		return exitUsage
	}
	cfg, err := Load(env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf costs: configuration:\n%v\n", err)
		return exitUsage
	}
	log := newLogger(env.Stderr, cfg.Log)
	db, err := openStore(ctx, cfg, log, store.Options{}, true)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf costs: %v\n", err)
		return exitUsage
	}
	defer db.Close()
	var rows []costs.Row
	if *by == "repository" {
		rows, err = repoCostRows(ctx, db, from)
	} else {
		rows, err = dayCostRows(ctx, db, from)
	}
	if err == nil {
		switch {
		case *asCSV:
			err = costs.WriteCSV(env.Stdout, rows, *by == "repository")
		default:
			err = writeCosts(env.Stdout, rows, *asJSON)
		}
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf costs: %v\n", err)
		return exitUsage
	}
	return exitOK
}

func dayCostRows(ctx context.Context, db *store.DB, from time.Time) ([]costs.Row, error) {
	days, err := db.CostsByDay(ctx, from)
	if err != nil {
		return nil, err
	}
	out := make([]costs.Row, 0, len(days))
	for _, r := range days {
		out = append(out, costs.Row{Day: r.Day, Executor: r.Executor, Lane: string(r.Lane), Spans: r.Spans, Priced: r.Priced,
			USD: r.USD, Seconds: r.Seconds, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens})
	}
	return out, nil
}

func repoCostRows(ctx context.Context, db *store.DB, from time.Time) ([]costs.Row, error) {
	days, err := db.CostsByRepo(ctx, from)
	if err != nil {
		return nil, err
	}
	out := make([]costs.Row, 0, len(days))
	for _, r := range days {
		out = append(out, costs.Row{Day: r.Day, Repository: r.Repo, Executor: r.Executor, Lane: string(r.Lane), Spans: r.Spans,
			Priced: r.Priced, USD: r.USD, Seconds: r.Seconds, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens})
	}
	return out, nil
}

// parseSince reads --since: a UTC day, a duration back from now, or
// empty for the start of the current UTC month.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return costs.MonthStart(now), nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.UTC); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want YYYY-MM-DD or a positive duration such as 720h", s)
}

// costRow is one line of `gilf costs --json`.
type costRow struct {
	Day string `json:"day"`
	// Repository is set with --by repository.
	Repository string   `json:"repository,omitempty"`
	Executor   string   `json:"executor"`
	Lane       string   `json:"lane"`
	Runs       int      `json:"runs"`
	Unpriced   int      `json:"unpriced"`
	USD        *float64 `json:"usd"` // null: no run of the row had an estimate
	Seconds    float64  `json:"seconds"`
	// InputTokens and OutputTokens are the semantic lane's, summed.
	InputTokens  int64  `json:"inputTokens,omitempty"`
	OutputTokens int64  `json:"outputTokens,omitempty"`
	Method       string `json:"method"` // estimate:wall-clock, or estimate:tokens for the semantic lane
}

func writeCosts(w io.Writer, rows []costs.Row, asJSON bool) error {
	out := make([]costRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, costRow{Day: r.Day, Repository: r.Repository, Executor: r.Executor, Lane: r.Lane, Runs: r.Spans,
			Unpriced: r.Spans - r.Priced, USD: r.USD, Seconds: r.Seconds,
			InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, Method: costs.MethodFor(r.Lane)})
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	totals := make([]costs.DayTotal, 0, len(out))
	for _, r := range out {
		t := costs.DayTotal{Day: r.Day, Repository: r.Repository, Executor: r.Executor + " (" + r.Lane + ")", Spans: r.Runs, Unpriced: r.Unpriced,
			InputTokens: r.InputTokens, OutputTokens: r.OutputTokens}
		if r.USD != nil {
			t.USD = *r.USD
		}
		totals = append(totals, t)
	}
	return costs.WriteText(w, totals)
}
