package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDeployCloudflareForwardsEverySetting keeps the Cloudflare Containers Worker
// honest: every setting gilf reads from its environment must be in the
// Worker's FORWARDED list, or the container could never be configured.
func TestDeployCloudflareForwardsEverySetting(t *testing.T) {
	worker, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "cloudflare", "src", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`"((?:GILF_[A-Z0-9_]+)|E2B_API_KEY)"`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			seen++
			if !strings.Contains(string(worker), `"`+m[1]+`"`) {
				t.Errorf("%s reads %s, which deploy/cloudflare/src/index.js does not forward", f, m[1])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d settings in cmd/gilf: the scan is broken", seen)
	}
}

// TestDeployImageCarriesTheLocalExecutor keeps deploy/Dockerfile's final stage
// able to run the local executor as this package wires it: a supported
// node (20 or later), and the host programs the executor calls.
func TestDeployImageCarriesTheLocalExecutor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(src, -1)
	if len(froms) == 0 {
		t.Fatal("no FROM in deploy/Dockerfile")
	}
	final := froms[len(froms)-1][1]
	m := regexp.MustCompile(`^node:(\d+)[.-]`).FindStringSubmatch(final)
	if m == nil {
		t.Fatalf("the final stage is %s, not an official node image", final)
	}
	if major, _ := strconv.Atoi(m[1]); major < 20 || major%2 != 0 {
		t.Errorf("the final stage has node %s: want an LTS line, 20 or later", m[1])
	}
	stage := src[strings.LastIndex(src, "FROM "):]
	for _, pkg := range []string{"bubblewrap", "e2fsprogs", "git", "iproute2", "ca-certificates"} {
		if !regexp.MustCompile(`apt-get install[^\n]*(\\\n[^\n]*)*\b` + regexp.QuoteMeta(pkg) + `\b`).MatchString(stage) {
			t.Errorf("the final stage does not install %s", pkg)
		}
	}
}

// dockerInstruction is one instruction of a Dockerfile, its continuation
// lines joined.
type dockerInstruction struct {
	line int
	cmd  string // upper case: FROM, RUN, COPY, …
	args string
}

// parseDockerfile splits a Dockerfile into instructions: comments and
// blank lines dropped, backslash continuations joined.
func parseDockerfile(t *testing.T, src string) []dockerInstruction {
	t.Helper()
	var out []dockerInstruction
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("deploy/Dockerfile ends inside a continued instruction (line %d)", start)
	}
	return out
}

// finalStage returns the instructions of the last FROM on.
func finalStage(ins []dockerInstruction) []dockerInstruction {
	last := -1
	for i, in := range ins {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	return ins[last:]
}

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// repoVersion is the one version string of the deploy artifacts.
func repoVersion(t *testing.T) string {
	t.Helper()
	v := strings.TrimSpace(readRepoFile(t, "VERSION"))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("VERSION holds %q, not MAJOR.MINOR.PATCH", v)
	}
	return v
}

