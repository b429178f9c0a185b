package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/store"
)

func TestLoadJobs(t *testing.T) {
	defaults := JobsConfig{MaxAttempts: store.DefaultMaxAttempts, RetryBase: store.DefaultRetryBase,
		RetryMax: store.DefaultRetryCap, RetentionDays: DefaultRetentionDays}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want JobsConfig
	}{
		{"defaults", nil, defaults},
		{"set", map[string]string{"GILF_JOB_MAX_ATTEMPTS": "8", "GILF_JOB_RETRY_BASE_MS": "1000",
			"GILF_JOB_RETRY_MAX_MS": "60000", "GILF_RETENTION_DAYS": "7"},
			JobsConfig{MaxAttempts: 8, RetryBase: time.Second, RetryMax: time.Minute, RetentionDays: 7}},
		{"bounds", map[string]string{"GILF_JOB_MAX_ATTEMPTS": "1", "GILF_JOB_RETRY_BASE_MS": "100",
			"GILF_JOB_RETRY_MAX_MS": "100", "GILF_RETENTION_DAYS": "0"},
			JobsConfig{MaxAttempts: 1, RetryBase: 100 * time.Millisecond, RetryMax: 100 * time.Millisecond, RetentionDays: 0}},
		{"upper bounds", map[string]string{"GILF_JOB_MAX_ATTEMPTS": "100", "GILF_RETENTION_DAYS": "3650"},
			JobsConfig{MaxAttempts: 100, RetryBase: store.DefaultRetryBase, RetryMax: store.DefaultRetryCap, RetentionDays: 3650}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := loadJobs(func(k string) string { return tt.env[k] }, nil)
			if len(errs) != 0 {
				t.Fatalf("loadJobs: %v", errs)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("loadJobs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadJobsErrors(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		says string
	}{
		{map[string]string{"GILF_JOB_MAX_ATTEMPTS": "0"}, `GILF_JOB_MAX_ATTEMPTS="0": want a whole number from 1 to 100`},
		{map[string]string{"GILF_JOB_MAX_ATTEMPTS": "101"}, `GILF_JOB_MAX_ATTEMPTS="101": want a whole number from 1 to 100`},
		{map[string]string{"GILF_JOB_MAX_ATTEMPTS": "five"}, `GILF_JOB_MAX_ATTEMPTS="five"`},
		{map[string]string{"GILF_RETENTION_DAYS": "-1"}, `GILF_RETENTION_DAYS="-1": want a whole number from 0 to 3650`},
		{map[string]string{"GILF_RETENTION_DAYS": "3651"}, `GILF_RETENTION_DAYS="3651"`},
		{map[string]string{"GILF_JOB_RETRY_BASE_MS": "99"}, `GILF_JOB_RETRY_BASE_MS="99": want at least 100`},
		{map[string]string{"GILF_JOB_RETRY_BASE_MS": "0"}, `GILF_JOB_RETRY_BASE_MS="0": want a positive number`},
		{map[string]string{"GILF_JOB_RETRY_MAX_MS": "86400001"}, `GILF_JOB_RETRY_MAX_MS="86400001": over the 24h0m0s maximum`},
		{map[string]string{"GILF_JOB_RETRY_BASE_MS": "2000", "GILF_JOB_RETRY_MAX_MS": "1000"},
			"GILF_JOB_RETRY_MAX_MS=1000 is below GILF_JOB_RETRY_BASE_MS=2000"},
	} {
		_, errs := loadJobs(func(k string) string { return tt.env[k] }, nil)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.says) {
			t.Errorf("loadJobs(%v) = %v; want one error saying %q", tt.env, errs, tt.says)
		}
	}
}

func TestJobsConfigStoreOptions(t *testing.T) {
	j := JobsConfig{MaxAttempts: 3, RetryBase: time.Second, RetryMax: time.Minute, RetentionDays: 2}
	want := store.Options{MaxAttempts: 3, RetryBase: time.Second, RetryCap: time.Minute}
	if diff := cmp.Diff(want, j.StoreOptions(), cmp.Comparer(func(a, b func() time.Time) bool { return a == nil && b == nil }),
		cmp.Comparer(func(a, b func() float64) bool { return a == nil && b == nil })); diff != "" {
		t.Errorf("StoreOptions (-want +got):\n%s", diff)
	}
	if got := j.Retention(); got != 48*time.Hour {
		t.Errorf("Retention = %v; want 48h", got)
	}
}
