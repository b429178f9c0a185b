package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/store"
)

// Defaults and bounds of the job and retention settings. The retry
// defaults are the store's own (store.DefaultMaxAttempts,
// store.DefaultRetryBase, store.DefaultRetryCap).
const (
	// MaxJobAttempts bounds GILF_JOB_MAX_ATTEMPTS: past a few dozen
	// attempts a job is not failing transiently.
	MaxJobAttempts = 100
	// MinJobRetryBase bounds GILF_JOB_RETRY_BASE_MS from below: retries
	// closer than this hammer the API that just failed.
	MinJobRetryBase = 100 * time.Millisecond
	// DefaultRetentionDays is GILF_RETENTION_DAYS's default; 0 keeps
	// everything forever.
	DefaultRetentionDays = 30
	// MaxRetentionDays bounds GILF_RETENTION_DAYS (ten years).
	MaxRetentionDays = 3650
	// PruneInterval is how often `gilf serve` prunes the store when
	// retention is on (and once at start).
	PruneInterval = time.Hour
)

// JobsConfig is how jobs are retried and how long the store keeps what
// they and their deliveries left behind.
type JobsConfig struct {
	// MaxAttempts is GILF_JOB_MAX_ATTEMPTS: claims before a transient
	// failure or an expired lease ends a job dead.
	MaxAttempts int
	// RetryBase and RetryMax are GILF_JOB_RETRY_BASE_MS and
	// GILF_JOB_RETRY_MAX_MS: the backoff is base·2^(attempt-1), capped at
	// max, with jitter.
	RetryBase time.Duration
	RetryMax  time.Duration
	// RetentionDays is GILF_RETENTION_DAYS: delivery bodies and finished
	// jobs' step output older than this many days are pruned; 0 keeps
	// them forever.
	RetentionDays int
}

// Retention is RetentionDays as a duration; 0 means keep forever.
func (j JobsConfig) Retention() time.Duration {
	return time.Duration(j.RetentionDays) * 24 * time.Hour
}

// StoreOptions are the store options these settings set; every command
// that opens the store uses them, so `gilf jobs` and `gilf serve` agree.
func (j JobsConfig) StoreOptions() store.Options {
	return store.Options{MaxAttempts: j.MaxAttempts, RetryBase: j.RetryBase, RetryCap: j.RetryMax}
}

func loadJobs(getenv func(string) string, errs []error) (JobsConfig, []error) {
	j := JobsConfig{
		MaxAttempts:   store.DefaultMaxAttempts,
		RetryBase:     store.DefaultRetryBase,
		RetryMax:      store.DefaultRetryCap,
		RetentionDays: DefaultRetentionDays,
	}
	var err error
	if j.MaxAttempts, err = intSetting(getenv, "GILF_JOB_MAX_ATTEMPTS", j.MaxAttempts, 1, MaxJobAttempts); err != nil {
		errs = append(errs, err)
	}
	if j.RetentionDays, err = intSetting(getenv, "GILF_RETENTION_DAYS", j.RetentionDays, 0, MaxRetentionDays); err != nil {
		errs = append(errs, err)
	}
	errs = millisOr(getenv, "GILF_JOB_RETRY_BASE_MS", &j.RetryBase, errs)
	errs = millisOr(getenv, "GILF_JOB_RETRY_MAX_MS", &j.RetryMax, errs)
	if j.RetryBase < MinJobRetryBase {
		errs = append(errs, fmt.Errorf("GILF_JOB_RETRY_BASE_MS=%q: want at least %d", getenv("GILF_JOB_RETRY_BASE_MS"), MinJobRetryBase.Milliseconds()))
	}
	if j.RetryMax < j.RetryBase {
		errs = append(errs, fmt.Errorf("GILF_JOB_RETRY_MAX_MS=%d is below GILF_JOB_RETRY_BASE_MS=%d: the cap must be at least the first delay",
			j.RetryMax.Milliseconds(), j.RetryBase.Milliseconds()))
	}
	return j, errs
}

// intSetting reads a whole number in [lo, hi], def when unset.
func intSetting(getenv func(string) string, name string, def, lo, hi int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return def, fmt.Errorf("%s=%q: want a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}
