package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/internal/workdir"
	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/validation"
)

const validateUsage = `usage: gilf validate [--json] [--executor NAME] [--timeout D] [--base BASE] [--retry=false] PATH

Validate the checkout at PATH (a directory, or a .tar.gz/.tgz whose single
top directory is the repository) the way gilf validates a pull request, and
print the review exactly as it would be posted (or the record as JSON).
Running it on your own code is the opt-in for the local executor, which is
the default here. A step that fails runs once more; with --base, the
checkout BASE (a directory or archive) runs install and the failed steps,
and each failure is told introduced, preexisting, flaky or unknown.

exit codes: 0 every step that ran passed, or every failure is preexisting
or flaky; 1 a failure is introduced or of unknown origin; 3 nothing was
proven (gap, skipped, refused, inconclusive); 2 usage or infrastructure
error; 130 interrupted.

flags:
`

// validateFlags are the flags of gilf validate.
type validateFlags struct {
	json     bool
	executor string
	timeout  time.Duration
	path     string
	base     string
	retry    bool
}

// parseValidateFlags accepts flags before and after PATH.
func parseValidateFlags(args []string, stderr io.Writer) (validateFlags, error) {
	var f validateFlags
	fs := newFlagSet("validate", validateUsage, stderr, true)
	fs.BoolVar(&f.json, "json", false, "print the validation record as JSON instead of the review")
	fs.StringVar(&f.executor, "executor", "", "executor `NAME` (default: GILF_VALIDATION_EXECUTOR, else local)")
	fs.BoolVar(&f.retry, "retry", true, "run a failed step once more at PATH; one that passes is flaky")
	fs.StringVar(&f.base, "base", "", "the base checkout `BASE` (a directory or .tar.gz) to compare failures with")
	fs.DurationVar(&f.timeout, "timeout", 0, "timeout `D` of each step, install included (default: GILF_VALIDATION_STEP_TIMEOUT_MS, else 10m)")
	var paths []string
	for {
		if err := fs.Parse(args); err != nil {
			return f, err
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(paths) != 1:
		fs.Usage()
		return f, fmt.Errorf("want exactly one PATH, got %d", len(paths))
	case f.timeout < 0 || f.timeout > MaxTimeout:
		return f, fmt.Errorf("--timeout %s: want a positive duration up to %s", f.timeout, MaxTimeout)
	}
	f.path = paths[0]
	return f, nil
}

func runValidate(ctx context.Context, env Env, args []string) int {
	f, err := parseValidateFlags(args, env.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf validate: %v\n", err)
		return exitUsage
	}
	cfg, err := Load(env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf validate: configuration:\n%v\n", err)
		return exitUsage
	}
	log := newLogger(env.Stderr, cfg.Log)
	rec, runs, err := validatePath(ctx, env, cfg, f, log)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(env.Stderr, "gilf validate: interrupted: %v\n", err)
			return exitInterrupted
		}
		fmt.Fprintf(env.Stderr, "gilf validate: %v\n", err)
		return exitUsage
	}
	secrets := append(WorkerSecrets(env.Environ), NpmrcSecrets(env.Getenv)...)
	opts, err := validateStages(ctx, cfg, f.path, &rec, runs, secrets, log)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf validate: %v\n", err)
		return exitUsage
	}
	// The secret-leak control: what is printed is scanned for the
	// worker's secrets first.
	var out, what string
	if f.json {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		if err := enc.Encode(newRecordView(rec)); err != nil {
			fmt.Fprintf(env.Stderr, "gilf validate: write record: %v\n", err)
			return exitUsage
		}
		out, what = b.String(), "record"
	} else {
		out, what = review.Render(rec, opts), "review"
	}
	out, leak := review.GuardOutput(out, secrets)
	if !leak.Passed {
		log.Error("secret found in the "+what+" before printing; redacted", logkey.RefusalCode, leak.Code, logkey.Detail, leak.Detail)
	}
	if _, err := io.WriteString(env.Stdout, out); err != nil {
		fmt.Fprintf(env.Stderr, "gilf validate: write %s: %v\n", what, err)
		return exitUsage
	}
	if review.CheckConclusion(rec, false) == review.ConclusionNeutral && rec.Outcome == validation.OutcomeFailed {
		return exitOK // every failure preexisting or flaky: the record says so
	}
	return exitCode(rec.Outcome)
}

// exitCode maps an outcome to gilf validate's exit code.
func exitCode(o validation.Outcome) int {
	switch o {
	case validation.OutcomePassed:
		return exitOK
	case validation.OutcomeFailed:
		return exitFailed
	case validation.OutcomeGap, validation.OutcomeSkipped, validation.OutcomeRefused, validation.OutcomeInconclusive:
		return exitUnproven
	}
	return exitUsage
}

