package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gilf-review/gilf/executors"
)

// Bounds of GILF_SELF_HOST_VCPU and GILF_SELF_HOST_MEMORY_GIB: more than
// any one machine a self-host command starts, so a larger value is a typo
// (GiB given in MiB), not a machine.
const (
	MaxSelfHostVCPU      = 1024
	MaxSelfHostMemoryGiB = 16384
)

// selfHostResources reads what the self-host command's compute is given,
// for the cost estimate: GILF_SELF_HOST_VCPU and GILF_SELF_HOST_MEMORY_GIB,
// both or neither (unset: unknown, the run has no estimate). A
// "self-host" card in GILF_VALIDATION_COST_RATES then prices each run as
// any executor's: seconds × (vCPU × rate + GiB × rate).
func selfHostResources(getenv func(string) string, errs []error) (executors.Resources, []error) {
	var r executors.Resources
	read := func(name string, limit float64, into *float64) bool {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return false
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > limit {
			errs = append(errs, fmt.Errorf("%s=%q: want a number above 0 and at most %v", name, v, limit))
			return true
		}
		*into = f
		return true
	}
	cpu := read("GILF_SELF_HOST_VCPU", MaxSelfHostVCPU, &r.VCPU)
	mem := read("GILF_SELF_HOST_MEMORY_GIB", MaxSelfHostMemoryGiB, &r.MemoryGiB)
	if cpu != mem {
		errs = append(errs, errors.New("GILF_SELF_HOST_VCPU and GILF_SELF_HOST_MEMORY_GIB price a self-host run together: set both or neither"))
		return executors.Resources{}, errs
	}
	if r.VCPU == 0 || r.MemoryGiB == 0 {
		return executors.Resources{}, errs
	}
	return r, errs
}
