package executors

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// DefaultShadowTimeout is GILF_VALIDATION_SHADOW_TIMEOUT_MS's default: the
// shadow lane's budget, measured from its start.
const DefaultShadowTimeout = 600_000 * time.Millisecond

// DefaultShadowStopGrace bounds how long Wait waits for a shadow executor
// that was cancelled to return. An executor keeps the lifecycle and
// returns within seconds; one that does not is abandoned (its goroutine
// still ends when Run returns) and the telemetry says so.
const DefaultShadowStopGrace = 30 * time.Second

// maxShadowErrorLen bounds the error text kept in telemetry.
const maxShadowErrorLen = 500

// ShadowStatus is how the shadow lane ended. It is telemetry: it never
// changes the run's outcome.
type ShadowStatus string

const (
	// ShadowNotConfigured: no shadow executor was selected.
	ShadowNotConfigured ShadowStatus = "not_configured"
	// ShadowWithheld: a shadow was selected but not started; Reason says
	// why (ShadowReason…).
	ShadowWithheld ShadowStatus = "withheld"
	// ShadowOK: the shadow ran to the end (its steps may have failed).
	ShadowOK ShadowStatus = "ok"
	// ShadowError: the shadow's executor returned an infrastructure
	// error or a refusal.
	ShadowError ShadowStatus = "error"
	// ShadowTimeout: the shadow was cut at its budget.
	ShadowTimeout ShadowStatus = "timeout"
	// ShadowCancelled: the caller stopped the lane (worker shutdown).
	ShadowCancelled ShadowStatus = "cancelled"
	// ShadowPanic: the shadow's executor panicked; it was recovered.
	ShadowPanic ShadowStatus = "panic"
)

// Reasons a selected shadow is withheld.
const (
	ShadowReasonSameAsPrimary = "same_as_primary"
	ShadowReasonUnknown       = "unknown"
	ShadowReasonUnconfigured  = "unconfigured"
	ShadowReasonBudget        = "budget"
)

// ShadowGate may withhold a shadow executor that is otherwise eligible
// (the managed-e2b budget guard of package costs, wired by cmd/gilf). It
// returns false and a plain-words reason to withhold it.
type ShadowGate func(ctx context.Context, name string) (bool, string)

// Shadow decides and starts the shadow lane (SPEC §4.6). Build one per
// worker; it is safe for concurrent use.
type Shadow struct {
	// Selection is GILF_VALIDATION_SHADOW_EXECUTOR, raw; empty means no
	// shadow.
	Selection string
	// Set is the configured executors, as for Select.
	Set Set
	// Timeout is GILF_VALIDATION_SHADOW_TIMEOUT_MS (DefaultShadowTimeout
	// when zero).
	Timeout time.Duration
	// StopGrace is DefaultShadowStopGrace when zero.
	StopGrace time.Duration
	// Gate, when set, is asked last, after the shadow is known to be
	// eligible.
	Gate ShadowGate
	// Logger receives panics with their stack; nothing is logged when nil.
	Logger *slog.Logger
}

// StepAgreement compares one step across the lanes.
type StepAgreement struct {
	Name    string            `json:"name"`
	Primary validation.Status `json:"primary"`
	Shadow  validation.Status `json:"shadow"`
	Agree   bool              `json:"agree"`
}

// Telemetry is what the shadow lane leaves: a comparison with the
// primary, never findings, gaps or a conclusion.
type Telemetry struct {
	// Requested is the selection as configured; Shadow its canonical
	// name ("" when unknown).
	Requested string       `json:"requested,omitempty"`
	Shadow    string       `json:"shadow,omitempty"`
	Primary   string       `json:"primary"`
	Status    ShadowStatus `json:"status"`
	// Reason says why a shadow was withheld (ShadowReason…, with the
	// gate's words after a colon for budget).
	Reason string `json:"reason,omitempty"`
	// Error is the shadow's error or panic, bounded; never shown on a PR.
	Error string `json:"error,omitempty"`
	// Refusal is the control that withheld the lane, when one did: the
	// budget guard refuses with validation.CodeBudgetExceeded.
	Refusal *validation.Refusal `json:"refusal,omitempty"`
	// Steps compares statuses in the primary's step order, then any step
	// only the shadow reported.
	Steps []StepAgreement `json:"steps,omitempty"`
	// Agree is true when both lanes reported every step the same.
	Agree bool `json:"agree"`
	// Integrity is the shadow's integrity note, if its report could not
	// be trusted.
	Integrity        string        `json:"integrity,omitempty"`
	PrimaryWall      time.Duration `json:"primaryWallNs"`
	ShadowWall       time.Duration `json:"shadowWallNs"`
	PrimaryResources Resources     `json:"primaryResources"`
	ShadowResources  Resources     `json:"shadowResources"`
	// ShadowStarted and ShadowFinished bound the shadow's run (for its
	// cost estimate); zero when it did not start.
	ShadowStarted  time.Time `json:"shadowStarted,omitzero"`
	ShadowFinished time.Time `json:"shadowFinished,omitzero"`
}

