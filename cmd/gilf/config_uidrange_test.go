package main

import (
	"strings"
	"testing"
)

// A uid range smaller than the local runs that can be under way at once is
// refused at start; at exactly that many it is taken.
func TestUIDRangeRefusedAtStart(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{name: "default range, default workers", env: map[string]string{}},
		{name: "one uid per worker", env: map[string]string{"GILF_LOCAL_UID_RANGE": "200000-200003", "GILF_WORKERS": "4"}},
		{name: "one uid short", env: map[string]string{"GILF_LOCAL_UID_RANGE": "200000-200002", "GILF_WORKERS": "4"}, wantErr: "GILF_LOCAL_UID_RANGE holds 3 uids, fewer than the 4"},
		{name: "a local shadow lane doubles the runs", env: map[string]string{"GILF_LOCAL_UID_RANGE": "200000-200003", "GILF_WORKERS": "4", "GILF_VALIDATION_SHADOW_EXECUTOR": "local"}, wantErr: "fewer than the 8"},
		{name: "no local validation, no check", env: map[string]string{"GILF_ALLOW_LOCAL_VALIDATION": "0", "GILF_LOCAL_UID_RANGE": "200000-200000", "GILF_WORKERS": "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"GILF_ALLOW_LOCAL_VALIDATION": "1"}
			for k, v := range tt.env {
				env[k] = v
			}
			getenv := envMap(env)
			cfg, err := Load(getenv)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			sc, errs := loadServe(getenv, nil)
			for _, e := range errs {
				if e != nil {
					t.Fatalf("loadServe: %v", e)
				}
			}
			err = checkUIDRange(cfg.Validation, sc)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkUIDRange: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkUIDRange: %v, want %q", err, tt.wantErr)
			}
			var found bool
			for _, e := range checkServeSetup(cfg, sc, getenv, nil) {
				found = found || (e != nil && strings.Contains(e.Error(), "GILF_LOCAL_UID_RANGE holds"))
			}
			if found != (tt.wantErr != "") {
				t.Errorf("checkServeSetup reports the range: %v, want %v", found, tt.wantErr != "")
			}
		})
	}
}