// TestDeployImagePinsItsTools: base images pinned to a patch release, the
// final one node 20 or 22; corepack enabled with pnpm and yarn pinned by
// version and hash; bun from a committed lockfile; the image version is
// VERSION.
func TestDeployImagePinsItsTools(t *testing.T) {
	ins := parseDockerfile(t, readRepoFile(t, "deploy/Dockerfile"))
	for _, in := range ins {
		if in.cmd != "FROM" {
			continue
		}
		image := strings.Fields(in.args)[0]
		if !regexp.MustCompile(`^[a-z0-9./-]+:\d+\.\d+\.\d+(-[a-z0-9-]+)?(@sha256:[0-9a-f]{64})?$`).MatchString(image) {
			t.Errorf("line %d: FROM %s is not pinned to a patch release", in.line, image)
		}
	}
	final := finalStage(ins)
	if m := regexp.MustCompile(`^node:(20|22)\.`).FindStringSubmatch(final[0].args); m == nil {
		t.Errorf("the final stage is FROM %s: want node 20 or 22", final[0].args)
	}
	var runs []string
	for _, in := range final {
		if in.cmd == "RUN" {
			runs = append(runs, in.args)
		}
	}
	run := strings.Join(runs, "\n")
	if !regexp.MustCompile(`corepack enable\b[^\n&]*\bpnpm\b`).MatchString(run) || !regexp.MustCompile(`corepack enable\b[^\n&]*\byarn\b`).MatchString(run) {
		t.Error("the final stage does not run corepack enable for pnpm and yarn")
	}
	for _, pm := range []string{"pnpm", "yarn"} {
		if !regexp.MustCompile(`corepack install -g[^\n]*\b` + pm + `@\d+\.\d+\.\d+\+sha512\.[0-9a-f]{128}\b`).MatchString(run) {
			t.Errorf("corepack does not install %s pinned by version and sha512", pm)
		}
	}
	if !strings.Contains(run, "npm ci --prefix /opt/bun") || !strings.Contains(run, "bun --version") {
		t.Error("bun is not installed with npm ci from deploy/bun")
	}
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	if err := json.Unmarshal([]byte(readRepoFile(t, "deploy/bun/package-lock.json")), &lock); err != nil {
		t.Fatalf("deploy/bun/package-lock.json: %v", err)
	}
	for _, name := range []string{"node_modules/bun", "node_modules/@oven/bun-linux-x64", "node_modules/@oven/bun-linux-aarch64"} {
		p := lock.Packages[name]
		if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(p.Version) || !strings.HasPrefix(p.Integrity, "sha512-") {
			t.Errorf("deploy/bun/package-lock.json: %s is %+v, want a pinned version with its sha512", name, p)
		}
	}
	if want := "ARG GILF_VERSION=" + repoVersion(t); !strings.Contains(readRepoFile(t, "deploy/Dockerfile"), "\n"+want+"\n") {
		t.Errorf("deploy/Dockerfile has no %q line", want)
	}
}

// TestDeployImageRunsAsNobodyByDefault: the final stage ends as a numeric
// non-root user (runAsNonRoot can check it), and the Dockerfile says why
// the local executor's profile runs as root.
func TestDeployImageRunsAsNobodyByDefault(t *testing.T) {
	src := readRepoFile(t, "deploy/Dockerfile")
	user := ""
	for _, in := range finalStage(parseDockerfile(t, src)) {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	m := regexp.MustCompile(`^(\d+)(:\d+)?$`).FindStringSubmatch(user)
	if m == nil {
		t.Fatalf("the final stage's USER is %q: want a numeric uid", user)
	}
	if uid, _ := strconv.Atoi(m[1]); uid == 0 || (uid >= 64000 && uid <= 64999) {
		t.Errorf("USER %s: want neither root nor a uid of the default GILF_LOCAL_UID_RANGE", user)
	}
	for _, why := range []string{"local executor needs root", "--user 0:0"} {
		if !strings.Contains(src, why) {
			t.Errorf("deploy/Dockerfile does not say %q", why)
		}
	}
}

// TestDeployImageHealthcheck runs the image's HEALTHCHECK command (node,
// no curl) against a loopback server: 0 for a 200 from /healthz, 1 for a
// 503, for another path's answer, and for nothing listening.
func TestDeployImageHealthcheck(t *testing.T) {
	var argv []string
	for _, in := range finalStage(parseDockerfile(t, readRepoFile(t, "deploy/Dockerfile"))) {
		if in.cmd != "HEALTHCHECK" {
			continue
		}
		_, cmd, ok := strings.Cut(in.args, "CMD ")
		if !ok {
			t.Fatalf("HEALTHCHECK %s has no CMD", in.args)
		}
		if err := json.Unmarshal([]byte(cmd), &argv); err != nil {
			t.Fatalf("HEALTHCHECK CMD is not the exec form: %v", err)
		}
	}
	if len(argv) == 0 {
		t.Fatal("the final stage has no HEALTHCHECK")
	}
	if argv[0] != "node" {
		t.Errorf("HEALTHCHECK runs %s: want node, which the image has (curl it has not)", argv[0])
	}
	node, err := exec.LookPath(argv[0])
	if err != nil {
		t.Fatal(err)
	}
	status := http.StatusOK
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	probe := func(addr string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, argv[1:]...)
		cmd.Env = append(os.Environ(), "GILF_ADDR="+addr)
		out, err := cmd.CombinedOutput()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("healthcheck: %v: %s", err, out)
		}
		return 0
	}
	for _, addr := range []string{":" + strconv.Itoa(port), "0.0.0.0:" + strconv.Itoa(port), "127.0.0.1:" + strconv.Itoa(port)} {
		if got := probe(addr); got != 0 {
			t.Errorf("GILF_ADDR=%s, /healthz 200: healthcheck exits %d, want 0", addr, got)
		}
	}
	mu.Lock()
	status = http.StatusServiceUnavailable
	mu.Unlock()
	if got := probe(":" + strconv.Itoa(port)); got != 1 {
		t.Errorf("/healthz 503: healthcheck exits %d, want 1", got)
	}
	srv.Close()
	if got := probe(":" + strconv.Itoa(port)); got != 1 {
		t.Errorf("nothing listening: healthcheck exits %d, want 1", got)
	}
}

