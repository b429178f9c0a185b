package executors_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// named is the smallest Executor: selection only looks at Name.
type named string

func (n named) Name() string { return string(n) }
func (n named) Run(context.Context, executors.Request) (executors.Result, error) {
	return executors.Result{}, validation.Refuse(validation.CodeExecutorUnavailable, "test executor %s does not run", string(n))
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{"local", "local", true},
		{"self-host", "self-host", true},
		{"selfhost", "self-host", true},
		{"self_host", "self-host", true},
		{"managed-e2b", "managed-e2b", true},
		{"e2b", "managed-e2b", true},
		{"managed-cf-sandbox", "managed-cf-sandbox", true},
		{"cf-sandbox", "managed-cf-sandbox", true},
		{"cloudflare-sandbox", "managed-cf-sandbox", true},
		{"cfsandbox", "managed-cf-sandbox", true},
		{"managed-crabbox", "managed-crabbox", true},
		{"crabbox", "managed-crabbox", true},
		{"E2B", "managed-e2b", true},
		{"  Crabbox\t", "managed-crabbox", true},
		{"LOCAL", "local", true},
		{"e 2b", "", false},
		{"crab-box", "", false},
		{"self host", "", false},
		{"docker", "", false},
		{"", "", false},
		{"managed-", "", false},
		{"locals", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := executors.Canonical(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Canonical(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestResolvePrecedence(t *testing.T) {
	tests := []struct {
		name string
		in   executors.Selection
		want executors.Choice
	}{
		{"nothing set is the default", executors.Selection{},
			executors.Choice{Requested: "managed-crabbox", Name: "managed-crabbox", Source: executors.SourceDefault}},
		{"executor wins over all", executors.Selection{Executor: "e2b", Provider: "crabbox", EnvProvider: "self-host"},
			executors.Choice{Requested: "e2b", Name: "managed-e2b", Source: executors.SourceExecutor}},
		{"provider wins over env provider", executors.Selection{Provider: "cfsandbox", EnvProvider: "self-host"},
			executors.Choice{Requested: "cfsandbox", Name: "managed-cf-sandbox", Source: executors.SourceProvider}},
		{"env provider last", executors.Selection{EnvProvider: "selfhost"},
			executors.Choice{Requested: "selfhost", Name: "self-host", Source: executors.SourceEnvProvider}},
		{"blank executor falls through", executors.Selection{Executor: "  ", Provider: "e2b"},
			executors.Choice{Requested: "e2b", Name: "managed-e2b", Source: executors.SourceProvider}},
		{"unknown executor does not fall through", executors.Selection{Executor: "docker", Provider: "e2b"},
			executors.Choice{Requested: "docker", Name: "", Source: executors.SourceExecutor}},
		{"trimmed requested", executors.Selection{Provider: " E2B "},
			executors.Choice{Requested: "E2B", Name: "managed-e2b", Source: executors.SourceProvider}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.in.Resolve()); diff != "" {
				t.Errorf("Resolve() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	all := executors.Set{named("local"), named("self-host"), named("managed-e2b"), named("managed-cf-sandbox"), named("managed-crabbox")}
	remoteOnly := executors.Set{named("managed-e2b")}
	tests := []struct {
		name     string
		in       executors.Selection
		set      executors.Set
		wantName string
		wantCode validation.Code
	}{
		{"default crabbox configured", executors.Selection{}, all, "managed-crabbox", ""},
		{"default crabbox unconfigured", executors.Selection{}, remoteOnly, "", validation.CodeExecutorUnconfigured},
		{"default with empty set", executors.Selection{}, nil, "", validation.CodeExecutorUnconfigured},
		{"alias selects configured", executors.Selection{Executor: "e2b"}, remoteOnly, "managed-e2b", ""},
		{"provider alias", executors.Selection{Provider: "cloudflare-sandbox"}, all, "managed-cf-sandbox", ""},
		{"env provider alias", executors.Selection{EnvProvider: "self_host"}, all, "self-host", ""},
		{"unknown", executors.Selection{Executor: "docker"}, all, "", validation.CodeExecutorUnknown},
		{"unknown provider never falls back to local", executors.Selection{Provider: "nope", AllowLocal: true}, all, "", validation.CodeExecutorUnknown},
		{"known unconfigured never falls back to local", executors.Selection{Executor: "crabbox", AllowLocal: true},
			executors.Set{named("local")}, "", validation.CodeExecutorUnconfigured},
		{"local without opt-in", executors.Selection{Executor: "local"}, all, "", validation.CodeLocalNotAllowed},
		{"local without opt-in and not configured", executors.Selection{Executor: "local"}, nil, "", validation.CodeLocalNotAllowed},
		{"local with opt-in", executors.Selection{Executor: "local", AllowLocal: true}, all, "local", ""},
		{"local by provider with opt-in", executors.Selection{Provider: "LOCAL", AllowLocal: true}, all, "local", ""},
		{"local with opt-in but not configured", executors.Selection{Executor: "local", AllowLocal: true}, remoteOnly, "", validation.CodeExecutorUnconfigured},
		{"opt-in alone does not pick local", executors.Selection{AllowLocal: true}, all, "managed-crabbox", ""},
		{"nil entry in set is ignored", executors.Selection{Executor: "e2b"}, executors.Set{nil, named("managed-e2b")}, "managed-e2b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ref := executors.Select(tt.in, tt.set)
			if tt.wantCode != "" {
				if ref == nil {
					t.Fatalf("Select() = %v, nil; want refusal %s", e, tt.wantCode)
				}
				if e != nil {
					t.Errorf("Select() returned executor %q with a refusal", e.Name())
				}
				if ref.Code != tt.wantCode {
					t.Errorf("refusal code = %s, want %s (%s)", ref.Code, tt.wantCode, ref.Msg)
				}
				if ref.Msg == "" {
					t.Error("refusal has no message")
				}
				return
			}
			if ref != nil {
				t.Fatalf("Select() refused: %v", ref)
			}
			if e.Name() != tt.wantName {
				t.Errorf("Select() = %q, want %q", e.Name(), tt.wantName)
			}
		})
	}
}

func TestSelectRefusalNamesSource(t *testing.T) {
	_, ref := executors.Select(executors.Selection{Provider: "docker"}, nil)
	if ref == nil || !strings.Contains(ref.Msg, "validation.provider") || !strings.Contains(ref.Msg, `"docker"`) {
		t.Errorf("refusal %v does not name the source and the value", ref)
	}
	_, ref = executors.Select(executors.Selection{Executor: "e2b"}, nil)
	if ref == nil || !strings.Contains(ref.Msg, "managed-e2b") || !strings.Contains(ref.Msg, "GILF_VALIDATION_EXECUTOR") {
		t.Errorf("refusal %v does not name the executor and the source", ref)
	}
	// gilf validate --executor: the flag chose it, not the setting.
	_, ref = executors.Select(executors.Selection{Executor: "e2b", ExecutorSource: executors.SourceFlag}, nil)
	if ref == nil || !strings.Contains(ref.Msg, "(chosen by --executor)") || strings.Contains(ref.Msg, "GILF_VALIDATION_EXECUTOR") {
		t.Errorf("refusal %v does not name --executor as the source", ref)
	}
}

func TestChoiceNote(t *testing.T) {
	tests := []struct {
		in   executors.Selection
		want string
	}{
		{executors.Selection{}, "executor managed-crabbox chosen by default (no executor configured)"},
		{executors.Selection{Executor: "local"}, "executor local chosen by GILF_VALIDATION_EXECUTOR"},
		{executors.Selection{Provider: "e2b"}, "executor managed-e2b chosen by validation.provider (e2b)"},
		{executors.Selection{EnvProvider: "docker"}, "executor docker chosen by GILF_VALIDATION_PROVIDER"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.in.Resolve().Note(); got != tt.want {
				t.Errorf("Note() = %q, want %q", got, tt.want)
			}
		})
	}
}

func BenchmarkSelect(b *testing.B) {
	set := executors.Set{named("local"), named("managed-e2b"), named("managed-crabbox")}
	in := executors.Selection{Provider: " Cloudflare-Sandbox ", EnvProvider: "e2b"}
	for b.Loop() {
		if _, ref := executors.Select(in, set); ref == nil {
			b.Fatal("want a refusal")
		}
	}
}