// ShadowRun is one started (or withheld) shadow lane. Its goroutine is
// owned: Wait stops it and waits for it.
type ShadowRun struct {
	tel       Telemetry
	started   time.Time
	deadline  time.Time
	stopGrace time.Duration
	cause     func() error // the cause of the shadow context's end
	cancel    context.CancelCauseFunc
	done      chan shadowOutcome // nil when nothing was started
}

type shadowOutcome struct {
	res      Result
	err      error
	panicked any
	finished time.Time
}

// shadowCause is why the shadow's context ended.
type shadowCause string

func (c shadowCause) Error() string { return string(c) }

const (
	causeBudget   shadowCause = "shadow budget exhausted"
	causeStopped  shadowCause = "shadow stopped by the caller"
	causeFinished shadowCause = "shadow finished"
)

// Decide resolves the selection for a primary executor: the canonical
// shadow name and, when it must not run, the reason. It does not consult
// the Gate.
func (s *Shadow) Decide(primary string) (name string, exec Executor, reason string) {
	requested := strings.TrimSpace(s.Selection)
	if requested == "" {
		return "", nil, ""
	}
	name, ok := Canonical(requested)
	if !ok {
		return "", nil, ShadowReasonUnknown
	}
	if p, ok := Canonical(primary); primary == name || ok && p == name {
		return name, nil, ShadowReasonSameAsPrimary
	}
	exec, ok = s.Set.Lookup(name)
	if !ok {
		return name, nil, ShadowReasonUnconfigured
	}
	return name, exec, ""
}