// dockerignore is the .dockerignore of the repository root, as Docker
// reads it: patterns in order, the last that matches a path (or one of
// its parents) decides, "!" re-includes, "**" spans directories.
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func parseDockerignore(t *testing.T, src string) dockerignore {
	t.Helper()
	var d dockerignore
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		pat := strings.Trim(path.Clean(strings.TrimPrefix(line, "!")), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(pat); i++ {
			switch {
			case strings.HasPrefix(pat[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(pat[i:], "**"):
				re.WriteString(".*")
				i++
			case pat[i] == '*':
				re.WriteString("[^/]*")
			case pat[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(pat[i : i+1]))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile(re.String()), neg})
	}
	return d
}

// excluded reports whether rel (slash separated, relative to the root)
// is left out of the build context.
func (d dockerignore) excluded(rel string) bool {
	out := false
	for _, p := range d {
		for q := rel; ; q = path.Dir(q) {
			if p.re.MatchString(q) {
				out = !p.negate
				break
			}
			if path.Dir(q) == q || path.Dir(q) == "." {
				break
			}
		}
	}
	return out
}

// TestDeployImageBuildContext: every COPY source of deploy/Dockerfile
// exists and is in the build context (the repository root, less
// .dockerignore), so are the files `go build ./cmd/gilf` reads, and the
// repository's bulk (.git, node_modules, test data) is not.
func TestDeployImageBuildContext(t *testing.T) {
	root := repoRoot(t)
	ign := parseDockerignore(t, readRepoFile(t, ".dockerignore"))
	need := map[string]string{}
	for _, in := range parseDockerfile(t, readRepoFile(t, "deploy/Dockerfile")) {
		if in.cmd != "COPY" && in.cmd != "ADD" {
			continue
		}
		if in.cmd == "ADD" {
			t.Errorf("line %d: ADD: use COPY (ADD fetches URLs and unpacks archives)", in.line)
		}
		f := strings.Fields(in.args)
		if len(f) > 0 && strings.HasPrefix(f[0], "--from=") {
			continue
		}
		var srcs []string
		for _, a := range f[:len(f)-1] {
			if !strings.HasPrefix(a, "--") {
				srcs = append(srcs, a)
			}
		}
		if len(srcs) == 0 {
			t.Errorf("line %d: COPY %s has no source", in.line, in.args)
		}
		for _, s := range srcs {
			rel := strings.Trim(path.Clean(s), "/")
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
				t.Errorf("line %d: COPY source %s: %v", in.line, s, err)
			}
			if rel != "." && ign.excluded(rel) {
				t.Errorf("line %d: COPY source %s is excluded by .dockerignore", in.line, s)
			}
			if rel == "." {
				need["."] = "COPY . ."
			}
		}
	}
	if need["."] != "" {
		// COPY . . carries the whole context: the build needs the module's
		// packages of ./cmd/gilf, with their embedded files.
		cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f",
			`{{if and .Module .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`, "./cmd/gilf")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		files := []string{"go.mod", "go.sum"}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			dir, err := filepath.Rel(root, f[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range f[1:] {
				files = append(files, filepath.ToSlash(filepath.Join(dir, name)))
			}
		}
		if len(files) < 50 {
			t.Fatalf("go list named only %d files: the scan is broken", len(files))
		}
		for _, f := range files {
			if ign.excluded(f) {
				t.Errorf("go build ./cmd/gilf reads %s, which .dockerignore excludes", f)
			}
		}
	}
	for _, rel := range []string{".git", ".gilf/gilf.db", "deploy/cloudflare/node_modules/wrangler/package.json",
		"node_modules/x/package.json", "cmd/gilf/testdata/x.json", "executors/local/executor_test.go", "deploy/kubernetes/gilf.yaml"} {
		if !ign.excluded(rel) {
			t.Errorf(".dockerignore lets %s into the build context", rel)
		}
	}
}
