package main

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// Every check run a job completes without a result links to the job's
// page when GILF_DASHBOARD_URL is set, and says where the errors are.
func TestGaveUpAndAbandonedLinkTheJob(t *testing.T) {
	for _, withURL := range []bool{true, false} {
		c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
		db := newTestStore(t, c)
		m := newServeMetrics(db)
		in := wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}
		q := newStoreQueue(db, slog.New(slog.DiscardHandler), m)
		fin := &finisher{}
		q.finish = fin
		dash := DashboardConfig{Token: NewSecret("0123456789abcdef-token")}
		if withURL {
			dash.URL = "https://gilf.example.com"
		}
		q.details = dash.DetailsURL

		rec := queueJob(t, in, "d-g1", "aaaaaaa", 11)
		cl, ok, err := q.Claim(t.Context(), "w/0", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if err := q.Retry(t.Context(), cl, github.ErrInvalidInput); err != nil {
			t.Fatal(err)
		}
		queueJob(t, in, "d-g2", "bbbbbbb", 11)
		cl2, ok, err := q.Claim(t.Context(), "w/0", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, err := db.CancelJob(t.Context(), cl2.Job.ID, ""); err != nil {
			t.Fatal(err)
		}
		q.Abandoned(t.Context(), cl2)
		if len(fin.got) != 2 {
			t.Fatalf("finished %+v, want the gave-up and the cancelled check runs", fin.got)
		}
		gave, stopped := fin.got[0], fin.got[1]
		if withURL {
			if gave.DetailsURL != "https://gilf.example.com/dashboard/jobs/"+strconv.FormatInt(rec.JobID, 10) ||
				stopped.DetailsURL != "https://gilf.example.com/dashboard/jobs/"+strconv.FormatInt(cl2.Job.ID, 10) {
				t.Errorf("details URLs %q, %q", gave.DetailsURL, stopped.DetailsURL)
			}
			if !strings.Contains(gave.Summary, "Details shows each attempt's error") || strings.Contains(gave.Summary, "gilf's log") {
				t.Errorf("gave-up summary: %s", gave.Summary)
			}
		} else if gave.DetailsURL != "" || stopped.DetailsURL != "" || !strings.Contains(gave.Summary, "gilf's log") {
			t.Errorf("without a dashboard URL: %+v", fin.got)
		}
	}
}

// A run refused before anything ran carries the times of its attempt, so
// date filters and the refusals page find it.
func TestRefusedRunHasTimes(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	db := newTestStore(t, c)
	m := newServeMetrics(db)
	q := newStoreQueue(db, slog.New(slog.DiscardHandler), m)
	q.now = c.Now
	queueJob(t, wakingInbox{db: db, wake: make(chan struct{}, 1), metrics: m}, "d-rf", "ccccccc", 11)
	cl, ok, err := q.Claim(t.Context(), "w/0", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	claimed := c.now
	c.now = c.now.Add(1500 * time.Millisecond)
	res := review.Result{Record: review.NewRecord(review.RecordInput{Refusal: validation.Refuse(validation.CodeRepoConfigInvalid,
		".github/gilf.yml on main is invalid")})}
	if !res.Record.Started.IsZero() || !res.Record.Finished.IsZero() {
		t.Fatalf("the refused record already has times: %+v", res.Record)
	}
	if err := q.Complete(t.Context(), cl, res); err != nil {
		t.Fatal(err)
	}
	page, err := db.RunList(t.Context(), store.RunQuery{From: claimed.Truncate(24 * time.Hour), Outcome: validation.OutcomeRefused})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("refused runs from the day: %v %+v", err, page.Runs)
	}
	if r := page.Runs[0]; !r.Started.Equal(claimed) || !r.Finished.Equal(c.now) {
		t.Errorf("run times %v – %v, want %v – %v", r.Started, r.Finished, claimed, c.now)
	}
	codes, err := db.RefusalCounts(t.Context(), claimed.Add(-time.Hour))
	if err != nil || len(codes) != 1 || codes[0].Code != validation.CodeRepoConfigInvalid || !codes[0].Last.Equal(c.now) {
		t.Errorf("refusal counts: %v %+v", err, codes)
	}
}
