package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// Stand-ins for /usr/bin/bwrap: one that runs nothing and exits 0, and one
// that runs the command it was given, outside any sandbox.
const (
	standInNothing = "#!/bin/sh\nexit 0\n"
	standInNoBox   = "#!/bin/sh\nwhile [ \"$#\" -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n"
)

// swapBwrap points path at the real bwrap (body "") or at a stand-in
// script.
func swapBwrap(t *testing.T, path, body string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if body == "" {
		if err := os.Symlink(DefaultBwrapPath, path); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A bwrap replaced, after the isolation probe, by a program that exits 0
// having run nothing (or having run the step outside any sandbox) never
// gives a pass: every step fails as gilf's own error,
// sandbox_setup_failed, and no result is returned.
func TestBwrapStandInNeverPasses(t *testing.T) {
	bin := workRoot(t)
	bw := filepath.Join(bin, "bwrap")
	swapBwrap(t, bw, "")
	e := newExec(t, Options{BwrapPath: bw})
	src := repo(t, nil)
	plan := []validation.Step{
		{Name: validation.StepInstall, Argv: []string{"/bin/sh", "-c", "echo installed"}, Network: validation.NetworkNone, Timeout: time.Minute},
		shStep(validation.StepTest, "echo tested", time.Minute),
	}
	// The real bwrap first: the same plan passes.
	res := runPlan(t, e, src, plan...)
	for _, s := range res.Steps {
		wantStatus(t, s, validation.StatusPassed)
	}
	if res.Tier != validation.TierReadOnly && res.Tier != validation.TierNoNetwork {
		t.Fatalf("tier %s with the real bwrap", res.Tier)
	}

	for name, body := range map[string]string{"runs nothing": standInNothing, "runs the step unsandboxed": standInNoBox} {
		t.Run(name, func(t *testing.T) {
			swapBwrap(t, bw, body)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := e.Run(ctx, executors.Request{Plan: validation.Plan{PackageManager: validation.NPM, Steps: plan}, Dir: src})
			var se *SetupError
			if !errors.As(err, &se) || se.Code() != CodeSandboxSetupFailed || !strings.Contains(err.Error(), CodeSandboxSetupFailed) {
				t.Fatalf("Run: %v (%d steps), want a %s error", err, len(res.Steps), CodeSandboxSetupFailed)
			}
			if len(res.Steps) != 0 {
				t.Errorf("a result with %d steps came back beside the error", len(res.Steps))
			}
			t.Logf("%v", err)
		})
	}
	swapBwrap(t, bw, "")
}

// A stand-in in place from the start: the isolation probe finds no
// sandbox (sandbox_setup_failed in its notes), and the default minimum
// tier refuses to run anything.
func TestBwrapStandInAtProbe(t *testing.T) {
	bin := workRoot(t)
	bw := filepath.Join(bin, "bwrap")
	swapBwrap(t, bw, standInNothing)
	e := newExec(t, Options{BwrapPath: bw})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.Run(ctx, executors.Request{Plan: validation.Plan{PackageManager: validation.NPM,
		Steps: []validation.Step{shStep(validation.StepTest, "echo tested", time.Minute)}}, Dir: repo(t, nil)})
	var ref *validation.Refusal
	if !errors.As(err, &ref) || ref.Code != validation.CodeIsolationTierUnmet {
		t.Fatalf("Run: %v, want %s", err, validation.CodeIsolationTierUnmet)
	}
	p, err := e.probe.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.tier != validation.TierNone || !hasNote(p.notes, CodeSandboxSetupFailed) {
		t.Errorf("tier %s, notes %q: want none, saying %s", p.tier, p.notes, CodeSandboxSetupFailed)
	}
}

// The shim's guard: pid 2 and the token, nothing else, prove the start.
func TestProofCheck(t *testing.T) {
	ch := func(s string) <-chan []byte {
		c := make(chan []byte, 1)
		c <- []byte(s)
		return c
	}
	const tok = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name         string
		info, start  string
		childPid     int
		wantErrorHas string
	}{
		{name: "proved", info: `{"child-pid": 4242}`, start: tok + " 2\n"},
		{name: "proved under cgroup v1", childPid: 4242, start: tok + " 2\n"},
		{name: "extra lines after the proof", info: `{"child-pid": 4242}`, start: tok + " 2\nforged\n"},
		{name: "no info", info: "", start: tok + " 2\n", wantErrorHas: "no sandbox"},
		{name: "info without a pid", info: `{"cgroup-namespace": 1}`, start: tok + " 2\n", wantErrorHas: "no sandbox process"},
		{name: "no token", info: `{"child-pid": 4242}`, start: "", wantErrorHas: "token did not come back"},
		{name: "wrong token", info: `{"child-pid": 4242}`, start: strings.Repeat("0", 32) + " 2\n", wantErrorHas: "token did not come back"},
		{name: "host pid", info: `{"child-pid": 4242}`, start: tok + " 4243\n", wantErrorHas: "pid namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &proof{token: tok, started: ch(tt.start), childPid: tt.childPid}
			if tt.childPid == 0 {
				p.info = ch(tt.info)
			}
			err := p.check()
			switch {
			case tt.wantErrorHas == "" && err != nil:
				t.Errorf("check: %v, want proved", err)
			case tt.wantErrorHas != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrorHas)):
				t.Errorf("check: %v, want an error saying %q", err, tt.wantErrorHas)
			}
		})
	}
}
