package e2b

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/e2b/e2btest"
	"github.com/gilf-review/gilf/validation"
)

// testKey is generated per test process: no key lives in the repository.
func testKey(t *testing.T) string {
	t.Helper()
	return "e2b_" + randomHex(t, 20)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	v, err := validation.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	for len(v) < 2*n {
		v += v
	}
	return v[:2*n]
}

// fixture is a stand-in E2B and the key it accepts.
type fixture struct {
	srv *e2btest.Server
	key string
}

func newFixture(t *testing.T, mod func(*e2btest.Options)) fixture {
	t.Helper()
	o := e2btest.Options{APIKey: testKey(t)}
	if mod != nil {
		mod(&o)
	}
	return fixture{srv: e2btest.New(t, o), key: o.APIKey}
}

func (f fixture) exec(t *testing.T, mod func(*Options)) *Executor {
	t.Helper()
	srv := f.srv
	o := Options{
		APIKey:         f.key,
		APIURL:         srv.URL,
		EnvdURL:        srv.URL,
		StepGrace:      2 * time.Second,
		LifetimeMargin: time.Second,
		TempRoot:       t.TempDir(),
		Logger:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
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

func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"x","scripts":{"test":"node --test"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func request(t *testing.T, steps ...validation.Step) executors.Request {
	t.Helper()
	return executors.Request{
		Plan:   validation.Plan{PackageManager: validation.NPM, PackageManagerSource: "default", Steps: steps},
		Dir:    repo(t),
		Labels: map[string]string{"repo": "octo/widgets", "job": "42"},
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

func slogText(w io.Writer, v any) {
	slog.New(slog.NewTextHandler(w, nil)).Info("options", "opts", v)
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
