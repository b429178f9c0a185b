package evidence

import (
	"context"
	"fmt"
	"slices"

	"github.com/gilf-review/gilf/validation"
)

// Evidence statuses the require step writes.
const (
	EvidenceStatusUnverified = "unverified"
	// ReasonNoEvidence is the downgraded reason of an unverified finding.
	ReasonNoEvidence = "no persisted evidence artifact backs this execution claim"
)

// Stored is an artifact the store accepted, with its reference.
type Stored struct {
	Kind         Kind                   `json:"kind"`
	Step         string                 `json:"step,omitempty"`
	Name         string                 `json:"name"`
	ContentType  string                 `json:"contentType"`
	BodyBytes    int                    `json:"bodyBytes"`
	BodySHA256   string                 `json:"bodySha256"`
	Truncated    bool                   `json:"truncated"`
	OmittedBytes int64                  `json:"omittedBytes"`
	FullBytes    int64                  `json:"fullBytes"`
	FullSHA256   string                 `json:"fullSha256,omitempty"`
	Ref          validation.EvidenceRef `json:"ref"`
}

// UploadFailure records an artifact that was not persisted: which key (when
// one could be made) and why. Its reference is attached nowhere.
type UploadFailure struct {
	Kind   Kind   `json:"kind"`
	Step   string `json:"step,omitempty"`
	Name   string `json:"name"`
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason"`
	// Code is set when a ceiling refused the artifact (its count, or a
	// name whose key would escape the run's prefix): the artifact control
	// of SPEC §7, validation.CodeArtifactCeiling.
	Code validation.Code `json:"code,omitempty"`
}

// Attach uploads each artifact under its key in scope and attaches the
// reference to the findings of the same step — only after the store
// accepted it. A failed upload is returned as an UploadFailure and
// attaches nothing. The findings passed in are not modified; the returned
// slice is a copy.
func Attach(ctx context.Context, store Store, scope Scope, findings []validation.Finding, artifacts []Artifact) ([]validation.Finding, []Stored, []UploadFailure) {
	out := cloneFindings(findings)
	var stored []Stored
	var failures []UploadFailure
	for i, a := range artifacts {
		fail := UploadFailure{Kind: a.Kind, Step: a.Step, Name: a.Name}
		if i >= MaxArtifactsPerRun {
			fail.Reason = fmt.Sprintf("over the limit of %d artifacts per run", MaxArtifactsPerRun)
			fail.Code = validation.CodeArtifactCeiling
			failures = append(failures, fail)
			continue
		}
		key, err := Key(scope, a.Kind, a.Name)
		if err != nil {
			fail.Reason = err.Error()
			fail.Code = validation.CodeArtifactCeiling
			failures = append(failures, fail)
			continue
		}
		fail.Key = key
		ref, err := store.Put(ctx, Object{Key: key, Kind: a.Kind, ContentType: a.ContentType, Body: a.Body})
		if err != nil {
			fail.Reason = err.Error()
			failures = append(failures, fail)
			continue
		}
		stored = append(stored, Stored{
			Kind: a.Kind, Step: a.Step, Name: a.Name, ContentType: a.ContentType,
			BodyBytes: len(a.Body), BodySHA256: a.BodySHA256,
			Truncated: a.Truncated, OmittedBytes: a.OmittedBytes,
			FullBytes: a.FullBytes, FullSHA256: a.FullSHA256,
			Ref: ref,
		})
		if a.Step == "" {
			continue
		}
		for j := range out {
			if out[j].Step == a.Step {
				out[j].Evidence = append(out[j].Evidence, ref)
			}
		}
	}
	return out, stored, failures
}

// MaxArtifactsPerRun bounds how many artifacts one run uploads; with
// DefaultBodyBudget that bounds a run's evidence to 8 MiB. Artifacts past
// it are recorded as failures.
const MaxArtifactsPerRun = 32

// Require marks every execution-claim finding that has no reference (with
// a key, URL or ID) unverified, with a downgraded reason. Findings are
// neither removed nor lowered in severity, and their content is not
// verified. The findings passed in are not modified.
func Require(findings []validation.Finding) []validation.Finding {
	out := cloneFindings(findings)
	for i := range out {
		f := &out[i]
		if !f.ExecutionClaim || hasRef(*f) {
			continue
		}
		f.EvidenceStatus = EvidenceStatusUnverified
		f.DowngradedReason = ReasonNoEvidence
	}
	return out
}

func hasRef(f validation.Finding) bool {
	return slices.ContainsFunc(f.Evidence, func(r validation.EvidenceRef) bool {
		return r.Key != "" || r.URL != "" || r.ID != ""
	})
}

func cloneFindings(in []validation.Finding) []validation.Finding {
	if in == nil {
		return nil
	}
	out := slices.Clone(in)
	for i := range out {
		out[i].Evidence = slices.Clone(out[i].Evidence)
	}
	return out
}
