package executortest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

func TestFakeConformance(t *testing.T) {
	executortest.Conformance(t, func(t *testing.T) executors.Executor {
		return &executortest.Fake{Exec: true}
	})
}

func statuses(res executors.Result) []validation.Status {
	var s []validation.Status
	for _, r := range res.Steps {
		s = append(s, r.Status)
	}
	return s
}

func plan(steps ...validation.Step) executors.Request {
	return executors.Request{Plan: validation.Plan{PackageManager: validation.NPM, Steps: steps}}
}

func TestFakeScripted(t *testing.T) {
	secret := validation.Secret{Name: "GITHUB_TOKEN", Value: "ghs_0123456789abcdef"}
	tests := []struct {
		name    string
		fake    *executortest.Fake
		req     executors.Request
		want    []validation.Status
		wantErr error
		check   func(t *testing.T, res executors.Result)
	}{
		{
			name: "unscripted steps pass without running",
			fake: &executortest.Fake{},
			req:  plan(executortest.Sh("install", "exit 1"), executortest.Sh("test", "exit 1")),
			want: []validation.Status{validation.StatusPassed, validation.StatusPassed},
		},
		{
			name: "scripted failure keeps exit code and output",
			fake: &executortest.Fake{Steps: map[string]executortest.Script{
				"test": {Status: validation.StatusFailed, Exit: 2, Output: "AssertionError: 1 !== 2\n"},
			}},
			req:  plan(executortest.Sh("install", ""), executortest.Sh("test", ""), executortest.Sh("build", "")),
			want: []validation.Status{validation.StatusPassed, validation.StatusFailed, validation.StatusPassed},
			check: func(t *testing.T, res executors.Result) {
				r := res.Steps[1]
				if r.ExitCode == nil || *r.ExitCode != 2 || r.Output.Head != "AssertionError: 1 !== 2\n" || r.Output.Bytes != 24 {
					t.Errorf("test result %+v", r)
				}
			},
		},
		{
			name: "failed without exit code reports 1",
			fake: &executortest.Fake{Steps: map[string]executortest.Script{"test": {Status: validation.StatusFailed}}},
			req:  plan(executortest.Sh("test", "")),
			want: []validation.Status{validation.StatusFailed},
			check: func(t *testing.T, res executors.Result) {
				if c := res.Steps[0].ExitCode; c == nil || *c != 1 {
					t.Errorf("exit code %v, want 1", c)
				}
			},
		},
		{
			name: "scripted install failure stops later steps",
			fake: &executortest.Fake{Steps: map[string]executortest.Script{"install": {Status: validation.StatusKilled, Signal: "killed"}}},
			req:  plan(executortest.Sh("install", ""), executortest.Sh("test", ""), executortest.Sh("lint", "")),
			want: []validation.Status{validation.StatusKilled, validation.StatusNotRun, validation.StatusNotRun},
		},
		{
			name: "scripted output is redacted",
			fake: &executortest.Fake{Steps: map[string]executortest.Script{"test": {Output: "token " + secret.Value + " and " + secret.Value}}},
			req: func() executors.Request {
				r := plan(executortest.Sh("test", ""))
				r.Secrets = []validation.Secret{secret, {Name: "SHORT", Value: "and"}}
				return r
			}(),
			want: []validation.Status{validation.StatusPassed},
			check: func(t *testing.T, res executors.Result) {
				o := res.Steps[0].Output
				want := "token [redacted:GITHUB_TOKEN] and [redacted:GITHUB_TOKEN]"
				if o.Head != want || o.Redactions != 2 {
					t.Errorf("output %q (%d redactions), want %q (2)", o.Head, o.Redactions, want)
				}
			},
		},
		{
			name: "delay over the timeout times out",
			fake: &executortest.Fake{Steps: map[string]executortest.Script{"test": {Delay: time.Hour}}},
			req: func() executors.Request {
				s := executortest.Sh("test", "")
				s.Timeout = 50 * time.Millisecond
				return plan(s, executortest.Sh("build", ""))
			}(),
			want: []validation.Status{validation.StatusTimedOut, validation.StatusPassed},
		},
		{
			name:    "infrastructure error after the steps",
			fake:    &executortest.Fake{Err: errors.New("sandbox cleanup failed")},
			req:     plan(executortest.Sh("test", "")),
			want:    []validation.Status{validation.StatusPassed},
			wantErr: errors.New("sandbox cleanup failed"),
		},
		{
			name: "result metadata",
			fake: &executortest.Fake{ExecName: "managed-e2b", Tier: validation.TierRemote, Integrity: "duplicate END marker", Withheld: []string{"E2B_API_KEY"}},
			req:  plan(executortest.Sh("test", "")),
			want: []validation.Status{validation.StatusPassed},
			check: func(t *testing.T, res executors.Result) {
				if res.Executor != "managed-e2b" || res.Tier != validation.TierRemote || res.Integrity == "" || len(res.SecretsWithheld) != 1 {
					t.Errorf("result %+v", res)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.fake.Run(t.Context(), tt.req)
			if (err == nil) != (tt.wantErr == nil) || (err != nil && err.Error() != tt.wantErr.Error()) {
				t.Fatalf("Run error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, statuses(res)); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, res)
			}
			if n := len(tt.fake.Requests()); n != 1 {
				t.Errorf("Requests() has %d entries, want 1", n)
			}
		})
	}
}

func TestFakeRefusal(t *testing.T) {
	f := &executortest.Fake{Refusal: validation.Refuse(validation.CodeIsolationTierUnmet, "no namespaces")}
	res, err := f.Run(t.Context(), plan(executortest.Sh("test", "")))
	var ref *validation.Refusal
	if !errors.As(err, &ref) || ref.Code != validation.CodeIsolationTierUnmet {
		t.Fatalf("Run error = %v, want refusal isolation_tier_unmet", err)
	}
	if len(res.Steps) != 0 {
		t.Errorf("a refusal came with %d step results", len(res.Steps))
	}
}

func TestFakePanicRunsCleanup(t *testing.T) {
	f := &executortest.Fake{Panic: "boom", Exec: true}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		_, err := f.Run(t.Context(), plan(executortest.Sh("test", "exit 0")))
		t.Errorf("Run returned %v instead of panicking", err)
	}()
	if f.Cleanups() != 1 {
		t.Errorf("cleanups = %d after a panic, want 1", f.Cleanups())
	}
}

func TestFakeCancelDuringDelay(t *testing.T) {
	f := &executortest.Fake{Steps: map[string]executortest.Script{"test": {Delay: time.Hour}}}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := f.Run(ctx, plan(executortest.Sh("install", ""), executortest.Sh("test", ""), executortest.Sh("build", "")))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run error = %v, want the context's error", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Run took %v after its context ended", time.Since(start))
	}
	want := []validation.Status{validation.StatusPassed, validation.StatusKilled, validation.StatusNotRun}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestFakeOutputLimitBoundary(t *testing.T) {
	const limit = 16
	tests := []struct {
		name      string
		out       string
		truncated bool
		head      string
		tail      string
	}{
		{"empty", "", false, "", ""},
		{"one byte", "a", false, "a", ""},
		{"exactly the limit", strings.Repeat("x", limit), false, "xxxxxxxx", "xxxxxxxx"},
		{"one over the limit", "0123456789abcdefZ", true, "01234567", "9abcdefZ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &executortest.Fake{MaxOutputBytes: limit, Steps: map[string]executortest.Script{"test": {Output: tt.out}}}
			res, err := f.Run(t.Context(), plan(executortest.Sh("test", "")))
			if err != nil {
				t.Fatal(err)
			}
			o := res.Steps[0].Output
			if o.Truncated != tt.truncated || o.Head != tt.head || o.Tail != tt.tail || o.Bytes != int64(len(tt.out)) {
				t.Errorf("output %+v, want truncated=%v head=%q tail=%q bytes=%d", o, tt.truncated, tt.head, tt.tail, len(tt.out))
			}
		})
	}
}
