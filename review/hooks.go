package review

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/validation"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/executors"
)

// Stages are the evidence and cost stages after a run (SPEC §5, §6).
type Stages struct {
	Evidence      evidence.Options
	EvidenceStore evidence.Store // required when Evidence.Enabled
	Cards         costs.Cards
	Logger        *slog.Logger
	// Secrets are the worker's: every evidence body is scanned for them
	// before it is stored (the secret-leak control).
	Secrets []validation.Secret
}

var _ Hooks = (*Stages)(nil)

// AfterRun prices the lanes and, when enabled, builds, uploads and attaches
// evidence. A failure is returned for the record; the findings stand.
func (s *Stages) AfterRun(ctx context.Context, j Job, res *Result, opts *RenderOptions) []string {
	var errs []string
	s.price(res, opts)
	if s.Evidence.Enabled {
		if e := s.evidence(ctx, j, res, opts); e != "" {
			errs = append(errs, e)
		}
	}
	if res.Shadow != nil && res.Shadow.Summary != "" {
		opts.Notes = append(opts.Notes, res.Shadow.Summary)
	}
	return errs
}

// price estimates one span per lane that ran.
func (s *Stages) price(res *Result, opts *RenderOptions) {
	rec := res.Record
	if rec.Executor != "" && !rec.Started.IsZero() {
		addSpan(res, opts, s.Cards.Estimate(costs.Span{
			Lane: costs.LanePrimary, Executor: rec.Executor,
			Started: rec.Started, Finished: rec.Finished, VCPU: rec.VCPU, MemoryGiB: rec.MemoryGiB,
		}))
	}
	for _, r := range res.OriginRuns {
		addSpan(res, opts, s.Cards.Estimate(costs.Span{
			Lane: r.Lane, Executor: r.Executor, Started: r.Started, Finished: r.Finished, VCPU: r.VCPU, MemoryGiB: r.MemoryGiB,
		}))
	}
	if span, ok := shadowSpan(res.Shadow); ok {
		addSpan(res, opts, s.Cards.Estimate(span))
	}
	if sh := res.Shadow; sh != nil && sh.Pending != nil {
		// The lane ends after this review: its span is priced then, for
		// the run's record, and is not in the review's cost table.
		pending := sh.Pending
		sh.Pending = func(ctx context.Context) *ShadowReport {
			final := pending(ctx)
			if span, ok := shadowSpan(final); ok {
				final.Spans = append(final.Spans, s.Cards.Estimate(span))
			}
			return final
		}
	}
}

// shadowSpan is the cost span of a shadow lane that ran.
func shadowSpan(sh *ShadowReport) (costs.Span, bool) {
	if sh == nil {
		return costs.Span{}, false
	}
	tel, ok := sh.Data.(executors.Telemetry)
	if !ok || tel.ShadowStarted.IsZero() {
		return costs.Span{}, false
	}
	finished := tel.ShadowFinished
	if finished.IsZero() {
		finished = tel.ShadowStarted.Add(tel.ShadowWall)
	}
	return costs.Span{
		Lane: costs.LaneShadow, Executor: tel.Shadow,
		Started: tel.ShadowStarted, Finished: finished,
		VCPU: tel.ShadowResources.VCPU, MemoryGiB: tel.ShadowResources.MemoryGiB,
	}, true
}

// SemanticPricer is a Hooks that also prices the semantic review's model
// span. The model runs after AfterRun (SPEC §3: costs, then the semantic
// review), so its span reaches the hooks on its own.
type SemanticPricer interface {
	PriceSemantic(res *Result, opts *RenderOptions, span costs.Span)
}

var _ SemanticPricer = (*Stages)(nil)

// PriceSemantic prices the model's span by its tokens and adds it to the
// result's spans and the review's cost table.
func (s *Stages) PriceSemantic(res *Result, opts *RenderOptions, span costs.Span) {
	addSpan(res, opts, s.Cards.EstimateTokens(span))
}

func addSpan(res *Result, opts *RenderOptions, span costs.Span) {
	res.Spans = append(res.Spans, span)
	opts.Costs = append(opts.Costs, costLine(span))
}

