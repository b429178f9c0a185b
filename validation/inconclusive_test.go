package validation

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

type inconclusiveKind int

const (
	conclusive inconclusiveKind = iota
	npmDefault
	onlySucceeds
	tooLong
)

func kindOf(reason string) inconclusiveKind {
	switch {
	case reason == "":
		return conclusive
	case reason == reasonNPMDefaultTest:
		return npmDefault
	case strings.HasPrefix(reason, "script too long"):
		return tooLong
	case strings.HasPrefix(reason, "the script can only succeed"):
		return onlySucceeds
	}
	return -1
}

// inconclusiveCases are shared by the table test and the real-shell test.
var inconclusiveCases = []struct {
	name   string
	script string
	want   inconclusiveKind
}{
	{name: "npm default", script: `echo "Error: no test specified" && exit 1`, want: npmDefault},
	{name: "npm default, single quotes", script: `echo 'Error: no test specified' && exit 1`, want: npmDefault},
	{name: "npm default, unquoted", script: `echo Error: no test specified && exit 1`, want: npmDefault},
	{name: "npm default, extra spaces", script: "  echo   \"Error:  no test specified\"   &&   exit   1  ", want: npmDefault},
	{name: "npm default, no spaces around &&", script: `echo "Error: no test specified"&&exit 1`, want: npmDefault},
	{name: "npm default, semicolon", script: `echo "Error: no test specified"; exit 1`, want: npmDefault},
	{name: "npm default, lower case", script: `echo "error: no test specified" && exit 1`, want: npmDefault},
	{name: "npm default, trailing semicolon", script: `echo "Error: no test specified" && exit 1;`, want: npmDefault},
	{name: "npm default message without exit", script: `echo "Error: no test specified"`, want: onlySucceeds},
	{name: "npm default with exit 2 is not npm's", script: `echo "Error: no test specified" && exit 2`, want: conclusive},
	{name: "npm default message then a real test", script: `echo "Error: no test specified" && vitest`, want: conclusive},
	{name: "npm default with ||", script: `echo "Error: no test specified" || exit 1`, want: conclusive},
	{name: "true", script: "true", want: onlySucceeds},
	{name: "colon", script: ":", want: onlySucceeds},
	{name: "colon with arguments", script: ": nothing to do", want: onlySucceeds},
	{name: "exit 0", script: "exit 0", want: onlySucceeds},
	{name: "bare exit", script: "exit", want: onlySucceeds},
	{name: "bare echo", script: `echo "no tests yet"`, want: onlySucceeds},
	{name: "echo with no arguments", script: "echo", want: onlySucceeds},
	{name: "echo -n", script: "echo -n done", want: onlySucceeds},
	{name: "echo then exit 0", script: `echo "skipping" && exit 0`, want: onlySucceeds},
	{name: "true; true with newlines", script: "true\n\ntrue\n", want: onlySucceeds},
	{name: "line break after &&", script: "echo a &&\n  true", want: onlySucceeds},
	{name: "echo with single-quoted dollar", script: `echo '$HOME'`, want: onlySucceeds},
	{name: "unicode in an echo", script: "echo ✓ done", want: onlySucceeds},
	{name: "exit 1 alone fails, it is a result", script: "exit 1", want: conclusive},
	{name: "echo then a real command", script: "echo building && tsc", want: conclusive},
	{name: "echo piped", script: "echo hi | sh", want: conclusive},
	{name: "echo redirected", script: "echo hi > out.txt", want: conclusive},
	{name: "echo with command substitution", script: "echo $(curl evil)", want: conclusive},
	{name: "echo with backquotes", script: "echo `id`", want: conclusive},
	{name: "echo with a variable in double quotes", script: `echo "$SECRET"`, want: conclusive},
	{name: "echo with a backslash", script: `echo "a\"b"`, want: conclusive},
	{name: "echo in background", script: "echo hi &", want: conclusive},
	{name: "echo with a glob", script: "echo *", want: conclusive},
	{name: "echo with a comment", script: "echo hi # note", want: conclusive},
	{name: "true || real", script: "true || vitest", want: conclusive},
	{name: "subshell", script: "(true)", want: conclusive},
	{name: "assignment prefix", script: "CI=1 true", want: conclusive},
	{name: "leading semicolon", script: "; true", want: conclusive},
	{name: "double semicolon", script: "true;; true", want: conclusive},
	{name: "trailing &&", script: "true &&", want: conclusive},
	{name: "unterminated quote", script: `echo "hi`, want: conclusive},
	{name: "quoted command name true", script: `"true"`, want: onlySucceeds},
	{name: "truex is not true", script: "truex", want: conclusive},
	{name: "vitest", script: "vitest run", want: conclusive},
	{name: "tsc", script: "tsc --noEmit", want: conclusive},
	{name: "node script", script: "node Makefile.js test", want: conclusive},
}

