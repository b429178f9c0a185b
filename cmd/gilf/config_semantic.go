package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/semantic"
)

// SemanticConfig is the semantic (model) reviewer: any OpenAI-compatible
// chat-completions endpoint. Off unless GILF_SEMANTIC_REVIEW_URL is set.
type SemanticConfig struct {
	URL           string        // GILF_SEMANTIC_REVIEW_URL: the API's base URL (…/v1)
	Model         string        // GILF_SEMANTIC_REVIEW_MODEL
	APIKey        Secret        // GILF_SEMANTIC_REVIEW_API_KEY
	Timeout       time.Duration // GILF_SEMANTIC_REVIEW_TIMEOUT_MS, default semantic.DefaultTimeout
	MaxInputBytes int           // GILF_SEMANTIC_REVIEW_MAX_INPUT_BYTES, default semantic.DefaultMaxInputBytes
	// SkipOnValidationFailure is GILF_SKIP_CODEX_ON_VALIDATION_FAILURE
	// (exactly "1"): the skip rule of review.SemanticShouldRun.
	SkipOnValidationFailure bool
}

// Enabled reports whether a semantic reviewer is configured.
func (c SemanticConfig) Enabled() bool { return c.URL != "" }

func loadSemantic(getenv func(string) string, errs []error) (SemanticConfig, []error) {
	c := SemanticConfig{
		URL:                     strings.TrimSpace(getenv("GILF_SEMANTIC_REVIEW_URL")),
		Model:                   strings.TrimSpace(getenv("GILF_SEMANTIC_REVIEW_MODEL")),
		APIKey:                  NewSecret(strings.TrimSpace(getenv("GILF_SEMANTIC_REVIEW_API_KEY"))),
		Timeout:                 semantic.DefaultTimeout,
		MaxInputBytes:           semantic.DefaultMaxInputBytes,
		SkipOnValidationFailure: review.SkipFlag(strings.TrimSpace(getenv("GILF_SKIP_CODEX_ON_VALIDATION_FAILURE"))),
	}
	errs = millisOr(getenv, "GILF_SEMANTIC_REVIEW_TIMEOUT_MS", &c.Timeout, errs)
	if v := strings.TrimSpace(getenv("GILF_SEMANTIC_REVIEW_MAX_INPUT_BYTES")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < semantic.MinInputBytes {
			errs = append(errs, fmt.Errorf("GILF_SEMANTIC_REVIEW_MAX_INPUT_BYTES=%q: want a whole number of bytes, at least %d", v, semantic.MinInputBytes))
		} else {
			c.MaxInputBytes = n
		}
	}
	if v := strings.TrimSpace(getenv("GILF_SKIP_CODEX_ON_VALIDATION_FAILURE")); v != "" && v != "0" && v != "1" {
		errs = append(errs, fmt.Errorf("GILF_SKIP_CODEX_ON_VALIDATION_FAILURE=%q: want 0 or 1", v))
	}
	if !c.Enabled() {
		if c.Model != "" || c.APIKey.IsSet() {
			errs = append(errs, errors.New("GILF_SEMANTIC_REVIEW_MODEL or GILF_SEMANTIC_REVIEW_API_KEY is set but GILF_SEMANTIC_REVIEW_URL is not: the semantic review is off"))
		}
		return c, errs
	}
	if _, err := c.reviewer(); err != nil {
		errs = append(errs, fmt.Errorf("GILF_SEMANTIC_REVIEW_*: %w", err))
	}
	return c, errs
}

// reviewer builds the configured reviewer; nil (and no error) when off.
func (c SemanticConfig) reviewer() (review.Reviewer, error) {
	if !c.Enabled() {
		return nil, nil
	}
	r, err := semantic.New(semantic.Options{BaseURL: c.URL, Model: c.Model, APIKey: c.APIKey.Reveal(),
		Timeout: c.Timeout, MaxInputBytes: c.MaxInputBytes})
	if err != nil {
		return nil, err
	}
	return r, nil
}