// Start starts the shadow lane beside the primary named primary, or
// records why it does not run. The shadow gets its own copy of req
// (Dir stays shared and read-only; Progress is dropped) and its own
// context, cancelled at Timeout after Start, when ctx is done, or by
// Wait. Start never blocks on the shadow.
func (s *Shadow) Start(ctx context.Context, primary string, req Request) *ShadowRun {
	now := time.Now()
	r := &ShadowRun{
		tel:       Telemetry{Requested: strings.TrimSpace(s.Selection), Primary: primary},
		started:   now,
		stopGrace: s.StopGrace,
	}
	if r.stopGrace <= 0 {
		r.stopGrace = DefaultShadowStopGrace
	}
	name, exec, reason := s.Decide(primary)
	r.tel.Shadow = name
	switch {
	case r.tel.Requested == "":
		r.tel.Status = ShadowNotConfigured
		return r
	case reason != "":
		r.tel.Status, r.tel.Reason = ShadowWithheld, reason
		return r
	}
	if s.Gate != nil {
		if ok, why := s.Gate(ctx, name); !ok {
			r.tel.Status, r.tel.Reason = ShadowWithheld, ShadowReasonBudget
			if why != "" {
				r.tel.Reason += ": " + why
			}
			r.tel.Refusal = validation.Refuse(validation.CodeBudgetExceeded, "the %s shadow lane was withheld: %s", name, r.tel.Reason)
			return r
		}
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultShadowTimeout
	}
	r.deadline = now.Add(timeout)
	sctx, cancel := context.WithCancelCause(ctx)
	sctx, cancelDeadline := context.WithDeadlineCause(sctx, r.deadline, causeBudget)
	r.cause = func() error { return context.Cause(sctx) }
	r.cancel = func(cause error) { cancel(cause); cancelDeadline() }
	r.done = make(chan shadowOutcome, 1)
	r.tel.ShadowStarted = now
	logger := s.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	shadowReq := cloneRequest(req)
	go func() {
		var out shadowOutcome
		defer func() {
			if p := recover(); p != nil {
				out.panicked = p
				logger.ErrorContext(ctx, "shadow executor panicked",
					slog.String(logkey.Executor, name), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			}
			out.finished = time.Now()
			r.done <- out
		}()
		out.res, out.err = exec.Run(sctx, shadowReq)
	}()
	return r
}

// Started reports whether a shadow executor was started (Wait may then
// block); a lane not configured or withheld has its telemetry at once.
func (r *ShadowRun) Started() bool { return r.done != nil }

// Wait is called once the primary's result is chosen, from any goroutine
// (the primary's result need not wait for it). It waits for the shadow for
// what remains of its budget (measured from Start), cancels it, and
// returns the telemetry comparing it with primary. A shadow that does not
// return within the stop grace after its cancel is reported as a timeout
// and left to finish on its own. ctx ending stops the shadow early
// (ShadowCancelled). Call Wait once.
func (r *ShadowRun) Wait(ctx context.Context, primary Result) Telemetry {
	tel := r.tel
	tel.PrimaryWall = wall(primary.Started, primary.Finished)
	tel.PrimaryResources = primary.Resources
	if r.done == nil {
		return tel
	}
	var out shadowOutcome
	select {
	case out = <-r.done: // already finished: never let the budget timer win a tie
	default:
		budget := time.NewTimer(time.Until(r.deadline))
		defer budget.Stop()
		select {
		case out = <-r.done:
		case <-budget.C:
			r.cancel(causeBudget)
			out = r.stop(ctx, &tel, ShadowTimeout)
		case <-ctx.Done():
			r.cancel(causeStopped)
			out = r.stop(context.WithoutCancel(ctx), &tel, ShadowCancelled)
		}
	}
	// The first cancellation's cause says why a shadow that returned an
	// error stopped; read it before releasing the context.
	cause := r.cause()
	r.cancel(causeFinished)
	if out.finished.IsZero() {
		return tel // abandoned: stop said so
	}
	tel.ShadowFinished = out.finished
	tel.ShadowWall = out.finished.Sub(r.started)
	tel.ShadowResources = out.res.Resources
	tel.Integrity = out.res.Integrity
	switch {
	case out.panicked != nil:
		tel.Status, tel.Error = ShadowPanic, bounded(fmt.Sprintf("panic: %v", out.panicked))
		return tel
	case out.err != nil:
		tel.Error = bounded(out.err.Error())
		if tel.Status == "" {
			tel.Status = ShadowError
			switch {
			case cause == causeBudget:
				tel.Status = ShadowTimeout
			case cause != nil:
				tel.Status = ShadowCancelled
			}
		}
	case tel.Status == "":
		tel.Status = ShadowOK
	}
	tel.Steps, tel.Agree = compareSteps(primary.Steps, out.res.Steps)
	return tel
}

// stop waits up to the stop grace for a cancelled shadow to return.
func (r *ShadowRun) stop(ctx context.Context, tel *Telemetry, status ShadowStatus) shadowOutcome {
	tel.Status = status
	grace := time.NewTimer(r.stopGrace)
	defer grace.Stop()
	select {
	case out := <-r.done:
		return out
	case <-grace.C:
		tel.Error = fmt.Sprintf("shadow executor did not return within %s of its cancel; abandoned", r.stopGrace)
		tel.ShadowWall = time.Since(r.started)
		return shadowOutcome{}
	case <-ctx.Done():
		return shadowOutcome{}
	}
}

// compareSteps pairs the lanes' steps by name: the primary's order
// first, then steps only the shadow has.
func compareSteps(primary, shadow []validation.StepResult) ([]StepAgreement, bool) {
	byName := make(map[string]validation.Status, len(shadow))
	for _, s := range shadow {
		if _, dup := byName[s.Name]; !dup {
			byName[s.Name] = s.Status
		}
	}
	seen := make(map[string]bool, len(primary))
	var out []StepAgreement
	all := len(primary) > 0 || len(shadow) > 0
	for _, p := range primary {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		a := StepAgreement{Name: p.Name, Primary: p.Status, Shadow: byName[p.Name]}
		a.Agree = a.Shadow != "" && a.Primary == a.Shadow
		all = all && a.Agree
		out = append(out, a)
	}
	for _, s := range shadow {
		if seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		out = append(out, StepAgreement{Name: s.Name, Shadow: s.Status})
		all = false
	}
	return out, all
}

// cloneRequest gives the shadow its own request: nothing mutable is
// shared with the primary but Dir, which executors treat as read-only.
func cloneRequest(req Request) Request {
	c := req
	c.Plan.Steps = make([]validation.Step, len(req.Plan.Steps))
	for i, st := range req.Plan.Steps {
		st.Argv = slices.Clone(st.Argv)
		c.Plan.Steps[i] = st
	}
	c.Plan.Notes = slices.Clone(req.Plan.Notes)
	if req.Plan.Gap != nil {
		g := *req.Plan.Gap
		c.Plan.Gap = &g
	}
	c.Secrets = slices.Clone(req.Secrets)
	c.Labels = maps.Clone(req.Labels)
	c.Progress = nil
	return c
}

func wall(start, end time.Time) time.Duration {
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return 0
	}
	return end.Sub(start)
}

func bounded(s string) string {
	if len(s) <= maxShadowErrorLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxShadowErrorLen], "") + "…"
}
