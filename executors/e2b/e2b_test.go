package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/e2b/e2btest"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/validation"
)

func TestCreateRequest(t *testing.T) {
	install := sh(validation.StepInstall, "exit 0")
	install.Network = validation.NetworkRegistry
	install.Timeout = 3 * time.Minute
	test := sh(validation.StepTest, "exit 0")
	test.Timeout = 2 * time.Minute
	tests := []struct {
		name        string
		steps       []validation.Step
		pm          validation.PackageManager
		allowOut    []string
		registry    []string
		wantTimeout int64
		wantFields  map[string]string // field → JSON
		wantUpdates []string
	}{
		{
			name:  "install with registry egress, then closed",
			steps: []validation.Step{install, test},
			pm:    validation.NPM,
			// setup 5m + margin 1s + (3m + 6s slack + 2s grace) + (2m + 6s + 2s)
			wantTimeout: 5*60 + 1 + 3*60 + 8 + 2*60 + 8,
			wantFields: map[string]string{
				"templateID": `"base"`,
				"secure":     `true`,
				"network":    `{"allowOut":["registry.npmjs.org"],"denyOut":["0.0.0.0/0"]}`,
				"metadata":   `{"app":"gilf","job":"42","repo":"octo/widgets"}`,
			},
			wantUpdates: []string{`{"denyOut":["0.0.0.0/0"],"allow_internet_access":false}`},
		},
		{
			name:        "no install: no internet at all",
			steps:       []validation.Step{test},
			pm:          validation.NPM,
			wantTimeout: 5*60 + 1 + 2*60 + 8,
			wantFields: map[string]string{
				"allow_internet_access": `false`,
				"network":               `{"denyOut":["0.0.0.0/0"]}`,
			},
		},
		{
			name:        "yarn berry registries",
			steps:       []validation.Step{install},
			pm:          validation.YarnBerry,
			wantTimeout: 5*60 + 1 + 3*60 + 8,
			wantFields: map[string]string{
				"network": `{"allowOut":["repo.yarnpkg.com","registry.yarnpkg.com","registry.npmjs.org"],"denyOut":["0.0.0.0/0"]}`,
			},
		},
		{
			name:        "the worker's registries join the defaults",
			steps:       []validation.Step{install},
			pm:          validation.NPM,
			registry:    []string{"registry.npmjs.org", "npm.mirror.example"},
			wantTimeout: 5*60 + 1 + 3*60 + 8,
			wantFields: map[string]string{
				"network": `{"allowOut":["registry.npmjs.org","npm.mirror.example"],"denyOut":["0.0.0.0/0"]}`,
			},
		},
		{
			name:        "configured hosts replace the defaults",
			registry:    []string{"npm.mirror.example"},
			steps:       []validation.Step{install, test},
			pm:          validation.PNPM,
			allowOut:    []string{"npm.internal.example"},
			wantTimeout: 5*60 + 1 + 3*60 + 8 + 2*60 + 8,
			wantFields: map[string]string{
				"network": `{"allowOut":["npm.internal.example"],"denyOut":["0.0.0.0/0"]}`,
			},
			wantUpdates: []string{`{"denyOut":["0.0.0.0/0"],"allow_internet_access":false}`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			e := f.exec(t, func(o *Options) { o.AllowOut, o.RegistryHosts = tc.allowOut, tc.registry })
			req := request(t, tc.steps...)
			req.Plan.PackageManager = tc.pm
			res, err := run(t, e, req)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for i, r := range res.Steps {
				if r.Status != validation.StatusPassed {
					t.Errorf("step %d %s: %s (%s)", i, r.Name, r.Status, r.Reason)
				}
				// The record says what was asked of the provider, and
				// that the provider, not gilf, enforced it.
				if r.Egress == nil || r.Egress.Enforcement != validation.EnforcedByProvider || r.Egress.Network != r.Network || r.Egress.Observed {
					t.Errorf("step %s egress record %+v", r.Name, r.Egress)
					continue
				}
				if r.Network == validation.NetworkRegistry && len(r.Egress.AllowList) == 0 || r.Network == validation.NetworkNone && len(r.Egress.AllowList) != 0 {
					t.Errorf("step %s (%s) allow-list %q", r.Name, r.Network, r.Egress.AllowList)
				}
			}
			creates := f.srv.Creates()
			if len(creates) != 1 {
				t.Fatalf("%d creates, want 1", len(creates))
			}
			c := creates[0]
			if !c.Has("timeout") {
				t.Fatal("create has no timeout: E2B would kill the sandbox after 15 s")
			}
			var timeout int64
			if err := json.Unmarshal(c.Fields["timeout"], &timeout); err != nil {
				t.Fatal(err)
			}
			if timeout != tc.wantTimeout {
				t.Errorf("timeout %d s, want %d s", timeout, tc.wantTimeout)
			}
			for field, want := range tc.wantFields {
				if got := string(c.Fields[field]); got != want {
					t.Errorf("%s = %s, want %s", field, got, want)
				}
			}
			for _, absent := range []string{"cpuCount", "memoryMB", "envVars"} {
				if c.Has(absent) {
					t.Errorf("create sent %s", absent)
				}
			}
			var updates []string
			for _, u := range f.srv.NetworkUpdates() {
				updates = append(updates, string(u.Body))
			}
			if diff := cmp.Diff(tc.wantUpdates, updates); diff != "" {
				t.Errorf("network updates (-want +got):\n%s", diff)
			}
			f.srv.CheckClean(t, 5*time.Second)
		})
	}
}

