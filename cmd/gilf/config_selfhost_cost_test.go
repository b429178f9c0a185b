package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/executors"
)

func TestSelfHostResources(t *testing.T) {
	for _, c := range []struct {
		name, cpu, mem string
		want           executors.Resources
		err            string
	}{
		{"unset", "", "", executors.Resources{}, ""},
		{"both", "4", "8", executors.Resources{VCPU: 4, MemoryGiB: 8}, ""},
		{"fractions", "0.5", "0.25", executors.Resources{VCPU: 0.5, MemoryGiB: 0.25}, ""},
		{"at the limits", "1024", "16384", executors.Resources{VCPU: MaxSelfHostVCPU, MemoryGiB: MaxSelfHostMemoryGiB}, ""},
		{"vcpu over", "1024.5", "8", executors.Resources{}, "GILF_SELF_HOST_VCPU=\"1024.5\""},
		{"memory over", "4", "16385", executors.Resources{}, "GILF_SELF_HOST_MEMORY_GIB=\"16385\""},
		{"zero", "0", "8", executors.Resources{}, "GILF_SELF_HOST_VCPU=\"0\""},
		{"not a number", "four", "8", executors.Resources{}, "GILF_SELF_HOST_VCPU=\"four\""},
		{"only one", "4", "", executors.Resources{}, "set both or neither"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"GILF_SELF_HOST_VCPU": c.cpu, "GILF_SELF_HOST_MEMORY_GIB": c.mem}
			got, errs := selfHostResources(func(k string) string { return env[k] }, nil)
			if got != c.want {
				t.Errorf("resources %+v, want %+v", got, c.want)
			}
			switch {
			case c.err == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case c.err != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), c.err)):
				t.Errorf("errors %v, want one naming %q", errs, c.err)
			}
		})
	}
}

// A self-host run given its resources is priced by a "self-host" card,
// as serve wires it: the settings through loadServe to the executor's
// result, the card from GILF_VALIDATION_COST_RATES.
func TestSelfHostRunIsPriced(t *testing.T) {
	env := map[string]string{
		"GILF_SELF_HOST_COMMAND": "/bin/true", "GILF_SELF_HOST_VCPU": "2", "GILF_SELF_HOST_MEMORY_GIB": "4",
	}
	sc, errs := loadServe(func(k string) string { return env[k] }, nil)
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), "SELF_HOST") {
			t.Fatal(err)
		}
	}
	if sc.SelfHost.Resources != (executors.Resources{VCPU: 2, MemoryGiB: 4}) {
		t.Fatalf("resources %+v", sc.SelfHost.Resources)
	}
	cards, err := costs.LoadCards(`{"self-host":{"vcpuUsdPerSec":0.00001,"memoryGibUsdPerSec":0.000002}}`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := cards.Estimate(costs.Span{Executor: "self-host", Started: start, Finished: start.Add(100 * time.Second),
		VCPU: sc.SelfHost.Resources.VCPU, MemoryGiB: sc.SelfHost.Resources.MemoryGiB})
	if s.USD == nil || *s.USD < 0.00279999 || *s.USD > 0.00280001 {
		t.Errorf("self-host run of 100 s at 2 vCPU, 4 GiB: %v, want $0.0028", s.USD)
	}
}
