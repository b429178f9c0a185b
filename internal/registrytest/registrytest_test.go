package registrytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The package's one shared registry, started by TestMain.
var (
	shared        *Registry
	startDuration time.Duration
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "registrytest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	reg, err := Start(ctx, dir, &log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "registrytest: start: %v\n", err)
		return 1
	}
	startDuration = time.Since(begin)
	shared = reg
	code := m.Run()
	if err := reg.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "registrytest: close: %v\n", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "verdaccio output:\n%s", log.String())
	}
	return code
}

func TestStartDuration(t *testing.T) {
	t.Logf("Start took %s, publishing %d packages", startDuration, len(shared.Packages()))
	if startDuration > 20*time.Second {
		t.Errorf("Start took %s; it should take a few seconds", startDuration)
	}
}

func TestPackagesTxt(t *testing.T) {
	specs, err := parseSpecs(packagesTxt)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Root(), "express@4.21.2"; got != want {
		t.Errorf("Root() = %q, want %q", got, want)
	}
	if n := len(specs); n < 20 || n > 80 {
		t.Errorf("packages.txt lists %d packages, want a tree of 20-80", n)
	}
	var want []string
	for _, s := range specs {
		want = append(want, s.String())
	}
	if diff := cmp.Diff(want, shared.Packages()); diff != "" {
		t.Errorf("Packages() (-packages.txt +got):\n%s", diff)
	}
	// Start publishes no package manager: StartWithTools does (the
	// toolchain tests check what it publishes).
	if tools := shared.Tools(); len(tools) != 0 {
		t.Errorf("Start published the package managers %v", tools)
	}
}

// TestPackument checks what clients read: tarball URLs at the forwarder,
// several versions of one name, and tarballs that match their shasum.
func TestPackument(t *testing.T) {
	before := shared.Connections()
	var doc struct {
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Dist struct{ Tarball, Shasum string }
		}
	}
	getJSON(t, shared.URL+"ms", &doc)
	if got, want := slices.Sorted(maps.Keys(doc.Versions)), []string{"2.0.0", "2.1.3"}; !slices.Equal(got, want) {
		t.Fatalf("ms versions = %v, want %v", got, want)
	}
	if got := doc.DistTags["latest"]; got != "2.1.3" {
		t.Errorf("ms latest = %q, want the highest, 2.1.3", got)
	}
	for v, m := range doc.Versions {
		if want := shared.URL + "ms/-/ms-" + v + ".tgz"; m.Dist.Tarball != want {
			t.Errorf("ms@%s tarball = %q, want %q", v, m.Dist.Tarball, want)
		}
		body := get(t, m.Dist.Tarball)
		sum := sha1.Sum(body)
		if got := hex.EncodeToString(sum[:]); got != m.Dist.Shasum {
			t.Errorf("ms@%s tarball sha1 %s, packument says %s", v, got, m.Dist.Shasum)
		}
	}
	if shared.Connections() == before {
		t.Errorf("the forwarder counted no connection for 3 requests")
	}
}

