package review

import (
	"context"
	"fmt"

	"github.com/gilf-review/gilf/executors"
)

// ShadowLanes runs the primary executor with the shadow lane of SPEC §4.6
// beside it. The shadow's result is telemetry only: it never changes the
// primary's result, findings or conclusion, and never holds them back —
// the pipeline goes on with the primary's result while the shadow runs,
// and its telemetry is recorded when it ends (ShadowReport.Pending).
type ShadowLanes struct {
	Shadow *executors.Shadow
}

var _ Lanes = ShadowLanes{}

// Run starts the shadow, runs the primary and returns its result at once.
// A shadow still running then is reported Pending: its context is not the
// job's (the job ends before it), so only its budget, its own end or the
// caller of Pending stops it.
func (l ShadowLanes) Run(ctx context.Context, primary executors.Executor, req executors.Request) (executors.Result, *ShadowReport, error) {
	run := l.Shadow.Start(context.WithoutCancel(ctx), primary.Name(), req)
	res, err := runExecutor(ctx, primary, req)
	if !run.Started() {
		return res, shadowReport(run.Wait(ctx, res)), err
	}
	name, _, _ := l.Shadow.Decide(primary.Name())
	return res, &ShadowReport{
		Executor: name,
		Status:   ShadowRunning,
		Summary:  fmt.Sprintf("shadow %s was still running when this result was posted; its comparison is recorded on the run when it ends", name),
		Pending: func(ctx context.Context) *ShadowReport {
			return shadowReport(run.Wait(ctx, res))
		},
	}, err
}

// ShadowRunning is a ShadowReport's Status while Pending.
const ShadowRunning = "running"

// Stop stops a lane still running whose result will not be recorded (its
// job failed, was abandoned, or its run could not be stored) and waits
// for it to return (at most the shadow's stop grace). A nil report, or
// one not pending, is left alone.
func (r *ShadowReport) Stop() {
	if r == nil || r.Pending == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Pending(ctx)
	r.Pending = nil
}

func shadowReport(tel executors.Telemetry) *ShadowReport {
	if tel.Status == executors.ShadowNotConfigured {
		return nil
	}
	return &ShadowReport{
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
