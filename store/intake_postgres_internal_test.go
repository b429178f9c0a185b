package store

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestPGRounds(t *testing.T) {
	req := func(id string, pr int) *intakeReq {
		r := &intakeReq{d: validation.Delivery{ID: id}}
		if pr > 0 {
			r.job = &validation.JobSpec{Repo: "o/r", PR: pr}
		}
		return r
	}
	batch := []*intakeReq{
		req("a", 1), req("b", 2), req("c", 1), // c: pull request 1 again
		req("b", 2),              // the same id again
		req("n", 0), req("n", 0), // no job; the same id twice
		req("d", 3), req("e", 1), // e: pull request 1 a third time
		req("f", 2), req("g", 0),
	}
	var got [][]string
	for _, round := range pgRounds(batch) {
		var ids []string
		for _, it := range round {
			if batch[it.i] != it.req {
				t.Fatalf("item %d names another delivery", it.i)
			}
			ids = append(ids, it.req.d.ID)
		}
		got = append(got, ids)
	}
	want := [][]string{{"a", "b", "n", "d", "g"}, {"c", "b", "n"}, {"e", "f"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("rounds (-want +got):\n%s", diff)
	}
}

// TestQueueOf: every delivery of a pull request goes to one writer's
// queue (so its heads fill that writer's batches, in order), pull
// requests spread over the writers, a delivery without a job goes by its
// id, and a store with one writer has one queue.
func TestQueueOf(t *testing.T) {
	d := &DB{reqs: make([]chan *intakeReq, DefaultIntakeWriters)}
	for i := range d.reqs {
		d.reqs[i] = make(chan *intakeReq)
	}
	index := func(q chan *intakeReq) int {
		for i, c := range d.reqs {
			if c == q {
				return i
			}
		}
		t.Fatal("queueOf returned no writer's queue")
		return -1
	}
	head := func(id, repo string, pr int) *intakeReq {
		return &intakeReq{d: validation.Delivery{ID: id}, job: &validation.JobSpec{Repo: repo, PR: pr, HeadSHA: id}}
	}
	used := map[int]bool{}
	for pr := 1; pr <= 64; pr++ {
		q := index(d.queueOf(head("a", "o/r", pr)))
		for _, id := range []string{"b", "c", "d"} {
			if got := index(d.queueOf(head(id, "o/r", pr))); got != q {
				t.Fatalf("pull request %d: delivery %s in queue %d, the first in %d", pr, id, got, q)
			}
		}
		used[q] = true
	}
	if len(used) != len(d.reqs) {
		t.Fatalf("64 pull requests used %d of %d queues", len(used), len(d.reqs))
	}
	// The queue's key (prKey) keeps the repository and the number apart:
	// o/r#12 is not o/r1#2.
	if a, b := prKey(head("x", "o/r", 12).job), prKey(head("x", "o/r1", 2).job); a == b {
		t.Fatalf("o/r#12 and o/r1#2 share the key %q", a)
	}
	byID := map[int]bool{}
	for i := range 64 {
		byID[index(d.queueOf(&intakeReq{d: validation.Delivery{ID: fmt.Sprintf("ignored-%d", i)}}))] = true
	}
	if len(byID) < 2 {
		t.Fatalf("deliveries without a job all went to one queue")
	}
	one := &DB{reqs: []chan *intakeReq{make(chan *intakeReq)}}
	if one.queueOf(head("a", "o/r", 1)) != one.reqs[0] {
		t.Fatal("one writer: not its queue")
	}
}

// TestAllNewHeads: only a batch of deliveries whose triggers bring new
// reviewed states is pipelined; one label, one re-open or one delivery
// without a job sends the batch through an ordinary transaction.
func TestAllNewHeads(t *testing.T) {
	req := func(trigger string) *intakeReq {
		return &intakeReq{job: &validation.JobSpec{Repo: "o/r", PR: 1, Trigger: trigger}}
	}
	for _, c := range []struct {
		batch []*intakeReq
		want  bool
	}{
		{[]*intakeReq{req("opened"), req("synchronize"), req("edited")}, true},
		{[]*intakeReq{req("synchronize"), req("labeled")}, false},
		{[]*intakeReq{req("reopened")}, false},
		{[]*intakeReq{req("ready_for_review"), req("opened")}, false},
		{[]*intakeReq{req("unlabeled")}, false},
		{[]*intakeReq{req("opened"), {}}, false}, // no job
	} {
		if got := allNewHeads(c.batch); got != c.want {
			var triggers []string
			for _, r := range c.batch {
				if r.job != nil {
					triggers = append(triggers, r.job.Trigger)
				} else {
					triggers = append(triggers, "(no job)")
				}
			}
			t.Errorf("allNewHeads(%v) = %v, want %v", triggers, got, c.want)
		}
	}
}
