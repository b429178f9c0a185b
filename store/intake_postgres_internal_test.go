package store

import (
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
