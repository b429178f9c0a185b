package review

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gilf-review/gilf/validation"
)

// ConfigPath is where a repository keeps its gilf configuration. It is
// read from the pull request's BASE branch, never from the head: a fork
// must not be able to change its own validation policy.
const ConfigPath = ".github/gilf.yml"

// MaxConfigBytes caps .github/gilf.yml; a larger file is a config error.
const MaxConfigBytes = 64 << 10

// RepoConfig is .github/gilf.yml.
type RepoConfig struct {
	Validation ValidationConfig `yaml:"validation"`
	Execution  ExecutionPolicy  `yaml:"execution"`
	Review     ReviewConfig     `yaml:"review"`
}

// ValidationConfig is the validation section, shared by the worker
// defaults (from the environment) and the repository's file.
type ValidationConfig struct {
	Provider        string        `yaml:"provider"`
	CodeChangesOnly *bool         `yaml:"codeChangesOnly"`
	Crabbox         CrabboxConfig `yaml:"crabbox"`
	E2B             E2BConfig     `yaml:"e2b"`
	// Env are non-secret variables the repository sets for its steps
	// (FORCE_COLOR=1); names that look secret, names gilf sets itself and
	// GILF_* are refused, CI=true is always kept. Only the repository's
	// file sets them.
	Env map[string]string `yaml:"env"`
	// Preexisting is the check's conclusion when every failure was
	// already failing on the base (or flaky): "neutral" (the default)
	// or "failure".
	Preexisting string `yaml:"preexisting"`
	// CompareBase validates the base when steps fail on the head, to
	// tell the pull request's failures from the base's (default true).
	CompareBase *bool `yaml:"compareBase"`
	// RetryFlaky runs each failed step once more at the same head in a
	// fresh sandbox; one that passes is flaky (default true).
	RetryFlaky *bool `yaml:"retryFlaky"`
}

// Values of validation.preexisting.
const (
	PreexistingNeutral = "neutral"
	PreexistingFailure = "failure"
)

// CrabboxConfig is the nested crabbox object: run-specific values win.
type CrabboxConfig struct {
	Provider string `yaml:"provider"`
	Class    string `yaml:"class"`
}

// E2BConfig is the nested e2b object: run-specific values win.
type E2BConfig struct {
	Template  string `yaml:"template"`
	TimeoutMs int64  `yaml:"timeoutMs"`
	CPU       int    `yaml:"cpu"`
	MemoryMB  int    `yaml:"memoryMb"`
}

// ReviewConfig says how the review is posted.
type ReviewConfig struct {
	// RequestChanges posts REQUEST_CHANGES instead of COMMENT when the
	// validation failed.
	RequestChanges bool `yaml:"requestChanges"`
	// Drafts validates draft pull requests too.
	Drafts bool `yaml:"drafts"`
	// Memory names a file of the base branch whose text the semantic
	// review is given as the repository's review memory.
	Memory string `yaml:"memory"`
}

// FetchedConfig is a repository config as loaded. A broken file is data,
// not an error: the job ends refused with every problem listed, and
// nothing runs on defaults the file did not mean.
type FetchedConfig struct {
	Config RepoConfig
	Found  bool
	Errors []ConfigError
}

// Problems lists the file's problems in one message, at most
// MaxConfigErrors of them.
func (f FetchedConfig) Problems() string {
	var lines []string
	for i, e := range f.Errors {
		if i == MaxConfigErrors {
			lines = append(lines, fmt.Sprintf("… and %d more", len(f.Errors)-MaxConfigErrors))
			break
		}
		lines = append(lines, e.Error())
	}
	return strings.Join(lines, "; ")
}

// Limits of validation.env.
const (
	MaxRepoEnvEntries    = 64
	MaxRepoEnvValueBytes = 4096
)