// validatePath runs the plan → select → run → record path on one
// checkout. An error is a usage or infrastructure failure; every other
// ending is a record.
func validatePath(ctx context.Context, env Env, cfg Config, f validateFlags, log *slog.Logger) (validation.Record, []review.LaneRun, error) {
	sweepLeftovers(log, os.TempDir(), validateTempPrefix)
	dir, cleanup, err := checkout(ctx, f.path, env.Stderr)
	if err != nil {
		return validation.Record{}, nil, err
	}
	defer cleanup()
	var baseDir string
	if f.base != "" {
		var cleanBase func()
		baseDir, cleanBase, err = checkout(ctx, f.base, env.Stderr)
		if err != nil {
			return validation.Record{}, nil, fmt.Errorf("--base: %w", err)
		}
		defer cleanBase()
	}

	opts := cfg.Validation.PlanOptions()
	if f.timeout > 0 {
		opts.StepTimeout, opts.InstallTimeout = f.timeout, f.timeout
	}
	plan := validation.BuildPlan(dir, opts)
	secrets := append(WorkerSecrets(env.Environ), NpmrcSecrets(env.Getenv)...)

	sel, source := validateSelection(cfg.Validation, f.executor)
	choice := sel.Resolve()
	notes := []string{choiceNote(choice, source)}
	if plan.Gap != nil {
		return review.NewRecord(review.RecordInput{Plan: plan, Notes: notes}), nil, nil
	}
	set, err := executorSet(cfg, env.Getenv, env.Environ, secrets, log)
	if err != nil {
		return validation.Record{}, nil, err
	}
	exec, refusal := executors.Select(sel, set)
	if refusal != nil {
		log.Info("executor refused", logkey.RefusalCode, refusal.Code, logkey.Executor, choice.Name)
		rec := review.NewRecord(review.RecordInput{Plan: plan, Executor: choice.Name, Refusal: refusal, Notes: notes})
		return rec, nil, nil
	}

	prog := newProgress(env.Stderr, env.StderrTTY)
	// The command root: the directory the operator named, or the one an
	// archive was extracted into.
	root := commandRoot(f.path, dir)
	req := executors.Request{
		Plan:     plan,
		Dir:      dir,
		Root:     root,
		Secrets:  secrets,
		Labels:   map[string]string{"command": "validate"},
		Progress: prog.started,
	}
	stopProgress := prog.run()
	rec, err := review.Validate(ctx, exec, req, notes)
	stopProgress()
	if err != nil {
		return validation.Record{}, nil, fmt.Errorf("run on %s: %w", exec.Name(), err)
	}
	// Whose each failure is, then the failure excerpts, as a served job.
	runs, err := review.Compare(ctx, &rec, originCheck(env, f, exec, req, baseDir, opts, log))
	if err != nil {
		return validation.Record{}, nil, err
	}
	review.Explain(&rec, dir)
	if len(rec.SecretsWithheld) == 0 {
		for _, s := range secrets {
			rec.SecretsWithheld = append(rec.SecretsWithheld, s.Name)
		}
	}
	prog.summary(rec.Steps)
	return rec, runs, nil
}

// originCheck is the failure-origin check of a validate run: the failed
// steps retried once unless --retry=false, and compared with --base's checkout
// when one was given.
func originCheck(env Env, f validateFlags, exec executors.Executor, head executors.Request, baseDir string,
	opts validation.PlanOptions, log *slog.Logger) review.OriginCheck {
	comp := review.OriginCheck{Exec: exec, Head: head, Retry: f.retry, BasePath: f.base, Logger: log,
		BaseReason: "no --base was given",
		Progress:   func(s string) { fmt.Fprintln(env.Stderr, "gilf: "+s) }}
	comp.Head.Progress = nil
	if f.base != "" {
		comp.BaseReason = ""
		comp.Base = &review.BaseSource{Dir: baseDir, DirRoot: commandRoot(f.base, baseDir), PlanOptions: opts}
	}
	return comp
}

// commandRoot is the command root of a checkout: the directory the
// operator named, or the one an archive was extracted into.
func commandRoot(path, dir string) string {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return filepath.Dir(dir)
	}
	return dir
}

