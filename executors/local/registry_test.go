package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/registrytest"
	"github.com/gilf-review/gilf/validation"
)

// The package's one registry: a real Verdaccio on loopback, started by
// the first test that needs it and stopped by TestMain.
var testRegistry struct {
	once sync.Once
	r    *registrytest.Registry
	dir  string
	err  error
}

func registry(t testing.TB) *registrytest.Registry {
	t.Helper()
	testRegistry.once.Do(func() {
		// A short path: the registry's unix socket lives in it.
		testRegistry.dir, testRegistry.err = os.MkdirTemp("", "gilf-reg-")
		if testRegistry.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// With the package managers: yarn berry and bun are prepared
		// from it as a worker prepares them.
		testRegistry.r, testRegistry.err = registrytest.StartWithTools(ctx, testRegistry.dir, io.Discard)
	})
	if testRegistry.err != nil {
		t.Fatalf("start the registry: %v", testRegistry.err)
	}
	return testRegistry.r
}

// stopRegistry is TestMain's: it stops the registry if a test started it.
func stopRegistry() error {
	var err error
	if testRegistry.r != nil {
		err = testRegistry.r.Close()
	}
	if testRegistry.dir != "" {
		if rerr := os.RemoveAll(testRegistry.dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// registryRepo is a repository whose one dependency is the registry's
// real tree, with the registry named in its own .npmrc and .yarnrc.
func registryRepo(t testing.TB, url string, extra map[string]string) string {
	t.Helper()
	name, version, _ := strings.Cut(strings.TrimPrefix(registrytest.Root(), "@"), "@")
	files := map[string]string{
		"package.json": fmt.Sprintf(`{"name":"app","version":"1.0.0","private":true,"dependencies":{%q:%q},
"scripts":{"test":"node -e \"require('%s'); console.log('dependency loaded')\""}}`, name, version, name),
		".npmrc":  "registry=" + url + "\n",
		".yarnrc": "registry \"" + url + "\"\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	return repo(t, files)
}

// Each package manager installs the real tree from the loopback registry
// through the proxy, and the record says what was reached.
func TestInstallThroughProxy(t *testing.T) {
	r := registry(t)
	rule, err := egress.RuleFromURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, pm := range []validation.PackageManager{validation.NPM, validation.PNPM, validation.Yarn} {
		t.Run(string(pm), func(t *testing.T) {
			e := newExec(t, Options{Egress: EgressOptions{AllowHosts: []egress.Rule{rule}}})
			before := r.Connections()
			res := runPlan(t, e, registryRepo(t, r.URL, nil),
				validation.Step{Name: validation.StepInstall, Argv: validation.InstallArgv(pm, false), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute},
				validation.Step{Name: validation.StepTest, Argv: validation.RunArgv(pm, "test"), Network: validation.NetworkNone, Timeout: time.Minute},
			)
			in, test := res.Steps[0], res.Steps[1]
			wantStatus(t, in, validation.StatusPassed)
			wantStatus(t, test, validation.StatusPassed)
			if !strings.Contains(test.Output.Head, "dependency loaded") {
				t.Errorf("test output %q", test.Output.Head)
			}
			eg := in.Egress
			if eg == nil || len(eg.Denied) != 0 || len(eg.Allowed) != 1 {
				t.Fatalf("egress %+v, want the registry alone", eg)
			}
			a := eg.Allowed[0]
			if a.Host != "127.0.0.1" || a.Port != rule.Port || a.Connections < 1 || a.BytesIn < 100<<10 || a.BytesOut < 1<<10 {
				t.Errorf("allowed %+v: want the registry's address, and the tree's bytes", a)
			}
			// The proxy counts each request it decided; its upstream
			// connections are kept alive, so the registry sees fewer.
			if got := r.Connections() - before; got < 1 || got > int64(a.Connections) {
				t.Errorf("the registry saw %d connections, the proxy recorded %d", got, a.Connections)
			}
			if s := eg.Summary(); s != "registry via proxy: 1 host" {
				t.Errorf("summary %q", s)
			}
		})
	}
}

// A repository's .npmrc may name any registry: the proxy refuses what the
// allow-list does not name, and the listener there sees nothing.
func TestRepositoryRegistryIsRefused(t *testing.T) {
	r := registry(t)
	rule, err := egress.RuleFromURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	h := listenHost(t)
	evil := "http://127.0.0.1:" + strconv.Itoa(port(h.tcp4.Addr())) + "/"
	e := newExec(t, Options{Egress: EgressOptions{AllowHosts: []egress.Rule{rule}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := e.Run(ctx, executors.Request{Dir: registryRepo(t, evil, nil), Plan: validation.Plan{Steps: []validation.Step{
		{Name: validation.StepInstall, Argv: append(validation.InstallArgv(validation.NPM, false), "--fetch-retries=0"), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute},
		{Name: validation.StepTest, Argv: validation.RunArgv(validation.NPM, "test"), Network: validation.NetworkNone},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	in := res.Steps[0]
	wantStatus(t, in, validation.StatusFailed)
	wantStatus(t, res.Steps[1], validation.StatusNotRun)
	h.assertUntouched(t)
	if in.Egress == nil || len(in.Egress.Allowed) != 0 || len(in.Egress.Denied) != 1 {
		t.Fatalf("egress %+v", in.Egress)
	}
	d := in.Egress.Denied[0]
	if d.Host != "127.0.0.1" || d.Port != port(h.tcp4.Addr()) || d.Reason != string(egress.ReasonNotAllowed) || d.Count < 1 {
		t.Errorf("denial %+v", d)
	}
}

// The worker's own registry setting reaches the sandbox's user .npmrc: a
// repository that names none installs from where the worker would.
func TestWorkerRegistryReachesTheSandbox(t *testing.T) {
	r := registry(t)
	rule, err := egress.RuleFromURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	e := newExec(t, Options{Egress: EgressOptions{AllowHosts: []egress.Rule{rule}, Registries: map[string]string{"registry": r.URL}}})
	dir := registryRepo(t, r.URL, nil)
	for _, f := range []string{".npmrc", ".yarnrc"} {
		if err := os.Remove(dir + "/" + f); err != nil {
			t.Fatal(err)
		}
	}
	res := runPlan(t, e, dir,
		validation.Step{Name: validation.StepInstall, Argv: validation.InstallArgv(validation.NPM, false), Network: validation.NetworkRegistry, Timeout: 3 * time.Minute},
		shStep("test", `cat "$HOME/.npmrc"`, time.Minute),
	)
	wantStatus(t, res.Steps[0], validation.StatusPassed)
	if got := res.Steps[1].Output.Head; got != "registry="+r.URL+"\n" {
		t.Errorf("the sandbox's ~/.npmrc is %q", got)
	}
}