// ParseRepoConfig parses .github/gilf.yml strictly: unknown keys, values of
// the wrong kind and values out of range are errors with their line, so a
// typo never silently disables a policy.
func ParseRepoConfig(b []byte) FetchedConfig {
	bad := func(errs ...ConfigError) FetchedConfig { return FetchedConfig{Found: true, Errors: errs} }
	if len(b) > MaxConfigBytes {
		return bad(ConfigError{Problem: fmt.Sprintf("the file is %d bytes, over the %d-byte limit", len(b), MaxConfigBytes)})
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return bad(yamlError(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return bad(ConfigError{Line: extra.Line, Problem: "the file holds more than one YAML document"})
	}
	// Every problem at once: the schema's (unknown keys, wrong kinds),
	// then the values' of what decoded, but never twice for one key.
	errs := checkSchema(&doc, reflect.TypeFor[RepoConfig]())
	var c RepoConfig
	if doc.Kind != 0 {
		if err := doc.Decode(&c); err != nil && len(errs) == 0 {
			return bad(yamlError(err))
		}
	}
	flagged := func(key string) bool {
		return slices.ContainsFunc(errs, func(e ConfigError) bool { return e.Key == key || strings.HasPrefix(e.Key, key+".") })
	}
	if err := c.Execution.validate(); err != nil && !flagged("execution.mode") {
		errs = append(errs, ConfigError{Line: lineOf(&doc, "execution.mode"), Key: "execution.mode", Problem: err.Error(), Allowed: "auto, always, never"})
	}
	switch c.Validation.Preexisting {
	case "", PreexistingNeutral, PreexistingFailure:
	default:
		errs = append(errs, ConfigError{Line: lineOf(&doc, "validation.preexisting"), Key: "validation.preexisting",
			Problem: fmt.Sprintf("%q is not a conclusion gilf gives pre-existing failures", c.Validation.Preexisting), Allowed: "neutral, failure"})
	}
	if len(c.Validation.Env) > MaxRepoEnvEntries {
		errs = append(errs, ConfigError{Line: lineOf(&doc, "validation.env"), Key: "validation.env",
			Problem: fmt.Sprintf("%d variables, over the limit of %d", len(c.Validation.Env), MaxRepoEnvEntries)})
	}
	for _, k := range slices.Sorted(maps.Keys(c.Validation.Env)) {
		if why := validation.CheckStepEnv(k, c.Validation.Env[k], MaxRepoEnvValueBytes); why != "" && !flagged("validation.env."+k) {
			errs = append(errs, ConfigError{Line: lineOf(&doc, "validation.env."+k), Key: "validation.env." + k, Problem: why,
				Allowed: "non-secret variables for the steps, such as FORCE_COLOR or NODE_OPTIONS"})
		}
	}
	slices.SortStableFunc(errs, func(a, b ConfigError) int { return a.Line - b.Line })
	if len(errs) > 0 {
		return bad(errs...)
	}
	return FetchedConfig{Config: c, Found: true}
}

// yamlLine finds yaml.v3's "line N: " prefix.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a YAML syntax error into a ConfigError.
func yamlError(err error) ConfigError {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return ConfigError{Line: n, Problem: "not valid YAML: " + m[2]}
	}
	return ConfigError{Problem: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// MergeValidation is mergeValidationConfig: the worker defaults spread over
// the run config at the top level, so a worker default that is supplied
// wins for provider and codeChangesOnly; the nested crabbox and e2b objects
// merge the other way, run-specific values winning.
func MergeValidation(worker, run ValidationConfig) ValidationConfig {
	out := run
	if worker.Provider != "" {
		out.Provider = worker.Provider
	}
	if worker.CodeChangesOnly != nil {
		out.CodeChangesOnly = worker.CodeChangesOnly
	}
	if out.CodeChangesOnly == nil {
		t := true
		out.CodeChangesOnly = &t
	}
	out.Crabbox = CrabboxConfig{
		Provider: firstNonEmpty(run.Crabbox.Provider, worker.Crabbox.Provider),
		Class:    firstNonEmpty(run.Crabbox.Class, worker.Crabbox.Class),
	}
	out.Env = run.Env
	out.E2B = E2BConfig{
		Template:  firstNonEmpty(run.E2B.Template, worker.E2B.Template),
		TimeoutMs: firstNonZero(run.E2B.TimeoutMs, worker.E2B.TimeoutMs),
		CPU:       firstNonZero(run.E2B.CPU, worker.E2B.CPU),
		MemoryMB:  firstNonZero(run.E2B.MemoryMB, worker.E2B.MemoryMB),
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func firstNonZero[T int | int64](a, b T) T {
	if a != 0 {
		return a
	}
	return b
}

// Execution modes.
const (
	ModeAuto   = "auto"
	ModeAlways = "always"
	ModeNever  = "never"
)

// ExecutionPolicy is the execution section. Each non-empty filter must
// match for validation to run.
type ExecutionPolicy struct {
	Mode     string   `yaml:"mode"`
	Branches []string `yaml:"branches"` // base branch globs
	Paths    []string `yaml:"paths"`    // any changed file matches
	Authors  []string `yaml:"authors"`  // PR author logins
	Labels   []string `yaml:"labels"`   // any PR label
}

func (p ExecutionPolicy) validate() error {
	switch p.Mode {
	case "", ModeAuto, ModeAlways, ModeNever:
		return nil
	}
	return fmt.Errorf("execution.mode %q is not one of auto, always, never", p.Mode)
}

// PRFacts are what the policy looks at.
type PRFacts struct {
	BaseRef string
	Author  string
	Labels  []string
	Files   []ChangedFile
	Draft   bool
}

// Decide applies the execution policy. It runs first: never, or a filter
// that does not match, disables validation; always permits execution but
// neither overrides diff classification nor supplies an executor.
func (p ExecutionPolicy) Decide(f PRFacts) (run bool, reason string) {
	if p.Mode == ModeNever {
		return false, "execution.mode is never in " + ConfigPath
	}
	if len(p.Branches) > 0 && !matchAny(p.Branches, f.BaseRef) {
		return false, fmt.Sprintf("base branch %q matches none of execution.branches", f.BaseRef)
	}
	if len(p.Authors) > 0 && !slices.ContainsFunc(p.Authors, func(a string) bool { return strings.EqualFold(a, f.Author) }) {
		return false, fmt.Sprintf("author %q is not in execution.authors", f.Author)
	}
	if len(p.Labels) > 0 && !slices.ContainsFunc(f.Labels, func(l string) bool { return slices.Contains(p.Labels, l) }) {
		return false, "the pull request has none of execution.labels"
	}
	if len(p.Paths) > 0 && !slices.ContainsFunc(f.Files, func(c ChangedFile) bool {
		return matchAny(p.Paths, c.Name) || (c.Previous != "" && matchAny(p.Paths, c.Previous))
	}) {
		return false, "no changed file matches execution.paths"
	}
	return true, ""
}
