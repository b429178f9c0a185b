package costs

import (
	"regexp"
	"strings"
	"time"
)

// MethodWallClock names the estimate: elapsed seconds × (vCPU ×
// vcpuUsdPerSec + memory GiB × memoryGibUsdPerSec).
const MethodWallClock = "estimate:wall-clock"

// MethodTokens names the estimate of a model's span: input tokens ÷ 10⁶ ×
// inputUsdPerMTok + output tokens ÷ 10⁶ × outputUsdPerMTok.
const MethodTokens = "estimate:tokens"

// Lanes a span can belong to: the primary and shadow executors, the
// semantic review's model, and the failure-origin runs: the base's
// validation and the retry of failed steps (SPEC §3.4.1).
const (
	LanePrimary  = "primary"
	LaneShadow   = "shadow"
	LaneSemantic = "semantic"
	LaneBase     = "base"
	LaneRetry    = "retry"
)

// MethodFor is the estimate method of a lane's spans.
func MethodFor(lane string) string {
	if lane == LaneSemantic {
		return MethodTokens
	}
	return MethodWallClock
}

// Span is one executor run priced by wall-clock time, or (lane semantic)
// one model call priced by its tokens, with Executor the model's card key
// (ModelCardKey). USD is nil when the cost is unknown — no card, vCPU or
// memory unknown (0), an end before the start, no token counts — never 0
// for "unknown".
type Span struct {
	Lane         string    `json:"lane"`
	Executor     string    `json:"executor"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished"`
	VCPU         float64   `json:"vcpu,omitempty"`
	MemoryGiB    float64   `json:"memoryGib,omitempty"`
	InputTokens  int64     `json:"inputTokens,omitempty"`
	OutputTokens int64     `json:"outputTokens,omitempty"`
	USD          *float64  `json:"usd"`
	Method       string    `json:"method"`
}

// Estimate returns s priced with its executor's card. A zero-length span
// with known inputs costs exactly 0.
func (c Cards) Estimate(s Span) Span {
	s.Method = MethodWallClock
	s.USD = nil
	card, ok := c[s.Executor]
	if !ok || !(s.VCPU > 0) || !(s.MemoryGiB > 0) ||
		s.Started.IsZero() || s.Finished.IsZero() || s.Finished.Before(s.Started) {
		return s
	}
	secs := s.Finished.Sub(s.Started).Seconds()
	usd := secs * (s.VCPU*card.VCPUUsdPerSec + s.MemoryGiB*card.MemoryGibUsdPerSec)
	s.USD = &usd
	return s
}

// tokensPerMTok is how many tokens a model card's price is for.
const tokensPerMTok = 1e6

// EstimateTokens returns the model span s priced with its model card
// (s.Executor, a ModelCardKey). The cost is null without a card, for
// model:unknown, for negative counts, and when both counts are 0 (the
// endpoint reported none); one count of 0 beside a known other is priced.
func (c Cards) EstimateTokens(s Span) Span {
	s.Method = MethodTokens
	s.USD = nil
	card, ok := c[s.Executor]
	if !ok {
		// An endpoint answers with the dated snapshot of the model asked
		// for (gpt-4o-2024-08-06 for gpt-4o): its card is the model's.
		if base, dated := undated(s.Executor); dated {
			card, ok = c[base]
		}
	}
	if !ok || !strings.HasPrefix(s.Executor, ModelPrefix) || s.Executor == ModelCardKey(UnknownModel) ||
		s.InputTokens < 0 || s.OutputTokens < 0 || (s.InputTokens == 0 && s.OutputTokens == 0) {
		return s
	}
	usd := float64(s.InputTokens)/tokensPerMTok*card.InputUsdPerMTok + float64(s.OutputTokens)/tokensPerMTok*card.OutputUsdPerMTok
	s.USD = &usd
	return s
}

// snapshotSuffix is a model snapshot's date: -2024-08-06, or -0613.
var snapshotSuffix = regexp.MustCompile(`-(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4})$`)

// undated strips a snapshot date from a model card key.
func undated(key string) (string, bool) {
	loc := snapshotSuffix.FindStringIndex(key)
	if loc == nil || loc[0] <= len(ModelPrefix) {
		return key, false
	}
	return key[:loc[0]], true
}
