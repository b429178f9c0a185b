package evidence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Input is what the artifact hook works on for one run.
type Input struct {
	Scope    Scope
	Findings []validation.Finding
	// Steps are the run's step results; their output becomes artifacts.
	Steps []validation.StepResult
	// Extra are artifacts the worker built itself (traces, screenshots,
	// logs), uploaded after the step artifacts.
	Extra []Artifact
}

// Result is what the hook produced.
type Result struct {
	// Findings are the findings to report: with references attached (and
	// the require step applied) on success, the original findings when
	// the hook failed or is disabled.
	Findings []validation.Finding
	Stored   []Stored
	Failures []UploadFailure
	// Err describes why the hook failed; empty on success. Upload failures
	// are not hook failures: they are in Failures.
	Err string
}

// Run is the artifact hook: build → upload → attach → require. It does
// nothing when opts.Enabled is false. An error or a panic anywhere in it is
// logged, described in Result.Err, and the original findings go on
// unchanged.
func Run(ctx context.Context, logger *slog.Logger, opts Options, store Store, in Input) (res Result) {
	if !opts.Enabled {
		return Result{Findings: in.Findings}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if p := recover(); p != nil {
			res = failed(ctx, logger, in, fmt.Errorf("panic: %v", p))
		}
	}()
	if store == nil {
		return failed(ctx, logger, in, errors.New("no evidence store configured"))
	}
	if _, err := Key(in.Scope, KindLog, "probe"); err != nil {
		return failed(ctx, logger, in, err)
	}
	artifacts := BuildArtifacts(in.Steps, opts.budget())
	artifacts = append(artifacts, in.Extra...)
	findings, stored, failures := Attach(ctx, store, in.Scope, in.Findings, artifacts)
	for _, f := range failures {
		logger.WarnContext(ctx, "evidence upload failed", logkey.Key, f.Key, "kind", string(f.Kind), logkey.Step, f.Step, logkey.Reason, f.Reason)
	}
	if opts.Require {
		findings = Require(findings)
	}
	return Result{Findings: findings, Stored: stored, Failures: failures}
}

func failed(ctx context.Context, logger *slog.Logger, in Input, err error) Result {
	logger.ErrorContext(ctx, "evidence hook failed; findings go on unchanged", logkey.Err, err)
	return Result{Findings: in.Findings, Err: "evidence hook: " + err.Error()}
}
