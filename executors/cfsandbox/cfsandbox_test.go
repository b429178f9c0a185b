package cfsandbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/cfsandbox/cfsandboxtest"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

type fixture struct {
	srv   *cfsandboxtest.Server
	token string
}

func newFixture(t *testing.T, mod func(*cfsandboxtest.Options)) fixture {
	t.Helper()
	tok, err := validation.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	o := cfsandboxtest.Options{Token: "cfb_" + tok}
	if mod != nil {
		mod(&o)
	}
	return fixture{srv: cfsandboxtest.New(t, o), token: o.Token}
}

func (f fixture) exec(t *testing.T, mod func(*Options)) *Executor {
	t.Helper()
	o := Options{
		Enabled:   true,
		URL:       f.srv.URL,
		Token:     f.token,
		StepGrace: 2 * time.Second,
		TempRoot:  t.TempDir(),
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if mod != nil {
		mod(&o)
	}
	e, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func sh(name, script string) validation.Step {
	return validation.Step{Name: name, Argv: []string{"sh", "-c", script}, Network: validation.NetworkNone, Timeout: time.Minute}
}

func request(t *testing.T, steps ...validation.Step) executors.Request {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return executors.Request{
		Plan:   validation.Plan{PackageManager: validation.NPM, PackageManagerSource: "default", Steps: steps},
		Dir:    dir,
		Labels: map[string]string{"repo": "octo/widgets"},
	}
}

func run(t *testing.T, e *Executor, req executors.Request) (executors.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	return e.Run(ctx, req)
}

func statuses(res executors.Result) []validation.Status {
	var s []validation.Status
	for _, r := range res.Steps {
		s = append(s, r.Status)
	}
	return s
}

func TestConformance(t *testing.T) {
	f := newFixture(t, nil)
	executortest.Conformance(t, func(t *testing.T) executors.Executor { return f.exec(t, nil) })
	f.srv.CheckClean(t, 5*time.Second)
}

func TestPassAndFail(t *testing.T) {
	f := newFixture(t, nil)
	e := f.exec(t, nil)
	res, err := run(t, e, request(t,
		sh(validation.StepInstall, "echo installing"),
		sh(validation.StepTest, "printf 'multi\\nline\\n'; echo 'quote'\"'\"'s'; exit 4"),
		sh(validation.StepBuild, "echo built >&2"),
	))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []validation.Status{validation.StatusPassed, validation.StatusFailed, validation.StatusPassed}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if c := res.Steps[1].ExitCode; c == nil || *c != 4 {
		t.Errorf("exit code %v, want 4", c)
	}
	if out := res.Steps[1].Output.Head; out != "multi\nline\nquote's\n" {
		t.Errorf("output %q", out)
	}
	if !strings.Contains(res.Steps[2].Output.Head, "built") {
		t.Errorf("stderr lost: %q", res.Steps[2].Output.Head)
	}
	if res.Executor != executors.NameManagedCFSandbox || res.Tier != validation.TierRemote || res.Integrity != "" {
		t.Errorf("executor %q tier %q integrity %q", res.Executor, res.Tier, res.Integrity)
	}
	if res.Platform.OS != "linux" || res.Platform.Arch != runtime.GOARCH {
		t.Errorf("platform %+v", res.Platform)
	}
	if cwd := res.Steps[0].Cwd; !strings.HasPrefix(cwd, Workspace+"/") || !strings.HasSuffix(cwd, "/"+archive.PackRoot) {
		t.Errorf("cwd %q", cwd)
	}
	if diff := cmp.Diff([]string{EnvToken}, res.SecretsWithheld); diff != "" {
		t.Errorf("withheld (-want +got):\n%s", diff)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

func TestInfrastructureErrors(t *testing.T) {
	tests := []struct {
		name      string
		mod       func(*cfsandboxtest.Options)
		fault     cfsandboxtest.Fault
		wrongTok  bool
		hold      bool // another run holds a container
		is        error
		check     func(error) bool
		temporary bool
	}{
		{name: "wrong token", wrongTok: true, is: ErrUnauthorized,
			check: func(err error) bool {
				var ae *APIError
				return errors.As(err, &ae) && ae.Status == 401 && ae.Code == "unauthorized"
			}},
		{name: "create refused", fault: cfsandboxtest.Fault{CreateStatus: 500}, temporary: true,
			check: func(err error) bool { var ae *APIError; return errors.As(err, &ae) && ae.Status == 500 }},
		{name: "rate limited", fault: cfsandboxtest.Fault{CreateStatus: 429}, is: ErrRateLimited, temporary: true},
		{name: "no capacity", mod: func(o *cfsandboxtest.Options) { o.MaxInstances = 1 }, hold: true, is: ErrRateLimited, temporary: true},
		{name: "stream cut mid-way", fault: cfsandboxtest.Fault{ExecCall: 2, Stream: cfsandboxtest.FaultCutStream}, is: ErrStreamBroken, temporary: true},
		{name: "setup stream cut", fault: cfsandboxtest.Fault{ExecCall: 1, Stream: cfsandboxtest.FaultCutStream}, is: ErrStreamBroken, temporary: true},
		{name: "no exit event", fault: cfsandboxtest.Fault{ExecCall: 2, Stream: cfsandboxtest.FaultNoExit}, is: ErrStreamBroken, temporary: true},
		{name: "error event", fault: cfsandboxtest.Fault{ExecCall: 2, Stream: cfsandboxtest.FaultErrorEvent}, temporary: true,
			check: func(err error) bool {
				var ee *ExecError
				return errors.As(err, &ee) && ee.Code == "exec_transport_error"
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mod)
			held := &bridgeClient{base: f.srv.URL, token: f.token, http: http.DefaultClient}
			heldID := ""
			if tc.hold {
				var err error
				if heldID, err = held.create(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := held.upload(t.Context(), heldID, "/workspace/x", strings.NewReader("x"), 1); err != nil {
					t.Fatal(err)
				}
			}
			f.srv.SetFault(tc.fault)
			e := f.exec(t, func(o *Options) {
				if tc.wrongTok {
					o.Token = "cfb_wrong_token_value"
				}
			})
			res, err := run(t, e, request(t, sh(validation.StepTest, "echo started; sleep 1; echo done"), sh(validation.StepBuild, "exit 0")))
			if err == nil {
				t.Fatalf("Run succeeded: %+v", res.Steps)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.is)
			}
			if tc.check != nil && !tc.check(err) {
				t.Errorf("err = %v (%T), not the expected kind", err, err)
			}
			var tmp interface{ Temporary() bool }
			if errors.As(err, &tmp) && tmp.Temporary() != tc.temporary {
				t.Errorf("Temporary() = %v, want %v", tmp.Temporary(), tc.temporary)
			}
			var ref *validation.Refusal
			if errors.As(err, &ref) || errors.Is(err, context.Canceled) {
				t.Errorf("err = %v is a refusal or a cancellation", err)
			}
			if strings.Contains(err.Error(), f.token) {
				t.Error("the error holds the token")
			}
			if heldID != "" {
				if err := held.kill(t.Context(), heldID); err != nil {
					t.Fatal(err)
				}
			}
			f.srv.CheckClean(t, 5*time.Second)
		})
	}
}

// TestTimeoutIgnoredStopsTheRun: the image has no timeout(1) and the
// sandbox does not stop the command at timeout_ms; the host stops waiting, and since the bridge cannot stop one
// command, later steps are not run (the sandbox is destroyed).
func TestTimeoutIgnoredStopsTheRun(t *testing.T) {
	f := newFixture(t, func(o *cfsandboxtest.Options) { o.Path = pathWithout(t) })
	f.srv.SetFault(cfsandboxtest.Fault{ExecCall: 2, Stream: cfsandboxtest.FaultIgnoreTimeout})
	e := f.exec(t, func(o *Options) { o.StepGrace = 500 * time.Millisecond })
	slow := sh(validation.StepTest, "sleep 1000")
	slow.Timeout = time.Second
	res, err := run(t, e, request(t, slow, sh(validation.StepBuild, "exit 0")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []validation.Status{validation.StatusTimedOut, validation.StatusNotRun}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Steps[1].Reason, "could not be stopped") {
		t.Errorf("reason %q", res.Steps[1].Reason)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

func TestRunTimeoutBoundsTheSteps(t *testing.T) {
	f := newFixture(t, nil)
	e := f.exec(t, func(o *Options) { o.Timeout = 2 * time.Second })
	start := time.Now()
	res, err := run(t, e, request(t, sh(validation.StepTest, "sleep 1000"), sh(validation.StepBuild, "exit 0")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("Run took %v", took)
	}
	want := []validation.Status{validation.StatusTimedOut, validation.StatusNotRun}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Steps[0].Reason, EnvTimeout) {
		t.Errorf("reason %q", res.Steps[0].Reason)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

func TestArchiveCeiling(t *testing.T) {
	req := request(t, sh(validation.StepTest, "exit 0"))
	var packed bytes.Buffer
	if err := archive.Pack(t.Context(), req.Dir, &packed); err != nil {
		t.Fatal(err)
	}
	size := int64(packed.Len())
	for _, tc := range []struct {
		name    string
		max     int64
		refused bool
	}{
		{"at the limit", size, false},
		{"one byte under", size - 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			e := f.exec(t, func(o *Options) { o.MaxArchiveBytes = tc.max })
			_, err := run(t, e, req)
			var ref *validation.Refusal
			if got := errors.As(err, &ref) && ref.Code == validation.CodeArchiveTooLarge; got != tc.refused {
				t.Fatalf("err = %v, refused %v, want %v", err, got, tc.refused)
			}
			if tc.refused && f.srv.Created() != 0 {
				t.Error("a refused run created a sandbox")
			}
			f.srv.CheckClean(t, 5*time.Second)
		})
	}
}

func TestPanicInProgressStillDeletes(t *testing.T) {
	f := newFixture(t, nil)
	e := f.exec(t, nil)
	req := request(t, sh(validation.StepTest, "sleep 1000"))
	req.Progress = func(string, time.Time) { panic("progress exploded") }
	func() {
		defer func() {
			if r := recover(); r != "progress exploded" {
				t.Errorf("recovered %v", r)
			}
		}()
		if _, err := run(t, e, req); err != nil {
			t.Errorf("Run returned %v instead of panicking", err)
		}
	}()
	f.srv.CheckClean(t, 5*time.Second)
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		missing []string
		wantErr string
	}{
		{name: "nothing", opts: Options{}, missing: []string{EnvEnabled + "=1", EnvURL, EnvToken}},
		{name: "not enabled", opts: Options{URL: "https://bridge.example.com", Token: "t"}, missing: []string{EnvEnabled + "=1"}},
		{name: "no token", opts: Options{Enabled: true, URL: "https://bridge.example.com"}, missing: []string{EnvToken}},
		{name: "ok", opts: Options{Enabled: true, URL: "https://bridge.example.com/", Token: "t"}},
		{name: "plain http remote", opts: Options{Enabled: true, URL: "http://bridge.example.com", Token: "t"}, wantErr: "loopback"},
		{name: "negative timeout", opts: Options{Enabled: true, URL: "https://b.example.com", Token: "t", Timeout: -1}, wantErr: "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.opts)
			var nce *NotConfiguredError
			switch {
			case tc.missing != nil:
				if !errors.As(err, &nce) {
					t.Fatalf("err = %v, want *NotConfiguredError", err)
				}
				if diff := cmp.Diff(tc.missing, nce.Missing); diff != "" {
					t.Errorf("missing (-want +got):\n%s", diff)
				}
				if tc.opts.Configured() {
					t.Error("Configured() = true")
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("New: %v", err)
			default:
				if e.bridge.base != "https://bridge.example.com" || e.opts.Timeout != DefaultTimeout || e.opts.MaxArchiveBytes != DefaultMaxArchiveBytes {
					t.Errorf("defaults: base %q timeout %v max %d", e.bridge.base, e.opts.Timeout, e.opts.MaxArchiveBytes)
				}
			}
		})
	}
}

// pathWithout makes a PATH directory holding the tools a run needs but
// not timeout(1): a sandbox image whose shell cannot time a step itself,
// so the provider's and the host's deadlines must.
func pathWithout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range []string{"sh", "bash", "uname", "tar", "gzip", "rm", "mkdir", "sleep", "cut", "tr", "sed", "head", "cat", "env"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
