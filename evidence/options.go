// Package evidence turns what a validation run printed into size-budgeted
// artifacts, stores them under keys gilf alone generates, and attaches
// references to findings only after a store accepted the upload.
//
// The flow is one hook (Run): build → upload → attach → require. Nothing
// here is believed because the pull request printed it: artifact bodies are
// opaque bytes, keys never contain a byte of untrusted input unencoded, and
// a failed upload is recorded, never shown as persisted.
package evidence

// DefaultBodyBudget is the most bytes one artifact body keeps, marker
// included (SPEC §6).
const DefaultBodyBudget = 256 << 10

// MinBodyBudget is the smallest budget a body can be cut to: room for a
// short head, the omission marker and a short tail.
const MinBodyBudget = 256

// Options are the evidence settings after the documented rules are
// applied. Build them with NewOptions.
type Options struct {
	// Enabled is GILF_EVIDENCE_ARTIFACTS=1: artifacts are built, uploaded
	// and attached. Off by default.
	Enabled bool
	// Require is GILF_EVIDENCE_REQUIRE_ARTIFACTS=1 inside an enabled
	// feature: execution-claim findings without a reference are marked
	// unverified. Never true when Enabled is false.
	Require bool
	// BodyBudget is the per-body byte budget; DefaultBodyBudget when zero.
	BodyBudget int
}

// NewOptions applies the flag rules of SPEC §6: artifacts turn the feature
// on, and the require flag only adds its step inside an enabled feature —
// alone it does nothing.
func NewOptions(artifacts, requireArtifacts bool) Options {
	return Options{
		Enabled:    artifacts,
		Require:    artifacts && requireArtifacts,
		BodyBudget: DefaultBodyBudget,
	}
}

func (o Options) budget() int {
	if o.BodyBudget <= 0 {
		return DefaultBodyBudget
	}
	return max(o.BodyBudget, MinBodyBudget)
}