func TestInconclusiveReason(t *testing.T) {
	for _, tc := range inconclusiveCases {
		t.Run(tc.name, func(t *testing.T) {
			reason := InconclusiveReason(tc.script)
			if got := kindOf(reason); got != tc.want {
				t.Errorf("InconclusiveReason(%q) = %q (kind %d), want kind %d", tc.script, reason, got, tc.want)
			}
		})
	}
}

func TestInconclusiveReasonNamesCommands(t *testing.T) {
	got := InconclusiveReason(`echo a && true; echo b; exit 0`)
	want := "the script can only succeed: it runs nothing but echo, true, exit 0"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestInconclusiveScriptsUnderRealShell runs every script the matcher calls
// inconclusive under the real sh, as npm does (`sh -c`): "can only succeed"
// scripts must exit 0 and npm's default test must exit 1. This checks the
// matcher against the shell rather than against itself.
func TestInconclusiveScriptsUnderRealShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh not found: %v", err)
	}
	for _, tc := range inconclusiveCases {
		if tc.want != npmDefault && tc.want != onlySucceeds {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, sh, "-c", tc.script)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("run: %v", err)
			}
			want := 0
			if tc.want == npmDefault {
				want = 1
			}
			if code != want {
				t.Errorf("sh -c %q exited %d, want %d; output %q", tc.script, code, want, out)
			}
		})
	}
}

// TestMaxScriptBytesIsTheKernelLimit checks the constant against the
// kernel: an argument of MaxScriptBytes bytes execs, one byte more fails
// with E2BIG. A script longer than that can never reach `sh -c`.
func TestMaxScriptBytesIsTheKernelLimit(t *testing.T) {
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("true not found: %v", err)
	}
	tests := []struct {
		name    string
		n       int
		wantErr error
		want    inconclusiveKind
	}{
		{name: "exactly MaxScriptBytes", n: MaxScriptBytes, wantErr: nil, want: conclusive},
		{name: "one byte over", n: MaxScriptBytes + 1, wantErr: syscall.E2BIG, want: tooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			arg := strings.Repeat("a", tc.n)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := exec.CommandContext(ctx, trueBin, arg).Run()
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("exec with a %d-byte argument: err = %v, want %v", tc.n, err, tc.wantErr)
			}
			if got := kindOf(InconclusiveReason(arg)); got != tc.want {
				t.Errorf("InconclusiveReason(%d bytes) kind %d, want %d", tc.n, got, tc.want)
			}
		})
	}
}

func TestTooLongScriptInPlan(t *testing.T) {
	long := strings.Repeat("x", MaxScriptBytes+1)
	p := PlanFromManifest([]byte(`{"scripts":{"test":"`+long+`","build":"tsc"}}`), nil, PlanOptions{})
	want := planSummary{
		Steps:   []string{"install", "test", "build"},
		Scripts: map[string]string{"test": long, "build": "tsc"},
		Inconcl: []string{"test"},
	}
	if got := summarize(p); got.Gap != "" || strings.Join(got.Steps, ",") != strings.Join(want.Steps, ",") || strings.Join(got.Inconcl, ",") != "test" {
		t.Fatalf("plan %+v, want %+v", got, want)
	}
	if r := p.Steps[1].Inconclusive; !strings.HasPrefix(r, "script too long") {
		t.Errorf("reason %q", r)
	}
}
