package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/evidence"
)

// EvidenceConfig is SPEC §6's settings.
type EvidenceConfig struct {
	// Options holds GILF_EVIDENCE_ARTIFACTS and
	// GILF_EVIDENCE_REQUIRE_ARTIFACTS (the latter only inside the former).
	Options       evidence.Options
	S3Bucket      string // GILF_EVIDENCE_S3_BUCKET: S3 store when set
	S3Endpoint    string // GILF_EVIDENCE_S3_ENDPOINT
	S3Region      string // GILF_EVIDENCE_S3_REGION
	S3Prefix      string // GILF_EVIDENCE_S3_PREFIX
	S3PathStyle   bool   // GILF_EVIDENCE_S3_PATH_STYLE=1
	PublicBaseURL string // GILF_EVIDENCE_PUBLIC_BASE_URL
	// PresignExpiry is GILF_EVIDENCE_PRESIGN_EXPIRY_MS: presigned GET URLs
	// when no public base URL is set (S3 only).
	PresignExpiry time.Duration
}

// CostsConfig is SPEC §5's settings.
type CostsConfig struct {
	Cards        costs.Cards // built-in cards merged with GILF_VALIDATION_COST_RATES
	E2BBudgetUSD float64     // GILF_E2B_BUDGET_USD
}

func loadEvidence(getenv func(string) string, errs []error) (EvidenceConfig, []error) {
	var c EvidenceConfig
	on, err := flag01(getenv, "GILF_EVIDENCE_ARTIFACTS")
	if err != nil {
		errs = append(errs, err)
	}
	require, err := flag01(getenv, "GILF_EVIDENCE_REQUIRE_ARTIFACTS")
	if err != nil {
		errs = append(errs, err)
	}
	c.Options = evidence.NewOptions(on, require)
	c.S3Bucket = strings.TrimSpace(getenv("GILF_EVIDENCE_S3_BUCKET"))
	c.S3Endpoint = strings.TrimSpace(getenv("GILF_EVIDENCE_S3_ENDPOINT"))
	c.S3Region = strings.TrimSpace(getenv("GILF_EVIDENCE_S3_REGION"))
	c.S3Prefix = strings.TrimSpace(getenv("GILF_EVIDENCE_S3_PREFIX"))
	if _, err := evidence.CleanPrefix(c.S3Prefix); err != nil {
		errs = append(errs, fmt.Errorf("GILF_EVIDENCE_S3_PREFIX=%q: %w", c.S3Prefix, err))
	}
	if c.S3PathStyle, err = flag01(getenv, "GILF_EVIDENCE_S3_PATH_STYLE"); err != nil {
		errs = append(errs, err)
	}
	c.PublicBaseURL = strings.TrimSpace(getenv("GILF_EVIDENCE_PUBLIC_BASE_URL"))
	if c.PublicBaseURL != "" && !strings.HasPrefix(c.PublicBaseURL, "https://") && !strings.HasPrefix(c.PublicBaseURL, "http://") {
		errs = append(errs, fmt.Errorf("GILF_EVIDENCE_PUBLIC_BASE_URL=%q: want an http(s) URL", c.PublicBaseURL))
	}
	if c.PresignExpiry, err = millis(getenv, "GILF_EVIDENCE_PRESIGN_EXPIRY_MS"); err != nil {
		errs = append(errs, err)
	} else if c.PresignExpiry > evidence.MaxPresignExpiry {
		errs = append(errs, fmt.Errorf("GILF_EVIDENCE_PRESIGN_EXPIRY_MS: over the %s S3 allows", evidence.MaxPresignExpiry))
	}
	return c, errs
}

func loadCosts(getenv func(string) string, errs []error) (CostsConfig, []error) {
	var c CostsConfig
	var err error
	if c.Cards, err = costs.LoadCards(getenv("GILF_VALIDATION_COST_RATES")); err != nil {
		errs = append(errs, err) // costs names GILF_VALIDATION_COST_RATES itself
	}
	if c.E2BBudgetUSD, err = costs.ParseBudget(getenv("GILF_E2B_BUDGET_USD")); err != nil {
		errs = append(errs, fmt.Errorf("GILF_E2B_BUDGET_USD: %w", err))
	}
	return c, errs
}

// openEvidenceStore opens the configured evidence store: S3 when a bucket
// is set, else the filesystem store under the data dir. It returns nil
// when evidence is off. Credentials come from the standard AWS chain.
func openEvidenceStore(ctx context.Context, c EvidenceConfig, dataDir string, log *slog.Logger) (evidence.Store, func() error, error) {
	if !c.Options.Enabled {
		return nil, func() error { return nil }, nil
	}
	if c.S3Bucket != "" {
		s, err := evidence.NewS3Store(ctx, evidence.S3Options{
			Bucket: c.S3Bucket, Endpoint: c.S3Endpoint, Region: c.S3Region, Prefix: c.S3Prefix,
			PathStyle: c.S3PathStyle, PublicBaseURL: c.PublicBaseURL, PresignExpiry: c.PresignExpiry,
		}, log)
		if err != nil {
			return nil, nil, fmt.Errorf("open S3 evidence store: %w", err)
		}
		return s, func() error { return nil }, nil
	}
	s, err := evidence.NewFSStore(filepath.Join(dataDir, "evidence"), evidence.FSOptions{Prefix: c.S3Prefix, PublicBaseURL: c.PublicBaseURL})
	if err != nil {
		return nil, nil, fmt.Errorf("open evidence directory: %w", err)
	}
	return s, s.Close, nil
}
