package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// BenchmarkAttemptTriggers measures what keeping each attempt (0008's two
// triggers) adds to a job's claim and finish, on SQLite: the same work on
// a store with the triggers and on one whose triggers were dropped, in
// one run. Intake does not fire them (it inserts jobs).
func BenchmarkAttemptTriggers(b *testing.B) {
	const jobs = 2000
	ctx := context.Background()
	measure := func(keep bool) time.Duration {
		db := openInternal(b, store.Options{})
		if !keep {
			w, err := sql.Open("sqlite", dsn(db.path, store.Options{}.WithDefaults(), false))
			if err != nil {
				b.Fatal(err)
			}
			for _, tr := range []string{"job_attempt_started", "job_attempt_ended"} {
				if _, err := w.ExecContext(ctx, `DROP TRIGGER `+tr); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		for i := range jobs {
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			sha := fmt.Sprintf("%040x", i)
			if _, err := db.RecordDelivery(ctx, validation.Delivery{ID: id, Event: "pull_request", Action: "opened",
				InstallationID: 1, Repo: "o/r", PR: i + 1, HeadSHA: sha, ReceivedAt: time.Now(), Status: validation.DeliveryQueued,
				Body: []byte(`{}`)}, &validation.JobSpec{Repo: "o/r", PR: i + 1, HeadSHA: sha, InstallationID: 1, Trigger: "opened"}); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		for range jobs {
			j, ok, err := db.Claim(ctx, "w", time.Minute)
			if err != nil || !ok {
				b.Fatalf("claim: %v %v", ok, err)
			}
			if _, err := db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / jobs
	}
	var with, without time.Duration
	for b.Loop() {
		without += measure(false)
		with += measure(true)
	}
	b.ReportMetric(float64(without.Microseconds())/float64(b.N), "without-µs/job")
	b.ReportMetric(float64(with.Microseconds())/float64(b.N), "with-µs/job")
	b.ReportMetric(float64(with)/float64(without), "ratio")
}
