package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/registrytest"
	"github.com/gilf-review/gilf/toolchain"
	"github.com/gilf-review/gilf/validation"
)

// pmWorld is what the package-manager tests share: one real npm registry
// (Verdaccio on loopback, serving express's tree and the package managers)
// and one toolchain cache, prepared from it once, as a worker prepares it.
type pmWorldT struct {
	once  sync.Once
	err   error
	dir   string
	reg   *registrytest.Registry
	cache string
	tools map[string]validation.Tool // by "manager@version"
}

var pmWorld pmWorldT

// pmTools are the package managers the tests run, as ToolRequests.
var pmTools = []validation.ToolRequest{
	{Manager: validation.PNPM, Version: "10.14.0"},
	{Manager: validation.PNPM, Version: "9"},
	{Manager: validation.Yarn, Version: "1"},
	{Manager: validation.YarnBerry, Version: "4.4.1"},
	{Manager: validation.Bun, Version: "1.2.20"},
}

func pmKey(tr validation.ToolRequest) string { return string(tr.Manager) + "@" + tr.Version }

// world starts the registry and prepares every tool, once.
func world(t testing.TB) *pmWorldT {
	t.Helper()
	pmWorld.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// A short path: Verdaccio's unix socket must fit sun_path.
		if pmWorld.dir, pmWorld.err = os.MkdirTemp("", "gilf-pm-"); pmWorld.err != nil {
			return
		}
		if pmWorld.reg, pmWorld.err = registrytest.StartWithTools(ctx, filepath.Join(pmWorld.dir, "r"), io.Discard); pmWorld.err != nil {
			return
		}
		pmWorld.cache = filepath.Join(pmWorld.dir, "toolchains")
		c, err := toolchain.New(toolchain.Options{Dir: pmWorld.cache, Registry: pmWorld.reg.URL})
		if err != nil {
			pmWorld.err = err
			return
		}
		pmWorld.tools = map[string]validation.Tool{}
		for _, tr := range pmTools {
			tool, err := c.Prepare(ctx, tr)
			if err != nil {
				pmWorld.err = fmt.Errorf("prepare %s: %w", pmKey(tr), err)
				return
			}
			pmWorld.tools[pmKey(tr)] = tool
		}
	})
	if pmWorld.err != nil {
		t.Fatalf("package-manager test world: %v", pmWorld.err)
	}
	return &pmWorld
}

// stopWorld stops what world started; testMain calls it.
func stopWorld() {
	if pmWorld.reg != nil {
		pmWorld.reg.Close()
	}
	if pmWorld.dir != "" {
		os.RemoveAll(pmWorld.dir)
	}
}

// registryEnv points every package manager run bare on the host at the
// test registry, with caches under home.
func registryEnv(url, home string) []string {
	return []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CI=true",
		"npm_config_registry=" + url,
		"YARN_REGISTRY=" + url,
		"YARN_NPM_REGISTRY_SERVER=" + strings.TrimSuffix(url, "/"),
		"YARN_UNSAFE_HTTP_WHITELIST=127.0.0.1",
		"YARN_ENABLE_TELEMETRY=0",
		"BUN_CONFIG_REGISTRY=" + url,
		"npm_config_manage_package_manager_versions=false",
	}
}

