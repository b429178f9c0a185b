package selfhost

import (
	"context"
	"testing"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// The resources the operator states are reported with a real run, so the
// cost stage can price it; without them the result says nothing.
func TestRunReportsStatedResources(t *testing.T) {
	for _, want := range []executors.Resources{{VCPU: 2, MemoryGiB: 4}, {}} {
		e, _ := newExec(t, script(t, extractScript), func(o *Options) { o.Resources = want })
		ctx, cancel := context.WithTimeout(context.Background(), runBound)
		res, err := e.Run(ctx, request(t, step("test", "exit 0")))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Steps) != 1 || res.Steps[0].Status != validation.StatusPassed {
			t.Fatalf("steps %+v", res.Steps)
		}
		if res.Resources != want {
			t.Errorf("resources %+v, want %+v", res.Resources, want)
		}
	}
}
