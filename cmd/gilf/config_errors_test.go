package main

import (
	"strings"
	"testing"
)

// TestUnconfiguredExecutorNamesItsSettings: a default executor that is
// not configured is named with the setting that configures it — E2B's
// key by its variable — whether or not another executor is configured.
func TestUnconfiguredExecutorNamesItsSettings(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"GILF_VALIDATION_EXECUTOR": "e2b"},
			[]string{`GILF_VALIDATION_EXECUTOR="e2b" chooses managed-e2b, which is not configured: set E2B_API_KEY`}},
		{map[string]string{"GILF_VALIDATION_EXECUTOR": "e2b", "GILF_ALLOW_LOCAL_VALIDATION": "1"},
			[]string{"configured here (local)", "configure managed-e2b: set E2B_API_KEY"}},
		{map[string]string{"GILF_VALIDATION_EXECUTOR": "selfhost", "GILF_ALLOW_LOCAL_VALIDATION": "1"},
			[]string{"configure self-host: set GILF_SELF_HOST_COMMAND"}},
		{map[string]string{},
			[]string{"no executor is configured", "GILF_ALLOW_LOCAL_VALIDATION=1", "E2B_API_KEY", "GILF_CF_SANDBOX_ENABLED=1"}},
	}
	for _, tt := range tests {
		getenv := serveEnvMap(tt.env)
		cfg, err := Load(getenv)
		if err != nil {
			t.Fatal(err)
		}
		sc, errs := loadServe(getenv, nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		err = checkDefaultExecutor(cfg.Validation, sc)
		if err == nil {
			t.Fatalf("%v: no error", tt.env)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error lacks %q:\n%v", tt.env, w, err)
			}
		}
	}
}
