package review

import (
	"context"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

// TestShadowLanesNeverHoldThePrimary: a shadow that runs for an hour
// does not hold the primary's result; it is reported running, Pending
// gives its final telemetry when it ends, and Stop ends one whose result
// will not be recorded.
func TestShadowLanesNeverHoldThePrimary(t *testing.T) {
	plan := validation.Plan{Steps: []validation.Step{{Name: validation.StepTest, Argv: []string{"npm", "run", "test"}}}}
	req := executors.Request{Plan: plan, Dir: t.TempDir()}
	primary := &executortest.Fake{ExecName: executors.NameLocal}
	lanes := func(delay time.Duration) ShadowLanes {
		shadow := &executortest.Fake{ExecName: executors.NameSelfHost,
			Steps: map[string]executortest.Script{validation.StepTest: {Delay: delay}}}
		return ShadowLanes{Shadow: &executors.Shadow{Selection: executors.NameSelfHost, Set: executors.Set{primary, shadow}}}
	}

	t.Run("slow shadow, stopped", func(t *testing.T) {
		res, sh, err := lanes(time.Hour).Run(t.Context(), primary, req)
		if err != nil || len(res.Steps) != 1 || res.Steps[0].Status != validation.StatusPassed {
			t.Fatalf("primary: %+v, %v", res.Steps, err)
		}
		if sh == nil || sh.Status != ShadowRunning || sh.Pending == nil || sh.Executor != executors.NameSelfHost {
			t.Fatalf("shadow report %+v, want self-host running with Pending", sh)
		}
		sh.Stop()
		if sh.Pending != nil {
			t.Error("Pending still set after Stop")
		}
	})
	t.Run("shadow that ends", func(t *testing.T) {
		_, sh, _ := lanes(10*time.Millisecond).Run(t.Context(), primary, req)
		if sh == nil || sh.Pending == nil {
			t.Fatalf("shadow report %+v, want Pending", sh)
		}
		final := sh.Pending(context.Background())
		tel, ok := final.Data.(executors.Telemetry)
		if !ok || final.Status != string(executors.ShadowOK) || !tel.Agree || tel.ShadowWall <= 0 {
			t.Errorf("final %+v (telemetry %+v), want ok and agreeing", final, tel)
		}
	})
}
