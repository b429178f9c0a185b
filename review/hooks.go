package review

import (
	"context"
	"fmt"
	"log/slog"
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
		span := s.Cards.Estimate(costs.Span{
			Lane: costs.LanePrimary, Executor: rec.Executor,
			Started: rec.Started, Finished: rec.Finished, VCPU: rec.VCPU, MemoryGiB: rec.MemoryGiB,
		})
		res.Spans = append(res.Spans, span)
		opts.Costs = append(opts.Costs, costLine(span))
	}
	if res.Shadow == nil {
		return
	}
	tel, ok := res.Shadow.Data.(executors.Telemetry)
	if !ok || tel.ShadowStarted.IsZero() {
		return
	}
	finished := tel.ShadowFinished
	if finished.IsZero() {
		finished = tel.ShadowStarted.Add(tel.ShadowWall)
	}
	span := s.Cards.Estimate(costs.Span{
		Lane: costs.LaneShadow, Executor: tel.Shadow,
		Started: tel.ShadowStarted, Finished: finished,
		VCPU: tel.ShadowResources.VCPU, MemoryGiB: tel.ShadowResources.MemoryGiB,
	})
	res.Spans = append(res.Spans, span)
	opts.Costs = append(opts.Costs, costLine(span))
}

func costLine(s costs.Span) CostLine {
	note := "estimate: wall-clock " + s.Finished.Sub(s.Started).Round(time.Millisecond).String()
	if s.USD == nil {
		note = "no estimate: no rate card or unknown vCPU/memory for " + s.Executor
	}
	return CostLine{Lane: s.Lane, Executor: s.Executor, USD: s.USD, Note: note}
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
