package review

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// The command worker's own limits, with its store and GitHub as small
// in-memory stand-ins (the end-to-end test, cmd/gilf
// TestServeE2ECommands, runs it against the real store and the GitHub
// stand-in).
type cmdQueue struct {
	pending []CommandDelivery
	done    map[string]string
}

func (q *cmdQueue) Next(ctx context.Context, since, retryBefore time.Time) (CommandDelivery, bool, error) {
	if len(q.pending) == 0 {
		return CommandDelivery{}, false, nil
	}
	c := q.pending[0]
	q.pending = q.pending[1:]
	return c, true, nil
}

func (q *cmdQueue) Done(ctx context.Context, c CommandDelivery, status validation.DeliveryStatus, reason string) error {
	q.done[c.ID] = string(status) + ": " + reason
	return nil
}

type cmdRuns struct {
	act    Activity
	reruns int
}

func (r *cmdRuns) Activity(ctx context.Context, j Job, since time.Time) (Activity, error) {
	return r.act, nil
}
func (r *cmdRuns) Rerun(ctx context.Context, j Job, reason string) (int64, bool, bool, error) {
	r.reruns++
	return 7, true, true, nil
}
func (r *cmdRuns) LastRecord(ctx context.Context, j Job) (validation.Record, bool, error) {
	return validation.Record{}, false, nil
}

type cmdGitHub struct {
	asked, reacted int
	comments       []string
}

func (g *cmdGitHub) Permission(ctx context.Context, j Job, login string) (string, error) {
	g.asked++
	return "write", nil
}
func (g *cmdGitHub) React(ctx context.Context, j Job, id int64) error { g.reacted++; return nil }
func (g *cmdGitHub) Comment(ctx context.Context, j Job, body string) error {
	g.comments = append(g.comments, body)
	return nil
}

func commandBody(body string) []byte {
	return fmt.Appendf(nil, `{"comment":{"id":5,"body":%q,"user":{"login":"writer","type":"User"}}}`, body)
}

func TestCommandBudgets(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	runsAt := func(n int) []time.Time {
		var out []time.Time
		for i := range n {
			out = append(out, now.Add(-50*time.Minute+time.Duration(i)*time.Minute))
		}
		return out
	}
	tests := []struct {
		name     string
		body     string
		act      Activity
		perHour  int
		want     string // the recorded status and reason start with it
		reruns   int
		comments int
		reply    string
	}{
		{"commands below the cap: answered", "/gilf help", Activity{Commands: MaxCommandsPerHour - 1}, 0, "done: help", 0, 1, "`rerun`"},
		{"commands at the cap: not answered", "/gilf help", Activity{Commands: MaxCommandsPerHour}, 0, "ignored: over 30 answered commands", 0, 0, ""},
		{"runs below the budget: re-run", "/gilf rerun", Activity{Runs: runsAt(DefaultRunsPerHour - 1)}, 0, "done: rerun: job 7 queued again", 1, 0, ""},
		{"runs at the default budget: refused", "/gilf rerun", Activity{Runs: runsAt(DefaultRunsPerHour)}, 0, "done: over budget: 6 runs", 0, 1,
			"It can run again after 10:10 UTC (in 10 minutes)"},
		{"a set budget of 1, one run: refused", "/gilf review", Activity{Runs: runsAt(1)}, 1, "done: over budget: 1 runs", 0, 1,
			"gilf runs at most 1 per pull request per hour"},
		{"over the budget, the oldest that frees room is named", "/gilf rerun", Activity{Runs: runsAt(3)}, 2, "done: over budget: 3 runs", 0, 1,
			"after 10:11 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &cmdQueue{pending: []CommandDelivery{{ID: "d1", InstallationID: 1, Repo: "o/r", PR: 3, Body: commandBody(tt.body)}}, done: map[string]string{}}
			runs := &cmdRuns{act: tt.act}
			gh := &cmdGitHub{}
			w, err := NewCommandWorker(CommandWorker{Queue: q, GitHub: gh, Runs: runs, PRs: &fakeGitHub{pr: PR{HeadSHA: strings.Repeat("a", 40)}},
				RunsPerHour: tt.perHour, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			did, err := w.Once(t.Context())
			if err != nil || !did {
				t.Fatalf("Once = %v, %v", did, err)
			}
			if got := q.done["d1"]; !strings.HasPrefix(got, tt.want) {
				t.Errorf("recorded %q, want %q…", got, tt.want)
			}
			if runs.reruns != tt.reruns || len(gh.comments) != tt.comments {
				t.Errorf("reruns %d, comments %d; want %d, %d", runs.reruns, len(gh.comments), tt.reruns, tt.comments)
			}
			if tt.reply != "" && (len(gh.comments) == 0 || !strings.Contains(gh.comments[0], tt.reply)) {
				t.Errorf("reply %q, want %q in it", gh.comments, tt.reply)
			}
			if did, err := w.Once(t.Context()); did || err != nil {
				t.Errorf("a second Once with nothing pending: %v, %v", did, err)
			}
		})
	}
}

// explain posts the step's output with the worker's paths and secrets
// withheld.
func TestExplainWithholds(t *testing.T) {
	rec := validation.Record{Steps: []validation.StepResult{{Name: "test", Argv: []string{"npm", "run", "test"}, Status: validation.StatusFailed,
		Output: validation.Output{Head: "FAIL /srv/gilf-data/work/job-1/src/a.test.js\ntoken sk-live-0123456789abcdef", Bytes: 80}}}}
	q := &cmdQueue{pending: []CommandDelivery{{ID: "d1", InstallationID: 1, Repo: "o/r", PR: 3, Body: commandBody("/gilf explain TEST")}}, done: map[string]string{}}
	gh := &cmdGitHub{}
	w := &CommandWorker{Queue: q, GitHub: gh, Runs: &recordRuns{rec: rec}, PRs: &fakeGitHub{pr: PR{HeadSHA: strings.Repeat("a", 40)}},
		Logger: slog.New(slog.DiscardHandler), Internals: []string{"/srv/gilf-data"},
		Secrets: []validation.Secret{{Name: "API_KEY", Value: "sk-live-0123456789abcdef"}}}
	if _, err := w.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(gh.comments) != 1 {
		t.Fatalf("comments %q", gh.comments)
	}
	c := gh.comments[0]
	if !strings.Contains(c, "a.test.js") || strings.Contains(c, "/srv/gilf-data") || strings.Contains(c, "sk-live-0123456789abcdef") {
		t.Errorf("explain posted:\n%s", c)
	}
	if got := q.done["d1"]; got != "done: explain test" {
		t.Errorf("recorded %q", got)
	}
}

type recordRuns struct {
	cmdRuns
	rec validation.Record
}

func (r *recordRuns) LastRecord(ctx context.Context, j Job) (validation.Record, bool, error) {
	return r.rec, true, nil
}

func TestNewCommandWorkerRefusesMissingParts(t *testing.T) {
	_, err := NewCommandWorker(CommandWorker{Queue: &cmdQueue{}, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || err.Error() != "command worker: missing GitHub, PRs, Runs" {
		t.Errorf("err = %v", err)
	}
}
