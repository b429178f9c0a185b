package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// TestSoloHeadsSupersedeTogether: a group commit of new heads, each alone
// with its pull request (intake_solo.go), supersedes the older unfinished
// head of each with the reason naming the new head and its job, counts it
// in each answer, and leaves alone the head of a pull request whose
// newest update is later (its new head is born superseded). The
// supersessions number 1, 3, MaxSupersedeByID and one more: statements of
// one id, of a size padded up, of the largest size, and two.
func TestSoloHeadsSupersedeTogether(t *testing.T) {
	for _, n := range []int{1, 3, store.MaxSupersedeByID, store.MaxSupersedeByID + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newClock()
			t0 := c.Now()
			db := openAt(t, t.TempDir()+"/gilf.db", store.Options{Now: c.Now})
			head := func(pr, k int, updated time.Duration) (validation.Delivery, *validation.JobSpec) {
				j := spec(sha(pr*10+k), t0.Add(updated))
				j.PR = pr
				d := delivery(fmt.Sprintf("d-%d-%d", pr, k), []byte(`{}`), t0)
				d.PR, d.HeadSHA = pr, j.HeadSHA
				return d, j
			}
			late := n + 1             // its older head was updated after its new one
			old := map[int64]string{} // older head's job -> the head superseding it
			var dels []validation.Delivery
			var jobs []*validation.JobSpec
			for pr := 1; pr <= late; pr++ {
				updated, newer := time.Duration(0), time.Second
				if pr == late {
					updated, newer = 10*time.Second, 5*time.Second
				}
				d, j := head(pr, 0, updated)
				old[record(t, db, d, j).JobID] = sha(pr*10 + 1)
				d, j = head(pr, 1, newer)
				dels, jobs = append(dels, d), append(jobs, j)
			}
			res, errs, err := store.RecordBatch(context.Background(), db, dels, jobs)
			if err != nil {
				t.Fatal(err)
			}
			newJob := map[string]int64{}
			for i, r := range res {
				if errs[i] != nil {
					t.Fatalf("delivery %s: %v", dels[i].ID, errs[i])
				}
				pr := jobs[i].PR
				want, state := 1, store.StateQueued
				if pr == late {
					want, state = 0, store.StateSuperseded
				}
				if !r.JobCreated || r.Superseded != want || r.JobState != string(state) {
					t.Errorf("pull request %d: answer %+v, want a job created %s superseding %d", pr, r, state, want)
				}
				newJob[jobs[i].HeadSHA] = r.JobID
			}
			list, err := db.ListJobs(context.Background(), store.JobFilter{Limit: store.MaxListJobs})
			if err != nil {
				t.Fatal(err)
			}
			superseded := 0
			for _, j := range list {
				by, isOld := old[j.ID]
				switch {
				case isOld && j.PR == late:
					if j.State != store.StateQueued || j.Reason != "" {
						t.Errorf("job %d of pull request %d (updated later): %s %q, want queued", j.ID, j.PR, j.State, j.Reason)
					}
				case isOld:
					want := fmt.Sprintf("superseded by head %s (job %d)", by, newJob[by])
					if j.State != store.StateSuperseded || j.Reason != want {
						t.Errorf("job %d of pull request %d: %s %q, want superseded %q", j.ID, j.PR, j.State, j.Reason, want)
					}
					superseded++
				case j.PR != late && j.State != store.StateQueued:
					t.Errorf("new job %d of pull request %d: %s %q, want queued", j.ID, j.PR, j.State, j.Reason)
				}
			}
			if superseded != n {
				t.Errorf("%d older heads superseded, want %d", superseded, n)
			}
		})
	}
}
