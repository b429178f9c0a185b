// Package executors holds the one plugin interface of gilf, Executor, and
// the selection of an executor from configuration.
package executors

import (
	"context"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Executor runs a validation plan somewhere isolated.
//
// Lifecycle, which every implementation keeps and executortest.Conformance
// checks:
//
//   - Run runs req.Plan's steps in order and returns one StepResult per
//     planned step, in plan order. Steps with Inconclusive set are not run
//     and end StatusInconclusive. When a step fails, times out or is killed
//     and it is the install step, every later step ends StatusNotRun.
//   - A control that says no before anything ran (unconfigured, tier not
//     met, …) is returned as a *validation.Refusal error with an empty
//     Result. Nothing was started.
//   - Any other error is an infrastructure failure (sandbox API down,
//     setup or cleanup failure): the job is retried, it is never reported
//     as a test failure. A setup or cleanup failure fails the run even
//     when every command exited 0.
//   - When ctx is cancelled, Run stops every process and remote resource
//     it started, returns within a bounded time (seconds, not the step
//     budget), and reports the interrupted step StatusKilled with the
//     rest StatusNotRun, together with ctx.Err().
//   - Cleanup (processes, sandboxes, temp files) runs in every outcome,
//     including cancellation and a panic inside Run.
//   - Run may be called concurrently; runs share nothing but req.Dir,
//     which Run treats as read-only.
type Executor interface {
	// Name is the canonical executor name ("local", "managed-e2b", …).
	Name() string
	Run(ctx context.Context, req Request) (Result, error)
}

// Request is one run of a plan.
type Request struct {
	Plan validation.Plan
	// Dir is the extracted repository root on the worker. Executors never
	// write to it; those that need a private copy or an archive make one.
	Dir string
	// Root is the command root Dir must lie in: the job's checkout
	// directory, or the path the operator gave gilf validate. The command
	// root control (review.Validate) refuses a Dir outside it.
	Root string
	// Secrets are values to redact from every byte of output.
	Secrets []validation.Secret
	// Labels name the run for remote metadata (repo, job); never secret.
	Labels map[string]string
	// Progress, when set, is told when each step starts. It must not block.
	Progress func(step string, started time.Time)
	// Run holds the per-run settings of the merged repository config's
	// nested crabbox and e2b objects (run-specific values win over the
	// worker's, SPEC §3.1). Executors that have no such settings ignore it.
	Run RunConfig
}

// RunConfig is the per-run part of an executor's settings. Empty fields
// keep the executor's own configuration.
type RunConfig struct {
	CrabboxProvider string
	CrabboxClass    string
	E2BTemplate     string
	// E2BTimeout can only shorten the sandbox lifetime the worker allows
	// (GILF_E2B_TIMEOUT_MS): a repository cannot buy longer sandboxes.
	E2BTimeout time.Duration
}

// Resources describe what a run was given, for cost estimates. Zero means
// unknown.
type Resources struct {
	VCPU      float64 `json:"vcpu,omitempty"`
	MemoryGiB float64 `json:"memoryGib,omitempty"`
}

// Result is what an executor observed.
type Result struct {
	Executor string                  `json:"executor"`
	Tier     validation.Tier         `json:"isolationTier"`
	Platform validation.Platform     `json:"platform"`
	Steps    []validation.StepResult `json:"steps"`
	// Integrity, when set, says why the executor's report cannot be
	// trusted (forged, duplicate or missing markers): the run is
	// inconclusive.
	Integrity string `json:"integrity,omitempty"`
	// SecretsWithheld names the worker secrets that were kept out of the
	// sandbox (names only).
	SecretsWithheld []string  `json:"secretsWithheld,omitempty"`
	Resources       Resources `json:"resources"`
	Started         time.Time `json:"started"`
	Finished        time.Time `json:"finished"`
	// Notes are plain-words facts for the record (network given to the
	// install step, cgroup limits in force, …).
	Notes []string `json:"notes,omitempty"`
	// Phases are where the run's time went, for the record; nil when the
	// executor does not time them.
	Phases []validation.Phase `json:"phases,omitempty"`
}

// RecordEgress sets the egress record of every step that ran, for an
// executor that sees none of its steps' connections itself: by says who
// enforces the policy (the provider, the self-host command's intent, or
// nobody), registry is the allow-list a registry step was given.
// Steps are in plan order; a step that did not run (not run, or an
// inconclusive script never started) gets none.
func RecordEgress(plan validation.Plan, steps []validation.StepResult, by validation.Enforcement, registry []string) {
	for i := range steps {
		s := &steps[i]
		if s.Status == validation.StatusNotRun || (i < len(plan.Steps) && plan.Steps[i].Inconclusive != "") {
			continue
		}
		e := &validation.Egress{Network: s.Network, Enforcement: by}
		if s.Network == validation.NetworkRegistry {
			e.AllowList = append([]string(nil), registry...)
		}
		s.Egress = e
	}
}

// ProgramAvailable refuses with validation.CodeExecutorUnavailable when
// prog, the program an executor runs on the worker (the crabbox CLI, the
// self-host command), cannot be found or executed: the executor is
// configured but cannot be reached, and nothing is started.
func ProgramAvailable(executor, prog string) *validation.Refusal {
	if _, err := exec.LookPath(prog); err != nil {
		return validation.Refuse(validation.CodeExecutorUnavailable, "%s is configured, but its program %q cannot be run on this worker", executor, filepath.Base(prog))
	}
	return nil
}