func TestResultDescribesTheSandbox(t *testing.T) {
	f := newFixture(t, func(o *e2btest.Options) { o.CPUCount, o.MemoryMB = 4, 2048 })
	e := f.exec(t, func(o *Options) { o.CPU, o.MemoryMB = 2, 1024 })
	res, err := run(t, e, request(t, sh(validation.StepTest, "echo ok")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Executor != executors.NameManagedE2B || res.Tier != validation.TierRemote {
		t.Errorf("executor %q tier %q", res.Executor, res.Tier)
	}
	if diff := cmp.Diff(executors.Resources{VCPU: 4, MemoryGiB: 2}, res.Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if res.Platform.OS != "linux" || res.Platform.Arch != runtime.GOARCH || res.Platform.Kernel == "" {
		t.Errorf("platform %+v", res.Platform)
	}
	if _, err := exec.LookPath("node"); err == nil && !nodeVersion.MatchString(res.Platform.Node) {
		t.Errorf("node %q, want a version (node is installed here)", res.Platform.Node)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{"E2B sandbox i", "egress: none for every step", "reported by the executor", "not the configured 2 vCPU"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if !res.Steps[0].Reported || res.Steps[0].Cwd == "" || !strings.HasSuffix(res.Steps[0].Cwd, "/"+archive.PackRoot) {
		t.Errorf("step %+v: want reported, with the checkout as cwd", res.Steps[0])
	}
	if diff := cmp.Diff([]string{EnvAPIKey}, res.SecretsWithheld); diff != "" {
		t.Errorf("withheld (-want +got):\n%s", diff)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

// TestExplicitTimeoutOutlivesTheDefault: the stand-in kills a sandbox
// created without a timeout after its default; the client always sends
// one, so a step longer than the default still ends well.
func TestExplicitTimeoutOutlivesTheDefault(t *testing.T) {
	f := newFixture(t, func(o *e2btest.Options) { o.DefaultTimeout = 500 * time.Millisecond })
	e := f.exec(t, nil)
	res, err := run(t, e, request(t, sh(validation.StepTest, "sleep 1; echo survived")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s := res.Steps[0]; s.Status != validation.StatusPassed || !strings.Contains(s.Output.Head, "survived") {
		t.Errorf("step %s (%s) output %q", s.Status, s.Reason, s.Output.Head)
	}
	if n := f.srv.Expired(); n != 0 {
		t.Errorf("%d sandbox(es) died at the default timeout", n)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

func TestCreateErrors(t *testing.T) {
	tests := []struct {
		name      string
		mod       func(*e2btest.Options)
		fault     e2btest.Fault
		wrongKey  bool
		preCreate int // sandboxes another worker holds
		is        error
		status    int
		temporary bool
	}{
		{name: "wrong key", wrongKey: true, is: ErrUnauthorized, status: 401},
		{name: "injected 429", fault: e2btest.Fault{CreateStatus: 429}, is: ErrRateLimited, status: 429, temporary: true},
		{name: "concurrency limit", mod: func(o *e2btest.Options) { o.MaxConcurrent = 1 }, preCreate: 1, is: ErrRateLimited, status: 429, temporary: true},
		{name: "server error", fault: e2btest.Fault{CreateStatus: 500}, status: 500, temporary: true},
		{name: "unavailable", fault: e2btest.Fault{CreateStatus: 503}, status: 503, temporary: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mod)
			held := ""
			if tc.preCreate > 0 {
				held = createRaw(t, f)
			}
			f.srv.SetFault(tc.fault)
			e := f.exec(t, func(o *Options) {
				if tc.wrongKey {
					o.APIKey = testKey(t)
				}
			})
			res, err := run(t, e, request(t, sh(validation.StepTest, "exit 0")))
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *APIError", err)
			}
			if ae.Status != tc.status || ae.Temporary() != tc.temporary {
				t.Errorf("status %d temporary %v, want %d %v", ae.Status, ae.Temporary(), tc.status, tc.temporary)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			var ref *validation.Refusal
			if errors.As(err, &ref) || len(res.Steps) != 0 {
				t.Errorf("an infrastructure error came back as a refusal or with steps: %v %+v", err, res.Steps)
			}
			if strings.Contains(err.Error(), e.opts.APIKey) {
				t.Error("the error holds the API key")
			}
			if held != "" {
				killRaw(t, f, held)
			}
			f.srv.CheckClean(t, 5*time.Second)
		})
	}
}

// createRaw holds a sandbox as another worker would.
func createRaw(t *testing.T, f fixture) string {
	t.Helper()
	c := &apiClient{base: f.srv.URL, key: f.key, http: http.DefaultClient}
	info, err := c.create(t.Context(), createRequest{TemplateID: "base", Timeout: 60})
	if err != nil {
		t.Fatal(err)
	}
	return info.SandboxID
}

func killRaw(t *testing.T, f fixture, id string) {
	t.Helper()
	c := &apiClient{base: f.srv.URL, key: f.key, http: http.DefaultClient}
	if _, err := c.kill(t.Context(), id); err != nil {
		t.Fatal(err)
	}
}

func TestStreamFaults(t *testing.T) {
	tests := []struct {
		name      string
		fault     e2btest.Fault
		is        error
		as        func(error) bool
		temporary bool
	}{
		{name: "cut mid-way", fault: e2btest.Fault{StartCall: 2, Stream: e2btest.FaultCutStream}, is: ErrStreamBroken, temporary: true},
		{name: "truncated envelope", fault: e2btest.Fault{StartCall: 2, Stream: e2btest.FaultTruncatedEnvelope}, is: ErrStreamBroken, temporary: true},
		{name: "no end event", fault: e2btest.Fault{StartCall: 2, Stream: e2btest.FaultNoEndEvent}, is: ErrStreamBroken, temporary: true},
		{name: "setup stream cut", fault: e2btest.Fault{StartCall: 1, Stream: e2btest.FaultCutStream}, is: ErrStreamBroken, temporary: true},
		{name: "envd 401 before framing", fault: e2btest.Fault{StartCall: 2, Stream: e2btest.FaultUnauthorized}, is: ErrUnauthorized,
			as: func(err error) bool { var ae *APIError; return errors.As(err, &ae) && ae.Status == 401 }},
		{name: "sandbox gone", fault: e2btest.Fault{StartCall: 2, Stream: e2btest.FaultEndStreamError, Code: "unavailable"}, temporary: true,
			as: func(err error) bool { var re *RPCError; return errors.As(err, &re) && re.Code == "unavailable" }},
		{name: "rate limited in envd", fault: e2btest.Fault{StartCall: 2, Stream: e2btest.FaultEndStreamError, Code: "resource_exhausted"}, is: ErrRateLimited, temporary: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.srv.SetFault(tc.fault)
			e := f.exec(t, nil)
			_, err := run(t, e, request(t, sh(validation.StepTest, "echo started; sleep 1; echo done"), sh(validation.StepBuild, "exit 0")))
			if err == nil {
				t.Fatal("Run succeeded over a broken stream")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.is)
			}
			if tc.as != nil && !tc.as(err) {
				t.Errorf("err = %v (%T), not the expected type", err, err)
			}
			var tmp interface{ Temporary() bool }
			if errors.As(err, &tmp) && tmp.Temporary() != tc.temporary {
				t.Errorf("Temporary() = %v, want %v", tmp.Temporary(), tc.temporary)
			}
			if errors.Is(err, context.Canceled) {
				t.Errorf("err = %v looks like a cancellation", err)
			}
			if f.srv.Killed() != 1 {
				t.Errorf("sandbox deletes = %d, want 1", f.srv.Killed())
			}
			f.srv.CheckClean(t, 5*time.Second)
		})
	}
}

// TestHostRouting runs without GILF_E2B_ENVD_URL: envd is reached at
// https://49983-<id>.<domain>, the domain the create response names.
func TestHostRouting(t *testing.T) {
	f := newFixture(t, func(o *e2btest.Options) { o.TLS, o.Domain = true, "example.com" })
	e := f.exec(t, func(o *Options) {
		o.EnvdURL = ""
		o.Domain = "unused.invalid"
		o.HTTPClient = f.srv.Client()
	})
	res, err := run(t, e, request(t, sh(validation.StepTest, "echo routed")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s := res.Steps[0]; s.Status != validation.StatusPassed || !strings.Contains(s.Output.Head, "routed") {
		t.Errorf("step %s output %q", s.Status, s.Output.Head)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

// TestHostStopsAStepEnvdDidNotKill: the image has no timeout(1) and envd
// ignores the deadline; the host waits the grace, kills the process with SendSignal, and the next step
// still runs.
func TestHostStopsAStepEnvdDidNotKill(t *testing.T) {
	f := newFixture(t, func(o *e2btest.Options) { o.Path = pathWithout(t) })
	f.srv.SetFault(e2btest.Fault{StartCall: 2, Stream: e2btest.FaultIgnoreDeadline})
	e := f.exec(t, func(o *Options) { o.StepGrace = 500 * time.Millisecond })
	slow := sh(validation.StepTest, "sleep 1000")
	slow.Timeout = time.Second
	start := time.Now()
	res, err := run(t, e, request(t, slow, sh(validation.StepBuild, "echo built")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
	want := []validation.Status{validation.StatusTimedOut, validation.StatusPassed}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Steps[0].Reason, "host stopped waiting") {
		t.Errorf("reason %q", res.Steps[0].Reason)
	}
	if res.Integrity != "" {
		t.Errorf("integrity %q", res.Integrity)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

// TestLifetimeCap: GILF_E2B_TIMEOUT_MS caps the sandbox; a step that would
// outlive it is cut at what is left and the rest is not run.
func TestLifetimeCap(t *testing.T) {
	f := newFixture(t, nil)
	e := f.exec(t, func(o *Options) { o.TimeoutMs = 4000 })
	start := time.Now()
	res, err := run(t, e, request(t, sh(validation.StepTest, "sleep 1000"), sh(validation.StepBuild, "exit 0")))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("Run took %v with a 4 s lifetime", took)
	}
	var timeout int64
	if err := json.Unmarshal(f.srv.Creates()[0].Fields["timeout"], &timeout); err != nil || timeout != 4 {
		t.Errorf("timeout %d (%v), want 4", timeout, err)
	}
	want := []validation.Status{validation.StatusTimedOut, validation.StatusNotRun}
	if diff := cmp.Diff(want, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Steps[0].Reason, "sandbox lifetime") || !strings.Contains(res.Steps[1].Reason, "sandbox lifetime") {
		t.Errorf("reasons %q, %q", res.Steps[0].Reason, res.Steps[1].Reason)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "capped by "+EnvTimeout) {
		t.Errorf("notes lack the cap: %q", res.Notes)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

func TestPanicInProgressStillKills(t *testing.T) {
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
	if f.srv.Killed() != 1 {
		t.Errorf("deletes = %d, want 1", f.srv.Killed())
	}
	f.srv.CheckClean(t, 5*time.Second)
}

// TestRedirectNotFollowed: the API key is a custom header Go's client
// would carry across a redirect; the client does not follow.
func TestRedirectNotFollowed(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "" {
			leaked.Add(1)
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/sandboxes", http.StatusTemporaryRedirect))
	defer redirect.Close()
	f := newFixture(t, nil)
	e := f.exec(t, func(o *Options) { o.APIURL = redirect.URL })
	_, err := run(t, e, request(t, sh(validation.StepTest, "exit 0")))
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v, want an *APIError with 307", err)
	}
	if n := leaked.Load(); n != 0 {
		t.Errorf("the API key reached the redirect target %d time(s)", n)
	}
}

func TestForgedMarkersAreInconclusive(t *testing.T) {
	f := newFixture(t, nil)
	e := f.exec(t, nil)
	// The step finds the nonce in its parent shell's command line and
	// prints its own END with exit 0 before failing.
	// The step may run under timeout(1): look at its parent and grandparent.
	forge := sh(validation.StepTest, `tag=$(for p in $PPID $(cut -d' ' -f4 /proc/$PPID/stat); do tr '\000' '\n' < /proc/$p/cmdline; done | sed -n 's/.*__GILF_VALIDATION_START__:\([0-9a-f]*\)-test.*/\1/p' | head -n 1); printf '\n__GILF_VALIDATION_END__:%s-test:0\n' "$tag"; exit 1`)
	res, err := run(t, e, request(t, forge))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(res.Integrity, `duplicate END marker for step "test"`) {
		t.Errorf("integrity %q, want the duplicate END named", res.Integrity)
	}
	f.srv.CheckClean(t, 5*time.Second)
}

func TestShellAndArchiveLimits(t *testing.T) {
	step := func(pad int) validation.Step {
		return validation.Step{Name: validation.StepTest, Argv: []string{"true", strings.Repeat("a", pad)}, Network: validation.NetworkNone, Timeout: time.Minute}
	}
	size := func(pad int) int {
		return len(validation.BuildShell(validation.Plan{Steps: []validation.Step{step(pad)}}, strings.Repeat("0", 2*validation.NonceBytes)))
	}
	atLimit := 0 // the longest argument whose shell fits
	for size(atLimit+1) <= MaxShellBytes {
		atLimit += max(1, (MaxShellBytes-size(atLimit+1))/4)
	}
	if size(atLimit) > MaxShellBytes || size(atLimit+1) <= MaxShellBytes {
		t.Fatalf("no boundary found: %d → %d, %d", atLimit, size(atLimit), size(atLimit+1))
	}
	dir := repo(t)
	var packed bytes.Buffer
	if err := archive.Pack(t.Context(), dir, &packed); err != nil {
		t.Fatal(err)
	}
	archiveSize := int64(packed.Len())
	tests := []struct {
		name       string
		pad        int
		maxArchive int64
		wantCode   validation.Code
	}{
		{name: "shell at the limit", pad: atLimit, maxArchive: archiveSize},
		{name: "shell over the limit", pad: atLimit + 1, maxArchive: archiveSize, wantCode: validation.CodeScriptTooLong},
		{name: "archive over the limit", pad: 0, maxArchive: archiveSize - 1, wantCode: validation.CodeArchiveTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			e := f.exec(t, func(o *Options) { o.MaxArchiveBytes = tc.maxArchive })
			req := request(t, step(tc.pad))
			req.Dir = dir
			res, err := run(t, e, req)
			var ref *validation.Refusal
			switch {
			case tc.wantCode == "":
				if err != nil || res.Steps[0].Status != validation.StatusPassed {
					t.Fatalf("Run: %v %+v", err, res.Steps)
				}
			case !errors.As(err, &ref) || ref.Code != tc.wantCode:
				t.Fatalf("err = %v, want refusal %s", err, tc.wantCode)
			case len(f.srv.Creates()) != 0:
				t.Errorf("a refused run created a sandbox")
			}
			f.srv.CheckClean(t, 5*time.Second)
		})
	}
}

func TestOnlyInconclusiveStepsCreateNothing(t *testing.T) {
	f := newFixture(t, nil)
	e := f.exec(t, nil)
	st := sh(validation.StepTest, "exit 0")
	st.Inconclusive = "npm's default test script proves nothing"
	res, err := run(t, e, request(t, st))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Steps[0].Status != validation.StatusInconclusive || len(f.srv.Creates()) != 0 {
		t.Errorf("status %s, %d creates", res.Steps[0].Status, len(f.srv.Creates()))
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
		notConf bool
	}{
		{name: "no key", opts: Options{}, notConf: true},
		{name: "blank key", opts: Options{APIKey: "  "}, notConf: true},
		{name: "defaults", opts: Options{APIKey: "e2b_x"}},
		{name: "plain http to a remote API", opts: Options{APIKey: "e2b_x", APIURL: "http://api.e2b.app"}, wantErr: "plain http is allowed only to a loopback host"},
		{name: "debug envd on localhost", opts: Options{APIKey: "e2b_x", EnvdURL: "http://localhost:49983"}},
		{name: "bad scheme", opts: Options{APIKey: "e2b_x", EnvdURL: "ftp://localhost"}, wantErr: "want https"},
		{name: "negative timeout", opts: Options{APIKey: "e2b_x", TimeoutMs: -1}, wantErr: "is negative"},
		{name: "timeout inside the margin", opts: Options{APIKey: "e2b_x", TimeoutMs: 30_000}, wantErr: "leaves nothing"},
		{name: "relative work dir", opts: Options{APIKey: "e2b_x", WorkDir: "gilf"}, wantErr: "not an absolute path"},
		{name: "host with a path", opts: Options{APIKey: "e2b_x", AllowOut: []string{"registry.npmjs.org/x"}}, wantErr: "not a host"},
		{name: "bad domain", opts: Options{APIKey: "e2b_x", Domain: "a b"}, wantErr: "not a host name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.opts)
			var nce *NotConfiguredError
			switch {
			case tc.notConf:
				if !errors.As(err, &nce) || !strings.Contains(err.Error(), EnvAPIKey) {
					t.Fatalf("err = %v, want *NotConfiguredError naming %s", err, EnvAPIKey)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("New: %v", err)
			default:
				if e.opts.Template != DefaultTemplate || e.opts.APIURL != DefaultAPIURL || e.opts.TimeoutMs != DefaultTimeout.Milliseconds() || e.opts.User != DefaultUser {
					t.Errorf("defaults not applied: %+v", e.opts.LogValue())
				}
			}
		})
	}
}

func TestOptionsNeverLogTheKey(t *testing.T) {
	var buf bytes.Buffer
	key := testKey(t)
	o := Options{APIKey: key, APIURL: DefaultAPIURL}
	slogText(&buf, o)
	if strings.Contains(buf.String(), key) || !strings.Contains(buf.String(), "api_key_set=true") {
		t.Errorf("log line %q", buf.String())
	}
}

func TestLifetime(t *testing.T) {
	e, err := New(Options{APIKey: "e2b_x", TimeoutMs: 600_000, SetupTimeout: time.Minute, StepGrace: 10 * time.Second, LifetimeMargin: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration) validation.Step { return validation.Step{Name: "test", Timeout: d} }
	incon := step(time.Hour)
	incon.Inconclusive = "x"
	tests := []struct {
		name   string
		steps  []validation.Step
		want   time.Duration
		capped bool
	}{
		// setup 60s + margin 20s; per step timeout + 6s slack + 10s grace
		{name: "sum", steps: []validation.Step{step(time.Minute), step(2 * time.Minute)}, want: 80*time.Second + 76*time.Second + 136*time.Second},
		{name: "rounded up", steps: []validation.Step{step(1500 * time.Millisecond)}, want: 98 * time.Second},
		{name: "inconclusive not counted", steps: []validation.Step{incon}, want: 80 * time.Second},
		{name: "at the cap", steps: []validation.Step{step(600*time.Second - 96*time.Second)}, want: 600 * time.Second},
		{name: "over the cap", steps: []validation.Step{step(600*time.Second - 95*time.Second)}, want: 600 * time.Second, capped: true},
		{name: "no timeout takes the cap", steps: []validation.Step{step(0)}, want: 600 * time.Second, capped: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, capped := e.lifetime(validation.Plan{Steps: tc.steps}, executors.RunConfig{})
			if got != tc.want || capped != tc.capped {
				t.Errorf("lifetime = %v capped %v, want %v %v", got, capped, tc.want, tc.capped)
			}
		})
	}
}

func TestEnvdBaseURL(t *testing.T) {
	if got := envdBaseURL("", "i7n3abc", "e2b.app"); got != "https://49983-i7n3abc.e2b.app" {
		t.Errorf("host routed: %s", got)
	}
	if got := envdBaseURL("http://localhost:49983", "i7n3abc", "e2b.app"); got != "http://localhost:49983" {
		t.Errorf("override: %s", got)
	}
}

var nodeVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

func TestSetupScript(t *testing.T) {
	if !strings.Contains(setupScript, "test -d "+archive.PackRoot+"\n") {
		t.Errorf("the setup script does not check for %s/:\n%s", archive.PackRoot, setupScript)
	}
}

// cancelOn is a transport that cancels the run when it sees a request for
// path, then lets that request go (it fails with the cancelled context).
type cancelOn struct {
	next   http.RoundTripper
	path   string
	cancel context.CancelFunc
	seen   atomic.Bool
}

func (c *cancelOn) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == c.path && c.seen.CompareAndSwap(false, true) {
		c.cancel()
	}
	return c.next.RoundTrip(r)
}

func TestCancelWhilePreparing(t *testing.T) {
	for _, path := range []string{"/sandboxes", "/files", "/process.Process/Start"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t, nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			e := f.exec(t, func(o *Options) {
				o.HTTPClient = &http.Client{Transport: &cancelOn{next: http.DefaultTransport, path: path, cancel: cancel}}
			})
			res, err := e.Run(ctx, request(t, sh(validation.StepTest, "exit 0")))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if len(res.Steps) != 1 || res.Steps[0].Status != validation.StatusNotRun || res.Steps[0].Reason != remote.ReasonCancelled {
				t.Errorf("steps %+v, want one not run for the cancel", res.Steps)
			}
			if c, k := len(f.srv.Creates()), f.srv.Killed(); c != 1 || k != 1 {
				t.Errorf("%d creates, %d kills: the sandbox made during the cancel must be killed", c, k)
			}
			f.srv.CheckClean(t, 5*time.Second)
		})
	}
}

// The merged repository config's nested e2b object wins for the template,
// and may shorten the sandbox lifetime but never lengthen it.
func TestRunConfigOverrides(t *testing.T) {
	tests := []struct {
		name         string
		run          executors.RunConfig
		wantTemplate string
		wantTimeout  int64
	}{
		{"worker settings", executors.RunConfig{}, "base", 30},
		{"run template and a shorter lifetime", executors.RunConfig{E2BTemplate: "node-20", E2BTimeout: 10 * time.Second}, "node-20", 10},
		{"a longer lifetime is not granted", executors.RunConfig{E2BTimeout: time.Hour}, "base", 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			e := f.exec(t, func(o *Options) { o.TimeoutMs = 30_000; o.Template = "base" })
			req := request(t, sh(validation.StepTest, "exit 0"))
			req.Run = tt.run
			if _, err := run(t, e, req); err != nil {
				t.Fatalf("Run: %v", err)
			}
			c := f.srv.Creates()[0]
			var template string
			var timeout int64
			if err := json.Unmarshal(c.Fields["templateID"], &template); err != nil || template != tt.wantTemplate {
				t.Errorf("templateID %q (%v), want %q", template, err, tt.wantTemplate)
			}
			if err := json.Unmarshal(c.Fields["timeout"], &timeout); err != nil || timeout != tt.wantTimeout {
				t.Errorf("timeout %d (%v), want %d", timeout, err, tt.wantTimeout)
			}
		})
	}
}