func costLine(s costs.Span) CostLine {
	line := CostLine{Lane: s.Lane, Executor: s.Executor, USD: s.USD}
	switch {
	case s.Lane == costs.LaneSemantic && s.USD != nil:
		line.Note = fmt.Sprintf("estimate: %s input + %s output tokens", count(s.InputTokens), count(s.OutputTokens))
	case s.Lane == costs.LaneSemantic && s.Executor == costs.ModelCardKey(costs.UnknownModel):
		line.Note = "no estimate: the endpoint named no model"
	case s.Lane == costs.LaneSemantic && s.InputTokens <= 0 && s.OutputTokens <= 0:
		line.Note = "no estimate: the endpoint reported no token counts"
	case s.Lane == costs.LaneSemantic:
		line.Note = "no estimate: no rate card for " + s.Executor
	case s.USD != nil:
		line.Note = "estimate: wall-clock " + s.Finished.Sub(s.Started).Round(time.Millisecond).String()
	default:
		line.Note = "no estimate: no rate card or unknown vCPU/memory for " + s.Executor
	}
	return line
}

// count writes n with thousands separators: 1,234,567.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// evidence runs the artifact hook and lists what was stored or failed.
func (s *Stages) evidence(ctx context.Context, j Job, res *Result, opts *RenderOptions) string {
	if s.EvidenceStore == nil {
		return "evidence: enabled but no store is configured"
	}
	guard := &leakGuard{Store: s.EvidenceStore, secrets: s.Secrets}
	out := evidence.Run(ctx, s.Logger, s.Evidence, guard, evidence.Input{
		Scope:    evidence.Scope{Repo: j.FullName(), SHA: j.HeadSHA, Review: fmt.Sprintf("job-%d", j.ID)},
		Findings: res.Record.Findings,
		Steps:    res.Record.Steps,
	})
	res.Record.Findings = out.Findings
	res.Artifacts, res.UploadFailures = out.Stored, out.Failures
	res.Record.Controls = append(res.Record.Controls, guard.decision())
	if opts.Evidence == nil {
		opts.Evidence = map[string][]EvidenceLine{}
	}
	for _, st := range out.Stored {
		opts.Evidence[st.Step] = append(opts.Evidence[st.Step], EvidenceLine{
			Kind: string(st.Kind), Name: st.Name, URL: st.Ref.URL, Key: st.Ref.Key,
		})
	}
	for _, f := range out.Failures {
		opts.Evidence[f.Step] = append(opts.Evidence[f.Step], EvidenceLine{
			Kind: string(f.Kind), Name: f.Name, Note: "upload failed: " + f.Reason,
		})
	}
	return out.Err
}

// leakGuard is the secret-leak control in front of the evidence store:
// each body is scanned for the worker's secrets before it is stored. A
// text body is stored redacted; a binary one, which redaction would
// corrupt, is not stored at all. The hits are kept by name and offset.
type leakGuard struct {
	evidence.Store
	secrets []validation.Secret

	mu   sync.Mutex
	hits []string
}

func (g *leakGuard) Put(ctx context.Context, obj evidence.Object) (validation.EvidenceRef, error) {
	hits := validation.ScanSecrets(obj.Body, g.secrets)
	if len(hits) == 0 {
		return g.Store.Put(ctx, obj)
	}
	g.mu.Lock()
	for _, h := range hits[:min(len(hits), 10)] {
		g.hits = append(g.hits, fmt.Sprintf("%s in %s at offset %d (%s)", h.Name, obj.Kind, h.Offset, h.Encoding))
	}
	g.mu.Unlock()
	if !strings.HasPrefix(obj.ContentType, "text/") {
		return validation.EvidenceRef{}, fmt.Errorf("not stored: the artifact held the value of %s", hits[0].Name)
	}
	text, _ := GuardOutput(string(obj.Body), g.secrets)
	obj.Body = []byte(text)
	return g.Store.Put(ctx, obj)
}

// decision is the control's decision over every body it saw.
func (g *leakGuard) decision() validation.ControlDecision {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.hits) == 0 {
		return validation.ControlDecision{Control: validation.ControlSecretLeak, Passed: true, Detail: "evidence"}
	}
	return validation.ControlDecision{Control: validation.ControlSecretLeak, Code: validation.CodeSecretLeak,
		Detail: "evidence redacted or withheld before storing: " + strings.Join(g.hits, ", ")}
}
