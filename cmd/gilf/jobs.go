package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gilf-review/gilf/excerpt"
	"github.com/gilf-review/gilf/store"
)

// Exit codes of `gilf jobs retry` and `gilf jobs cancel`, besides
// exitOK and exitUsage (usage, configuration, store errors).
const (
	// exitJobUnknown: no job has the id.
	exitJobUnknown = 4
	// exitJobState: the job is in a state it cannot move from (retry of
	// a queued or running job, cancel of a finished one, retry of a job
	// whose pull request has a newer head).
	exitJobState = 5
)

// jobLineError bounds the error or reason shown on a `gilf jobs` line.
const jobLineError = 100

const jobsUsage = `usage:
  gilf jobs [--state S] [--repo OWNER/NAME] [--limit N] [--json]
      list jobs, most recently updated first
  gilf jobs retry ID    queue a finished job (done, failed, dead, cancelled,
                        superseded) again as a re-run
  gilf jobs cancel ID   cancel a queued or running job (a running job's
                        worker stops it within seconds)

They open the store in GILF_DATA_DIR, also while gilf serve runs.
Exit codes: 0 done, 2 usage, configuration or store error,
4 no job has the id, 5 the job is in the wrong state.
`

// runJobs is `gilf jobs`: the operator's view of the queue and its two
// moves, retry and cancel.
func runJobs(ctx context.Context, env Env, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "retry", "cancel":
			return runJobMove(ctx, env, args[0], args[1:])
		case "-h", "--help", "help":
			fmt.Fprint(env.Stderr, jobsUsage)
			return exitOK
		}
	}
	fs := newFlagSet("jobs", jobsUsage, env.Stderr, false)
	state := fs.String("state", "", "only jobs in this state ("+jobStates()+")")
	repo := fs.String("repo", "", "only jobs of this repository (owner/name)")
	limit := fs.Int("limit", store.DefaultListJobs, fmt.Sprintf("at most this many jobs (1 to %d)", store.MaxListJobs))
	asJSON := fs.Bool("json", false, "print a JSON array instead of lines")
	if exit, ok := parseFlags(fs, args); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(env.Stderr, "gilf jobs: unexpected argument %q (subcommands: retry ID, cancel ID)\n", fs.Arg(0))
		return exitUsage
	}
	if *state != "" && !store.ValidState(store.State(*state)) {
		fmt.Fprintf(env.Stderr, "gilf jobs: --state %q: want one of %s\n", *state, jobStates())
		return exitUsage
	}
	if *limit < 1 || *limit > store.MaxListJobs {
		fmt.Fprintf(env.Stderr, "gilf jobs: --limit %d: want 1 to %d\n", *limit, store.MaxListJobs)
		return exitUsage
	}
	if owner, name, ok := strings.Cut(*repo, "/"); *repo != "" && (!ok || owner == "" || name == "" || strings.Contains(name, "/")) {
		fmt.Fprintf(env.Stderr, "gilf jobs: --repo %q: want owner/name, e.g. octo-org/widget (jobs are kept by their full name)\n", *repo)
		return exitUsage
	}
	db, code := openExistingStore(ctx, env, "gilf jobs")
	if db == nil {
		return code
	}
	defer db.Close()
	jobs, err := db.ListJobs(ctx, store.JobFilter{State: store.State(*state), Repo: *repo, Limit: *limit})
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf jobs: %v\n", err)
		return exitUsage
	}
	if err := writeJobs(env.Stdout, jobs, *asJSON); err != nil {
		fmt.Fprintf(env.Stderr, "gilf jobs: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// runJobMove is `gilf jobs retry ID` and `gilf jobs cancel ID`.
func runJobMove(ctx context.Context, env Env, move string, args []string) int {
	name := "gilf jobs " + move
	if len(args) != 1 {
		fmt.Fprintf(env.Stderr, "usage: %s ID\n", name)
		return exitUsage
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		fmt.Fprintf(env.Stderr, "%s: %q is not a job id (a positive number, as gilf jobs lists)\n", name, args[0])
		return exitUsage
	}
	db, code := openExistingStore(ctx, env, name)
	if db == nil {
		return code
	}
	defer db.Close()
	var st store.JobStatus
	if move == "retry" {
		st, err = db.RetryJob(ctx, id, "re-run requested by an operator")
	} else {
		st, err = db.CancelJob(ctx, id, "")
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintf(env.Stderr, "%s: no job %d\n", name, id)
		return exitJobUnknown
	case errors.Is(err, store.ErrWrongState), errors.Is(err, store.ErrNotNewest):
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return exitJobState
	case err != nil:
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return exitUsage
	}
	if move == "retry" {
		fmt.Fprintf(env.Stdout, "job %d queued again as re-run %d\n", st.ID, st.Reruns)
	} else {
		fmt.Fprintf(env.Stdout, "job %d cancelled\n", st.ID)
	}
	return exitOK
}

// openExistingStore opens the store of GILF_DATA_DIR with the job
// settings, as serve does; it does not create one. On failure it prints
// why and returns nil and the exit code.
func openExistingStore(ctx context.Context, env Env, name string) (*store.DB, int) {
	cfg, err := Load(env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: configuration:\n%v\n", name, err)
		return nil, exitUsage
	}
	db, err := openStore(ctx, cfg, newLogger(env.Stderr, cfg.Log), cfg.Jobs.StoreOptions(), true)
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return nil, exitUsage
	}
	return db, exitOK
}

// jobRow is one element of `gilf jobs --json`.
type jobRow struct {
	ID        int64     `json:"id"`
	Repo      string    `json:"repo"`
	PR        int       `json:"pr"`
	HeadSHA   string    `json:"head_sha"`
	State     string    `json:"state"`
	Attempts  int       `json:"attempts"`
	Reruns    int       `json:"reruns"`
	Triggers  int       `json:"triggers"`
	Reason    string    `json:"reason"`
	LastError string    `json:"last_error"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func writeJobs(w io.Writer, jobs []store.JobSummary, asJSON bool) error {
	if asJSON {
		rows := make([]jobRow, 0, len(jobs))
		for _, j := range jobs {
			rows = append(rows, jobRow{ID: j.ID, Repo: j.Repo, PR: j.PR, HeadSHA: j.HeadSHA, State: string(j.State),
				Attempts: j.Attempts, Reruns: j.Reruns, Triggers: j.Triggers, Reason: j.Reason, LastError: j.LastError,
				CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPULL REQUEST\tHEAD\tSTATE\tATTEMPTS\tRERUNS\tUPDATED\tERROR OR REASON")
	for _, j := range jobs {
		why := j.LastError
		if why == "" {
			why = j.Reason
		}
		fmt.Fprintf(tw, "%d\t%s#%d\t%s\t%s\t%d\t%d\t%s\t%s\n", j.ID, terminalLine(j.Repo, 80), j.PR, shortSHA(j.HeadSHA),
			j.State, j.Attempts, j.Reruns, j.UpdatedAt.UTC().Format(time.RFC3339), terminalLine(why, jobLineError))
	}
	return tw.Flush()
}

// terminalLine makes stored text (GitHub's error messages, tool output) safe
// for one terminal line: escape sequences and control characters
// dropped, whitespace runs (newlines, tabs) as one space, at most max
// runes.
func terminalLine(s string, max int) string {
	s = strings.Join(strings.Fields(excerpt.StripANSI(s)), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

func jobStates() string {
	names := make([]string, len(store.States))
	for i, s := range store.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
