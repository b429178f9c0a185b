package costs

import "time"

// MethodWallClock names the estimate: elapsed seconds × (vCPU ×
// vcpuUsdPerSec + memory GiB × memoryGibUsdPerSec).
const MethodWallClock = "estimate:wall-clock"

// Lanes a span can belong to.
const (
	LanePrimary = "primary"
	LaneShadow  = "shadow"
)

// Span is one executor run priced by wall-clock time. USD is nil when the
// cost is unknown — no card for the executor, vCPU or memory unknown (0),
// or an end before the start — never 0 for "unknown".
type Span struct {
	Lane      string    `json:"lane"`
	Executor  string    `json:"executor"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	VCPU      float64   `json:"vcpu,omitempty"`
	MemoryGiB float64   `json:"memoryGib,omitempty"`
	USD       *float64  `json:"usd"`
	Method    string    `json:"method"`
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
