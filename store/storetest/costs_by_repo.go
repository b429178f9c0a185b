package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

func testCostsByRepo(t *testing.T, e Engine) {
	loc := e.NewLocation(t)
	c := NewClock() // 2026-03-01 12:00 UTC
	db := e.OpenAt(t, loc, store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }})
	ctx := context.Background()
	usd := func(v float64) *float64 { return &v }
	n := 0
	// finish records a job of repo with spans started at the clock.
	finish := func(repo string, spans ...store.CostSpan) {
		t.Helper()
		n++
		d := Delivery(fmt.Sprintf("22222222-0000-0000-0000-%012d", n), Payload(t), c.Now())
		d.Repo, d.HeadSHA = repo, SHA(100+n)
		j := Spec(SHA(100+n), c.Now())
		j.Repo = repo
		Record(t, db, d, j)
		job, ok := Claim(t, db, "w", time.Minute)
		if !ok {
			t.Fatal("nothing to claim")
		}
		for i := range spans {
			spans[i].Started, spans[i].Finished = c.Now(), c.Now().Add(30*time.Second)
		}
		if _, err := db.Finish(ctx, job.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}, Spans: spans}); err != nil {
			t.Fatal(err)
		}
	}
	e2b := func(v *float64) store.CostSpan {
		return store.CostSpan{Lane: store.LanePrimary, Executor: "managed-e2b", USD: v, Method: "estimate:wall-clock"}
	}
	c.Advance(-48 * time.Hour) // before the window
	finish("acme/web", e2b(usd(5)))
	c.Advance(24 * time.Hour) // 2026-02-28 12:00
	finish("acme/web", e2b(usd(0.25)), store.CostSpan{Lane: store.LaneShadow, Executor: "self-host", Method: "estimate:wall-clock"})
	finish("acme/web", e2b(usd(0.5)))
	finish("acme/api", e2b(nil))
	c.Advance(24 * time.Hour) // 2026-03-01
	finish("acme/api", e2b(usd(1)))

	rows, err := db.CostsByRepo(ctx, time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		repo, day, exec, lane string
		spans, priced         int
		usd                   string
		seconds               float64
	}
	money := func(v *float64) string {
		if v == nil {
			return "null"
		}
		return fmt.Sprintf("%.2f", *v)
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Repo, r.Day, r.Executor, string(r.Lane), r.Spans, r.Priced, money(r.USD), r.Seconds})
	}
	want := []row{
		{"acme/api", "2026-02-28", "managed-e2b", "primary", 1, 0, "null", 30},
		{"acme/web", "2026-02-28", "managed-e2b", "primary", 2, 2, "0.75", 60},
		{"acme/web", "2026-02-28", "self-host", "shadow", 1, 0, "null", 30},
		{"acme/api", "2026-03-01", "managed-e2b", "primary", 1, 1, "1.00", 30},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("costs by repository:\n got %v\nwant %v", got, want)
	}
}
