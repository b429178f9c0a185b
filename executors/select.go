package executors

import (
	"cmp"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// Canonical executor names (SPEC §4.1).
const (
	NameLocal            = "local"
	NameSelfHost         = "self-host"
	NameManagedE2B       = "managed-e2b"
	NameManagedCFSandbox = "managed-cf-sandbox"
	NameManagedCrabbox   = "managed-crabbox"
)

// DefaultName is the executor chosen when no source names one.
const DefaultName = NameManagedCrabbox

// Source says which setting chose the executor. Its value is the setting's
// name as an operator knows it, so it can go in the record as is.
type Source string

const (
	SourceExecutor    Source = "GILF_VALIDATION_EXECUTOR"
	SourceProvider    Source = "validation.provider"
	SourceEnvProvider Source = "GILF_VALIDATION_PROVIDER"
	SourceDefault     Source = "default"
	// SourceFlag and SourceValidateDefault are gilf validate's: its
	// --executor flag, and its own default (local).
	SourceFlag            Source = "--executor"
	SourceValidateDefault Source = "the default of gilf validate"
)

// Selection is what configuration says about the executor, before any
// name is resolved. Values are raw: Select trims and lowercases them.
type Selection struct {
	// Executor is GILF_VALIDATION_EXECUTOR, or what ExecutorSource says
	// chose it.
	Executor string
	// ExecutorSource, when set, is the setting Executor came from
	// (default SourceExecutor).
	ExecutorSource Source
	// Provider is validation.provider of the merged run config.
	Provider string
	// EnvProvider is GILF_VALIDATION_PROVIDER.
	EnvProvider string
	// AllowLocal is GILF_ALLOW_LOCAL_VALIDATION=1 (or, for `gilf validate`,
	// the operator choosing their own code).
	AllowLocal bool
}

// Choice is the name a Selection resolves to and where it came from.
type Choice struct {
	// Requested is the value as configured (trimmed), before aliases.
	Requested string
	// Name is the canonical name, or "" when Requested names no executor.
	Name   string
	Source Source
}

// Note says in plain words which setting chose the executor, for the
// record's notes.
func (c Choice) Note() string {
	name := c.Name
	if name == "" {
		name = c.Requested
	}
	if c.Source == SourceDefault {
		return "executor " + name + " chosen by default (no executor configured)"
	}
	if c.Requested != c.Name && c.Name != "" {
		return "executor " + name + " chosen by " + string(c.Source) + " (" + c.Requested + ")"
	}
	return "executor " + name + " chosen by " + string(c.Source)
}

// Resolve applies the precedence of SPEC §4.1: Executor, then Provider,
// then EnvProvider, then DefaultName. A value that is empty after trimming
// counts as unset. Resolve never fails: an unknown name comes back with an
// empty Name for Select to refuse.
func (in Selection) Resolve() Choice {
	for _, s := range []struct {
		v   string
		src Source
	}{
		{in.Executor, cmp.Or(in.ExecutorSource, SourceExecutor)},
		{in.Provider, SourceProvider},
		{in.EnvProvider, SourceEnvProvider},
	} {
		v := strings.TrimSpace(s.v)
		if v == "" {
			continue
		}
		name, _ := Canonical(v)
		return Choice{Requested: v, Name: name, Source: s.src}
	}
	return Choice{Requested: DefaultName, Name: DefaultName, Source: SourceDefault}
}

// Canonical returns the canonical executor name for name or one of its
// aliases. Matching ignores surrounding whitespace and ASCII case
// ("E2B", " crabbox "); nothing else is forgiven ("e 2b", "crab-box").
func Canonical(name string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case NameLocal:
		return NameLocal, true
	case NameSelfHost, "selfhost", "self_host":
		return NameSelfHost, true
	case NameManagedE2B, "e2b":
		return NameManagedE2B, true
	case NameManagedCFSandbox, "cf-sandbox", "cloudflare-sandbox", "cfsandbox":
		return NameManagedCFSandbox, true
	case NameManagedCrabbox, "crabbox":
		return NameManagedCrabbox, true
	}
	return "", false
}

// Set is the explicit list of configured executors, built in cmd/gilf.
// An executor is in the set only when its configuration is complete.
type Set []Executor

// Lookup returns the executor of the set whose Name is the canonical name.
func (s Set) Lookup(name string) (Executor, bool) {
	for _, e := range s {
		if e != nil && e.Name() == name {
			return e, true
		}
	}
	return nil, false
}

// Select picks the executor the selection names from set, or refuses.
// It never falls back: an unknown name is executor_unknown, a known one
// missing from set is executor_unconfigured, and local without AllowLocal
// is local_not_allowed (checked before the set, so the refusal says what
// the operator must change).
func Select(in Selection, set Set) (Executor, *validation.Refusal) {
	c := in.Resolve()
	if c.Name == "" {
		return nil, validation.Refuse(validation.CodeExecutorUnknown,
			"%s names an unknown executor %q; known executors: %s",
			c.Source, c.Requested, strings.Join(knownNames(), ", "))
	}
	if c.Name == NameLocal && !in.AllowLocal {
		return nil, validation.Refuse(validation.CodeLocalNotAllowed,
			"%s chose the local executor, which runs only when GILF_ALLOW_LOCAL_VALIDATION=1", c.Source)
	}
	e, ok := set.Lookup(c.Name)
	if !ok {
		return nil, validation.Refuse(validation.CodeExecutorUnconfigured,
			"executor %s (chosen by %s) is not configured on this worker", c.Name, c.Source)
	}
	return e, nil
}

func knownNames() []string {
	return []string{NameLocal, NameSelfHost, NameManagedE2B, NameManagedCFSandbox, NameManagedCrabbox}
}
