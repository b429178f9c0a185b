package local

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// toolFunc is a ToolProvider of one function.
type toolFunc func(context.Context, validation.ToolRequest) (validation.Tool, error)

func (f toolFunc) Prepare(ctx context.Context, req validation.ToolRequest) (validation.Tool, error) {
	return f(ctx, req)
}

// A package manager gilf cannot provide is a refusal before anything
// starts; a toolchain that breaks is an infrastructure error. Neither is
// ever a failed step.
func TestToolUnavailable(t *testing.T) {
	dir := repo(t, map[string]string{"package.json": "{}"})
	install := validation.Step{Name: validation.StepInstall, Argv: []string{"pnpm", "install"}}
	plan := func(tr validation.ToolRequest) validation.Plan {
		return validation.Plan{PackageManager: tr.Manager, Tool: tr, Steps: []validation.Step{install}}
	}
	broken := errors.New("registry down")
	for _, tt := range []struct {
		name    string
		opts    Options
		tool    validation.ToolRequest
		refused string // a substring of the refusal; "" wants a plain error
		code    validation.Code
	}{
		// bun is installed nowhere on the worker's PATH; only a
		// toolchain could provide it.
		{"not installed, no toolchain", Options{},
			validation.ToolRequest{Manager: validation.Bun, Version: "1"}, "bun is not installed on this worker", validation.CodePackageManagerNotInstalled},
		{"committed release missing", Options{},
			validation.ToolRequest{Manager: validation.YarnBerry, Release: ".yarn/releases/yarn-4.4.1.cjs"}, "not a regular file of the checkout", validation.CodePackageManagerUnavailable},
		{"toolchain refuses", Options{Tools: toolFunc(func(context.Context, validation.ToolRequest) (validation.Tool, error) {
			return validation.Tool{}, validation.Refuse(validation.CodePackageManagerUnavailable, "pnpm@9.99.0 is not on the registry")
		})}, validation.ToolRequest{Manager: validation.PNPM, Version: "9.99.0"}, "pnpm@9.99.0", validation.CodePackageManagerUnavailable},
		{"toolchain breaks", Options{Tools: toolFunc(func(context.Context, validation.ToolRequest) (validation.Tool, error) {
			return validation.Tool{}, broken
		})}, validation.ToolRequest{Manager: validation.PNPM, Version: "9"}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec(t, tt.opts)
			res, err := e.Run(context.Background(), executors.Request{Plan: plan(tt.tool), Dir: dir})
			var ref *validation.Refusal
			switch {
			case tt.refused != "":
				if !errors.As(err, &ref) || ref.Code != tt.code || !strings.Contains(ref.Msg, tt.refused) {
					t.Errorf("Run = %v, want %s saying %q", err, tt.code, tt.refused)
				}
			default:
				if err == nil || errors.As(err, &ref) || !errors.Is(err, broken) {
					t.Errorf("Run = %v, want the toolchain's error, not a refusal", err)
				}
			}
			if len(res.Steps) != 0 {
				t.Errorf("steps ran: %+v", res.Steps)
			}
		})
	}
}