// TestPublishScoped publishes a scoped package whose tarball's top
// directory is not package/, then reads it back as npm would.
func TestPublishScoped(t *testing.T) {
	// A fresh version each run: the shared registry outlives -count.
	s := spec{name: "@registrytest/tiny", version: fmt.Sprintf("1.0.%d", time.Now().UnixNano())}
	tarball := makeTarball(t, map[string]string{
		"pkg/package.json": fmt.Sprintf(`{"name": %q, "version": %q, "main": "index.js"}`, s.name, s.version),
		"pkg/index.js":     "module.exports = 1;\n",
	})
	path := filepath.Join(t.TempDir(), s.packFile())
	if err := os.WriteFile(path, tarball, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := publish(t.Context(), shared.client, shared.URL, s, path); err != nil {
		t.Fatalf("publish: %v", err)
	}
	var doc struct {
		Versions map[string]struct {
			Dist struct{ Tarball string }
		}
	}
	getJSON(t, shared.URL+"@registrytest%2ftiny", &doc)
	got := doc.Versions[s.version].Dist.Tarball
	if want := shared.URL + "@registrytest/tiny/-/tiny-" + s.version + ".tgz"; got != want {
		t.Fatalf("tarball URL = %q, want %q", got, want)
	}
	if !bytes.Equal(get(t, got), tarball) {
		t.Errorf("served tarball differs from the published one")
	}
	if err := publish(t.Context(), shared.client, shared.URL, s, path); err == nil {
		t.Errorf("publishing %s twice succeeded", s)
	}
}

func makeTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestNetworkNamespace(t *testing.T) {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", shared.pid))
	if err != nil {
		t.Fatal(err)
	}
	if self == theirs {
		t.Fatalf("verdaccio shares the test's network namespace %s", self)
	}
	// /proc/PID/net/dev lists the interfaces of PID's namespace: lo only.
	dev, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", shared.pid))
	if err != nil {
		t.Fatal(err)
	}
	var ifaces []string
	for _, line := range strings.Split(string(dev), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if !slices.Equal(ifaces, []string{"lo"}) {
		t.Errorf("verdaccio's namespace has interfaces %v, want only lo", ifaces)
	}
}

func TestNPMInstall(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	project := newProject(t, tmp)
	env := toolEnv(t, tmp)
	before := shared.Connections()
	runTool(t, project, env, "npm", "install",
		"--registry", shared.URL,
		"--cache", filepath.Join(tmp, "npm-cache"),
		"--userconfig", emptyFile(t, tmp, "user.npmrc"), "--globalconfig", emptyFile(t, tmp, "global.npmrc"),
		"--no-audit", "--no-fund", "--prefer-online", "--no-update-notifier", "--loglevel=warn")
	checkTree(t, project)
	checkRequire(t, project, env)
	lock, err := os.ReadFile(filepath.Join(project, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(lock, []byte(`"resolved": "`+shared.URL)) {
		t.Errorf("package-lock.json resolves nothing from %s", shared.URL)
	}
	if shared.Connections() == before {
		t.Errorf("npm install made no connection to the forwarder")
	}
}

func TestPNPMInstall(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	project := newProject(t, tmp)
	env := toolEnv(t, tmp)
	runTool(t, project, env, "pnpm", "install",
		"--registry", shared.URL,
		"--store-dir", filepath.Join(tmp, "pnpm-store"),
		"--cache-dir", filepath.Join(tmp, "pnpm-cache"),
		"--reporter=append-only")
	checkTree(t, project)
	checkRequire(t, project, env)
}

func TestYarnInstall(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	project := newProject(t, tmp)
	env := toolEnv(t, tmp)
	runTool(t, project, env, "yarn", "install",
		"--registry", shared.URL,
		"--cache-folder", filepath.Join(tmp, "yarn-cache"),
		"--no-default-rc", "--non-interactive", "--no-progress")
	checkTree(t, project)
	checkRequire(t, project, env)
	lock, err := os.ReadFile(filepath.Join(project, "yarn.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(lock, []byte(`resolved "`+shared.URL)) {
		t.Errorf("yarn.lock resolves nothing from %s", shared.URL)
	}
}

func TestCloseStopsProcessGroup(t *testing.T) {
	reg, err := Start(t.Context(), t.TempDir(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	pgid := reg.pid
	if err := syscall.Kill(-pgid, 0); err != nil {
		t.Fatalf("verdaccio's group %d is not running after Start: %v", pgid, err)
	}
	begin := time.Now()
	if err := reg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %s", time.Since(begin).Round(time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still there after Close: kill(-pgid, 0) = %v", pgid, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := reg.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	u := strings.TrimSuffix(strings.TrimPrefix(reg.URL, "http://"), "/")
	if c, err := net.DialTimeout("tcp", u, time.Second); err == nil {
		c.Close()
		t.Errorf("the forwarder at %s still accepts after Close", u)
	}
}

func TestStartMissingInstall(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	reg, err := Start(t.Context(), t.TempDir(), io.Discard)
	if err == nil {
		reg.Close()
		t.Fatal("Start succeeded without Verdaccio installed")
	}
	if !strings.Contains(err.Error(), Install) {
		t.Errorf("Start's error %q does not name %q", err, Install)
	}
}

func TestParseSpecs(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []spec
		wantErr    bool
	}{
		{name: "comments and blanks", text: "# head\n\nexpress@4.21.2 # root\n  ms@2.0.0\n",
			want: []spec{{"express", "4.21.2"}, {"ms", "2.0.0"}}},
		{name: "scoped and two versions", text: "@types/node@20.1.0\nms@2.0.0\nms@2.1.3",
			want: []spec{{"@types/node", "20.1.0"}, {"ms", "2.0.0"}, {"ms", "2.1.3"}}},
		{name: "empty", text: "# nothing\n", wantErr: true},
		{name: "no version", text: "express\n", wantErr: true},
		{name: "scope without name", text: "@types@1.0.0\n", wantErr: true},
		{name: "duplicate", text: "ms@2.0.0\nms@2.0.0\n", wantErr: true},
		{name: "blank inside", text: "ms @2.0.0\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSpecs(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(spec{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSpecFiles(t *testing.T) {
	for _, tc := range []struct {
		s                             spec
		packFile, tarballFile, inPath string
	}{
		{spec{"express", "4.21.2"}, "express-4.21.2.tgz", "express-4.21.2.tgz", "express"},
		{spec{"@types/node", "20.1.0"}, "types-node-20.1.0.tgz", "node-20.1.0.tgz", "@types%2fnode"},
	} {
		if got := tc.s.packFile(); got != tc.packFile {
			t.Errorf("%s packFile = %q, want %q", tc.s, got, tc.packFile)
		}
		if got := tc.s.tarballFile(); got != tc.tarballFile {
			t.Errorf("%s tarballFile = %q, want %q", tc.s, got, tc.tarballFile)
		}
		if got := tc.s.pathName(); got != tc.inPath {
			t.Errorf("%s pathName = %q, want %q", tc.s, got, tc.inPath)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int // sign
	}{
		{"2.0.0", "2.1.3", -1},
		{"1.10.0", "1.9.9", 1},
		{"1.0.0", "1.0.0", 0},
		{"1.0.0-beta.1", "1.0.0", -1},
		{"1.0.0-alpha", "1.0.0-beta", -1},
		{"1.0.0+build", "1.0.0", 0},
	} {
		got := compareVersions(tc.a, tc.b)
		if sign(got) != tc.want {
			t.Errorf("compareVersions(%q, %q) = %d, want sign %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// newProject writes a project that depends on Root() exactly.
func newProject(t *testing.T, tmp string) string {
	t.Helper()
	dir := filepath.Join(tmp, "project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root := rootSpec(t)
	pkg, err := json.Marshal(map[string]any{
		"name": "registrytest-project", "version": "1.0.0", "private": true,
		"dependencies": map[string]string{root.name: root.version},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), pkg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func emptyFile(t *testing.T, tmp, name string) string {
	t.Helper()
	p := filepath.Join(tmp, name)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// toolEnv is the test's environment with the package managers' own
// settings removed and HOME and the XDG directories under tmp, so no
// ~/.npmrc, ~/.yarnrc, global pnpm rc or shared cache is read or written.
func toolEnv(t *testing.T, tmp string) []string {
	t.Helper()
	home := filepath.Join(tmp, "home")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch lk := strings.ToLower(k); {
		case strings.HasPrefix(lk, "npm_"), strings.HasPrefix(lk, "yarn_"), strings.HasPrefix(lk, "pnpm_"),
			strings.HasPrefix(lk, "xdg_"), lk == "home", lk == "node_options":
			continue
		}
		env = append(env, kv)
	}
	for _, d := range []string{"config", "cache", "data", "state"} {
		p := filepath.Join(home, "."+d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		env = append(env, "XDG_"+strings.ToUpper(d)+"_HOME="+p)
	}
	return append(env, "HOME="+home, "npm_config_update_notifier=false")
}

// runTool runs argv in dir and fails the test with its output on error.
func runTool(t *testing.T, dir string, env []string, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	t.Logf("%s took %s", strings.Join(argv[:2], " "), time.Since(begin).Round(time.Millisecond))
}

// checkTree compares every package installed under project/node_modules
// (hoisted, nested, or in pnpm's .pnpm store) with Packages().
func checkTree(t *testing.T, project string) {
	t.Helper()
	got := map[string]bool{}
	root := filepath.Join(project, "node_modules")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() != "package.json" || !isPackageDir(filepath.Dir(p)) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var m struct{ Name, Version string }
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		got[m.Name+"@"+m.Version] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(shared.Packages()))
	if diff := cmp.Diff(want, slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("installed tree (-published +installed):\n%s", diff)
	}
}

// isPackageDir reports whether dir is node_modules/NAME or
// node_modules/@SCOPE/NAME.
func isPackageDir(dir string) bool {
	parent := filepath.Dir(dir)
	if strings.HasPrefix(filepath.Base(parent), "@") {
		parent = filepath.Dir(parent)
	}
	return filepath.Base(parent) == "node_modules" && !strings.HasPrefix(filepath.Base(dir), ".")
}

// checkRequire loads the root package with node, from the project.
func checkRequire(t *testing.T, project string, env []string) {
	t.Helper()
	runTool(t, project, env, "node", "-e", fmt.Sprintf("require(%q)", rootSpec(t).name))
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal(get(t, url), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// rootSpec is Root() as name and version.
func rootSpec(t *testing.T) spec {
	t.Helper()
	specs, err := parseSpecs(packagesTxt)
	if err != nil {
		t.Fatal(err)
	}
	if specs[0].String() != Root() {
		t.Fatalf("Root() = %s, packages.txt starts with %s", Root(), specs[0])
	}
	return specs[0]
}