// pmRepo writes a repository that depends on express and whose test
// checks which package manager ran it (npm_config_user_agent, which
// pnpm, yarn and bun set for scripts) and that git sees the checkout.
func pmRepo(t testing.TB, packageManager, userAgent string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	pm := ""
	if packageManager != "" {
		pm = fmt.Sprintf(`"packageManager": %q,`, packageManager)
	}
	name, version, _ := strings.Cut(registrytest.Root(), "@")
	files := map[string]string{
		"package.json": fmt.Sprintf(`{
  "name": "pm-fixture", "version": "1.0.0", "private": true, %s
  "scripts": {"test": "node test.js", "lint": "git ls-files --error-unmatch package.json test.js"},
  "dependencies": {%q: %q}
}
`, pm, name, version),
		"test.js": fmt.Sprintf(`const assert = require('assert');
assert.strictEqual(typeof require(%q), 'function');
const ua = process.env.npm_config_user_agent || '';
assert.ok(ua.startsWith(%q), 'user agent ' + ua);
console.log('ran by ' + ua.split(' ')[0]);
`, name, userAgent),
	}
	for k, v := range extra {
		files[k] = v
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bare runs a prepared package manager on the host, outside any sandbox.
func bare(t testing.TB, dir string, env []string, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q in %s: %v\n%s", argv, dir, err, out)
	}
}

// pmEnv is the environment of gilf validate for these tests: the worker's
// npm names the test registry (so the install step's allow-list and the
// sandbox's own registry settings point there), and the toolchain cache
// is the shared, already prepared one.
func pmEnv(w *pmWorldT) []string {
	return []string{
		"npm_config_registry=" + w.reg.URL,
		"GILF_TOOLCHAIN_DIR=" + w.cache,
		"GILF_TOOLCHAIN_REGISTRY=" + w.reg.URL,
		"GILF_LOCAL_MIN_TIER=read-only",
	}
}

type pmRecord struct {
	Outcome       string              `json:"outcome"`
	IsolationTier string              `json:"isolationTier"`
	Refusal       *validation.Refusal `json:"refusal"`
	Platform      validation.Platform `json:"platform"`
	Notes         []string            `json:"notes"`
	Steps         []struct {
		Name    string   `json:"name"`
		Command []string `json:"command"`
		Status  string   `json:"status"`
		Output  struct {
			Head string `json:"head"`
			Tail string `json:"tail"`
		} `json:"output"`
	} `json:"steps"`
}

func validateJSON(t *testing.T, env []string, dir string) (pmRecord, result) {
	t.Helper()
	r := gilf(t, env, "validate", "--json", dir)
	var rec pmRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("record: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return rec, r
}

// pmCase is one real repository of one package manager.
type pmCase struct {
	name     string
	field    string // packageManager
	ua       string // the user agent's start the test script asserts
	extra    map[string]string
	lock     func(t testing.TB, dir string, env []string)
	lockfile string
	version  string // the record's package-manager version
	install  string // the install command's start
}

// pmCases are the repositories of TestValidatePackageManagers and of the
// overhead benchmark, one per kind of lockfile.
func pmCases(t testing.TB, w *pmWorldT) []pmCase {
	bin := func(tr validation.ToolRequest, cmd string) string {
		return filepath.Join(w.tools[pmKey(tr)].Dir, "bin", cmd)
	}
	berry := pmTools[3]
	berryRelease, err := os.ReadFile(filepath.Join(w.tools[pmKey(berry)].Dir, "pkg", "bin", "yarn.js"))
	if err != nil {
		t.Fatal(err)
	}
	return []pmCase{
		{
			name: "pnpm 10 from packageManager, lockfile v9", field: "pnpm@10.14.0", ua: "pnpm/10.14.0",
			lock: func(t testing.TB, dir string, env []string) {
				bare(t, dir, env, bin(pmTools[0], "pnpm"), "install", "--lockfile-only")
			},
			lockfile: "pnpm-lock.yaml", version: "10.14.0", install: "pnpm install --frozen-lockfile",
		},
		{
			name: "pnpm 9 from lockfile v9 alone", ua: "pnpm/9.15.9",
			lock: func(t testing.TB, dir string, env []string) {
				bare(t, dir, env, bin(pmTools[1], "pnpm"), "install", "--lockfile-only")
			},
			lockfile: "pnpm-lock.yaml", version: "9.15.9", install: "pnpm install --frozen-lockfile",
		},
		{
			name: "yarn classic from yarn.lock v1", ua: "yarn/1.22.22",
			lock: func(t testing.TB, dir string, env []string) {
				bare(t, dir, env, bin(pmTools[2], "yarn"), "install", "--ignore-scripts", "--no-progress")
				os.RemoveAll(filepath.Join(dir, "node_modules"))
			},
			lockfile: "yarn.lock", version: "1.22.22", install: "yarn install --frozen-lockfile",
		},
		{
			name: "yarn berry from packageManager", field: "yarn@4.4.1", ua: "yarn/4.4.1",
			extra: map[string]string{".yarnrc.yml": "nodeLinker: node-modules\n"},
			lock: func(t testing.TB, dir string, env []string) {
				bare(t, dir, env, bin(berry, "yarn"), "install", "--mode=update-lockfile")
			},
			lockfile: "yarn.lock", version: "4.4.1", install: "yarn install --immutable",
		},
		{
			name: "yarn berry from a committed release", ua: "yarn/4.4.1",
			extra: map[string]string{
				".yarnrc.yml":                   "yarnPath: .yarn/releases/yarn-4.4.1.cjs\nnodeLinker: node-modules\n",
				".yarn/releases/yarn-4.4.1.cjs": string(berryRelease),
			},
			lock: func(t testing.TB, dir string, env []string) {
				bare(t, dir, env, "node", filepath.Join(dir, ".yarn/releases/yarn-4.4.1.cjs"), "install", "--mode=update-lockfile")
			},
			lockfile: "yarn.lock", version: "4.4.1", install: "yarn install --immutable",
		},
		{
			name: "bun from packageManager, text lockfile", field: "bun@1.2.20", ua: "bun/1.2.20",
			lock: func(t testing.TB, dir string, env []string) {
				bare(t, dir, env, bin(pmTools[4], "bun"), "install", "--lockfile-only")
			},
			lockfile: "bun.lock", version: "1.2.20", install: "bun install --frozen-lockfile",
		},
	}
}

// Every package manager at the version the checkout pins, prepared from
// the registry into the cache and bound into the sandbox: real
// repositories with real lockfiles of each kind (made by that package
// manager, bare, from the same registry), validated through the local
// executor at tier read-only.
func TestValidatePackageManagers(t *testing.T) {
	w := world(t)
	for _, tc := range pmCases(t, w) {
		t.Run(tc.name, func(t *testing.T) {
			dir := pmRepo(t, tc.field, tc.ua, tc.extra)
			tc.lock(t, dir, registryEnv(w.reg.URL, t.TempDir()))
			if _, err := os.Stat(filepath.Join(dir, tc.lockfile)); err != nil {
				t.Fatalf("the package manager made no %s: %v", tc.lockfile, err)
			}
			rec, r := validateJSON(t, pmEnv(w), dir)
			if r.code != exitOK || rec.Outcome != "passed" {
				t.Fatalf("exit %d, outcome %q, want 0 and passed\nstdout:\n%s\nstderr:\n%s", r.code, rec.Outcome, r.stdout, r.stderr)
			}
			if rec.IsolationTier != "read-only" {
				t.Errorf("isolation tier %q, want read-only", rec.IsolationTier)
			}
			if rec.Platform.PackageManagerVersion != tc.version {
				t.Errorf("record's package-manager version %q, want %q", rec.Platform.PackageManagerVersion, tc.version)
			}
			if len(rec.Steps) == 0 || !strings.HasPrefix(strings.Join(rec.Steps[0].Command, " "), tc.install) {
				t.Errorf("install step %+v, want %q", rec.Steps, tc.install)
			}
			for _, s := range rec.Steps {
				if s.Name == "test" && !strings.Contains(s.Output.Head+s.Output.Tail, "ran by "+tc.ua) {
					t.Errorf("test output %q does not say %s ran it", s.Output.Head, tc.ua)
				}
			}
		})
	}
}

// A version nobody can provide is gilf's refusal, never the pull
// request's failure: exit code 3, the code and the version named.
func TestValidatePackageManagerUnavailable(t *testing.T) {
	w := world(t)
	dir := pmRepo(t, "pnpm@9.99.0", "pnpm/9.99.0", map[string]string{"pnpm-lock.yaml": "lockfileVersion: '9.0'\n"})
	rec, r := validateJSON(t, pmEnv(w), dir)
	if r.code != exitUnproven || rec.Outcome != string(validation.OutcomeRefused) {
		t.Fatalf("exit %d, outcome %q; want %d and refused\nstdout:\n%s\nstderr:\n%s", r.code, rec.Outcome, exitUnproven, r.stdout, r.stderr)
	}
	if rec.Refusal == nil || rec.Refusal.Code != validation.CodePackageManagerUnavailable || !strings.Contains(rec.Refusal.Msg, "9.99.0") {
		t.Errorf("refusal %+v, want %s naming 9.99.0", rec.Refusal, validation.CodePackageManagerUnavailable)
	}
	if len(rec.Steps) != 0 {
		for _, s := range rec.Steps {
			if s.Status != "not_run" {
				t.Errorf("step %s ran (%s) although the package manager was refused", s.Name, s.Status)
			}
		}
	}
}
