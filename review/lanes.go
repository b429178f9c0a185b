package review

import (
	"context"
	"fmt"

	"github.com/gilf-review/gilf/executors"
)

// ShadowLanes runs the primary executor with the shadow lane of SPEC §4.6
// beside it. The shadow's result is telemetry only: it never changes the
// primary's result, findings or conclusion.
type ShadowLanes struct {
	Shadow *executors.Shadow
}

var _ Lanes = ShadowLanes{}

// Run starts the shadow, runs the primary, then waits for what remains of
// the shadow's budget and reports the comparison.
//
//lint:ignore ST1008 Lanes.Run's error moves last with issue 32's wiring change (item 4), on its own branch
func (l ShadowLanes) Run(ctx context.Context, primary executors.Executor, req executors.Request) (executors.Result, error, *ShadowReport) {
	run := l.Shadow.Start(ctx, primary.Name(), req)
	res, err := runExecutor(ctx, primary, req)
	tel := run.Wait(ctx, res)
	if tel.Status == executors.ShadowNotConfigured {
		return res, err, nil
	}
	return res, err, &ShadowReport{
		Executor: tel.Shadow,
		Status:   string(tel.Status),
		Summary:  shadowSummary(tel),
		Data:     tel,
	}
}

func shadowSummary(t executors.Telemetry) string {
	name := t.Shadow
	if name == "" {
		name = t.Requested
	}
	switch t.Status {
	case executors.ShadowWithheld:
		return fmt.Sprintf("shadow %s withheld: %s", name, t.Reason)
	case executors.ShadowOK:
		agree := 0
		for _, s := range t.Steps {
			if s.Agree {
				agree++
			}
		}
		return fmt.Sprintf("shadow %s agreed on %d of %d steps (wall %s vs primary %s)",
			name, agree, len(t.Steps), t.ShadowWall.Round(1e6), t.PrimaryWall.Round(1e6))
	default:
		return fmt.Sprintf("shadow %s ended %s", name, t.Status)
	}
}
