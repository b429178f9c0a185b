package main

import (
	"fmt"
	"strings"
)

// OriginConfig is failure origin's worker settings (SPEC §3.4.1).
type OriginConfig struct {
	// BaseComparison is GILF_BASE_COMPARISON: on unless "0". Off, no
	// base is validated and failed steps are of unknown origin (the
	// retry of failed steps stays, by the repository's
	// validation.retryFlaky).
	BaseComparison bool
}

func loadOrigin(getenv func(string) string, errs []error) (OriginConfig, []error) {
	switch v := strings.TrimSpace(getenv("GILF_BASE_COMPARISON")); v {
	case "", "1":
		return OriginConfig{BaseComparison: true}, errs
	case "0":
		return OriginConfig{}, errs
	default:
		return OriginConfig{BaseComparison: true}, append(errs, fmt.Errorf("GILF_BASE_COMPARISON=%q: want 0 or 1", v))
	}
}