// validateStages prices the run and, with GILF_EVIDENCE_ARTIFACTS=1,
// uploads its evidence to the configured store, exactly as a served job
// would. Evidence keys name the checkout directory and a fresh run id in
// place of a commit. A stage failure is printed in the review's notes;
// only a store that cannot be opened is an error.
func validateStages(ctx context.Context, cfg Config, path string, rec *validation.Record, runs []review.LaneRun, secrets []validation.Secret, log *slog.Logger) (review.RenderOptions, error) {
	// The operator runs gilf validate on code they chose: the review is
	// theirs, with the worker's settings and paths named.
	opts := review.RenderOptions{Operator: true}
	store, closeStore, err := openEvidenceStore(ctx, cfg.Evidence, cfg.DataDir, log)
	if err != nil {
		return opts, err
	}
	defer func() {
		if err := closeStore(); err != nil {
			log.Error("close evidence store", logkey.Err, err)
		}
	}()
	runID, err := validation.NewNonce()
	if err != nil {
		return opts, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return opts, fmt.Errorf("resolve %s: %w", path, err)
	}
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(abs), ".tar.gz"), ".tgz")
	stages, err := review.NewStages(review.Stages{Evidence: cfg.Evidence.Options, EvidenceStore: store, Cards: cfg.Costs.Cards, Logger: log, Secrets: secrets})
	if err != nil {
		return opts, err
	}
	res := review.Result{Record: *rec, OriginRuns: runs}
	opts.Notes = append(opts.Notes, stages.AfterRun(ctx, review.Job{Owner: "local", Repo: name, HeadSHA: "validate-" + runID[:16]}, &res, &opts)...)
	*rec = res.Record
	return opts, nil
}

// validateSelection is the executor selection of gilf validate: --executor,
// then GILF_VALIDATION_EXECUTOR, then local. The operator choosing their
// own code is the opt-in for local.
func validateSelection(v ValidationConfig, flagExecutor string) (executors.Selection, string) {
	sel := v.Selection()
	sel.AllowLocal = true
	switch {
	case strings.TrimSpace(flagExecutor) != "":
		sel.Executor, sel.ExecutorSource = flagExecutor, executors.SourceFlag
	case sel.Executor != "":
		sel.ExecutorSource = executors.SourceExecutor
	default:
		sel.Executor, sel.ExecutorSource = executors.NameLocal, executors.SourceValidateDefault
	}
	return sel, string(sel.ExecutorSource)
}

func choiceNote(c executors.Choice, source string) string {
	name := c.Name
	if name == "" {
		name = c.Requested
	}
	return "executor " + name + " chosen by " + source
}

// executorSet builds the executors this process has configuration for,
// exactly as gilf serve does (buildExecutors), with the local executor
// always allowed: the operator running validate on their own code is the
// opt-in. A remote executor's settings come from the same GILF_* variables
// serve reads; serve-only settings (GitHub App, listener) are not needed.
func executorSet(cfg Config, getenv func(string) string, environ []string, secrets []validation.Secret, log *slog.Logger) (executors.Set, error) {
	sc, errs := loadServe(getenv, nil)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("configuration:\n%w", err)
	}
	cfg.Validation.AllowLocal = true
	return buildExecutors(cfg, sc, environ, secrets, log)
}

// checkout returns the repository directory for path: the directory
// itself, or an archive extracted into a temporary directory that cleanup
// removes.
func checkout(ctx context.Context, path string, stderr io.Writer) (dir string, cleanup func(), err error) {
	nothing := func() {}
	st, err := os.Stat(path)
	if err != nil {
		return "", nothing, fmt.Errorf("checkout: %w", err)
	}
	if st.IsDir() {
		return path, nothing, nil
	}
	if !st.Mode().IsRegular() || !(strings.HasSuffix(path, ".tar.gz") || strings.HasSuffix(path, ".tgz")) {
		return "", nothing, fmt.Errorf("checkout: %s is neither a directory nor a .tar.gz/.tgz archive", path)
	}
	tmp, err := workdir.Create("", validateTempPrefix)
	if err != nil {
		return "", nothing, fmt.Errorf("checkout: %w", err)
	}
	cleanup = func() {
		if err := os.RemoveAll(tmp); err != nil {
			fmt.Fprintf(stderr, "gilf validate: remove %s: %v\n", tmp, err)
		}
	}
	file, err := os.Open(path)
	if err != nil {
		cleanup()
		return "", nothing, fmt.Errorf("checkout: %w", err)
	}
	defer file.Close() // read-only: a close error loses nothing
	root, err := archive.Extract(ctx, file, tmp, archive.Limits{})
	if err != nil {
		cleanup()
		return "", nothing, fmt.Errorf("checkout: extract %s: %w", path, err)
	}
	return root, cleanup, nil
}

// validateTempPrefix names the directories gilf validate extracts archives
// into, under the system's temporary directory.
const validateTempPrefix = "gilf-validate-"

// sweepLeftovers removes what killed gilf processes left behind: the
// directories of dir named prefix whose owner is gone. It logs and goes
// on: a leftover costs disk, not correctness.
func sweepLeftovers(log *slog.Logger, dir, prefix string) {
	removed, err := workdir.Sweep(dir, prefix, workdir.DefaultGrace, nil)
	if len(removed) > 0 {
		log.Warn("removed directories of gilf processes that died", logkey.Dir, dir, logkey.Count, len(removed))
	}
	if err != nil {
		log.Error("sweep leftovers", logkey.Dir, dir, logkey.Err, err)
	}
}
