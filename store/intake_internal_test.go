package store

import (
	"fmt"
	"testing"

	"github.com/gilf-review/gilf/validation"
)

// TestQueueOf: every delivery of a pull request goes to one writer's
// queue (so its heads fill that writer's batches, in order), pull
// requests spread over the writers, a delivery without a job goes by its
// id, and a store with one writer has one queue.
func TestQueueOf(t *testing.T) {
	d := &DB{reqs: make([]chan *intakeReq, 4)}
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
