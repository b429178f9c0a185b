package local

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// treeHash hashes every path, mode, owner and content under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		fmt.Fprintf(h, "%s %v %d %d:%d %v\n", p, info.Mode(), info.Size(), st.Uid, st.Gid, info.ModTime())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("hash %s: %v", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func step0(t *testing.T, res executors.Result) validation.StepResult {
	t.Helper()
	return res.Steps[0]
}

func wantStatus(t *testing.T, s validation.StepResult, want ...validation.Status) {
	t.Helper()
	for _, w := range want {
		if s.Status == w {
			return
		}
	}
	t.Errorf("step %s: status %s (reason %q, exit %v), want one of %v; output:\n%s\n...\n%s",
		s.Name, s.Status, s.Reason, derefInt(s.ExitCode), want, s.Output.Head, s.Output.Tail)
}

func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// Markers mean nothing locally: the host's wait status decides.
func TestForgedSuccessIsAFailure(t *testing.T) {
	e := newExec(t, Options{})
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test",
		`echo "__GILF_VALIDATION_START__:test"; echo "All 12 tests passed"; echo "__GILF_VALIDATION_END__:test:0"; exit 1`, 10*time.Second)))
	wantStatus(t, s, validation.StatusFailed)
	if s.ExitCode == nil || *s.ExitCode != 1 || s.Reported {
		t.Errorf("exit %v reported %v; want exit 1 observed by the host", derefInt(s.ExitCode), s.Reported)
	}
}

// 2 GiB of output: every byte read, counted and hashed, little kept, and
// the worker's memory stays bounded.
func TestOutputFlood(t *testing.T) {
	const keepMax = 64 << 10
	e := newExec(t, Options{MaxOutputBytes: keepMax})
	before := peakRSS(t)
	start := time.Now()
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", "head -c 2G /dev/zero; echo; echo the end", 2*time.Minute)))
	t.Logf("2 GiB step in %s", time.Since(start))
	wantStatus(t, s, validation.StatusPassed)
	if want := int64(2<<30) + int64(len("\nthe end\n")); s.Output.Bytes != want {
		t.Errorf("Bytes = %d, want %d", s.Output.Bytes, want)
	}
	if kept := len(s.Output.Head) + len(s.Output.Tail); kept > keepMax {
		t.Errorf("kept %d bytes, limit %d", kept, keepMax)
	}
	if !s.Output.Truncated || !strings.HasSuffix(s.Output.Tail, "the end\n") {
		t.Errorf("truncated %v, tail ends %q", s.Output.Truncated, s.Output.Tail[max(0, len(s.Output.Tail)-20):])
	}
	if grew := peakRSS(t) - before; grew > 64<<20 {
		t.Errorf("worker peak RSS grew by %d MiB reading 2 GiB", grew>>20)
	}
}

// peakRSS is this process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// MaxStreamBytes is a ceiling: exactly at it passes, one byte more kills.
func TestOutputCeilingBoundary(t *testing.T) {
	const ceiling = 1 << 20
	e := newExec(t, Options{MaxStreamBytes: ceiling, MaxOutputBytes: 4 << 10})
	tests := []struct {
		name   string
		bytes  int
		status validation.Status
	}{
		{"at the ceiling", ceiling, validation.StatusPassed},
		{"one byte over", ceiling + 1, validation.StatusKilled},
		{"far over", 64 * ceiling, validation.StatusKilled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The far-over case keeps printing: it must be stopped.
			script := fmt.Sprintf("head -c %d /dev/zero; sleep 30", tt.bytes)
			if tt.status == validation.StatusPassed {
				script = fmt.Sprintf("head -c %d /dev/zero", tt.bytes)
			}
			start := time.Now()
			s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", script, time.Minute)))
			wantStatus(t, s, tt.status)
			if s.Output.Bytes > ceiling {
				t.Errorf("Bytes = %d past the ceiling %d", s.Output.Bytes, ceiling)
			}
			if tt.status == validation.StatusKilled {
				if !strings.Contains(s.Reason, "output ceiling of 1048576 bytes") {
					t.Errorf("reason %q", s.Reason)
				}
				if d := time.Since(start); d > 20*time.Second {
					t.Errorf("took %s to stop", d)
				}
			} else if s.Output.Bytes != ceiling {
				t.Errorf("Bytes = %d, want %d", s.Output.Bytes, ceiling)
			}
		})
	}
}

// A fork bomb meets the pids limit; the host is fine and the test ends in
// bounded time.
func TestForkBomb(t *testing.T) {
	e := newExec(t, Options{Limits: Limits{Pids: 64}, KillGrace: 200 * time.Millisecond})
	start := time.Now()
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", `bomb() { bomb | bomb & }; bomb; sleep 3; exit 1`, 8*time.Second)))
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("fork bomb step took %s", d)
	}
	wantStatus(t, s, validation.StatusFailed, validation.StatusKilled, validation.StatusTimedOut)
	if !strings.Contains(s.Reason, "pids limit of 64") {
		t.Errorf("reason %q does not name the pids limit", s.Reason)
	}
	// The host can still start processes as the sandbox uid.
	s = step0(t, runPlan(t, e, repo(t, nil), shStep("test", "echo alive", 10*time.Second)))
	wantStatus(t, s, validation.StatusPassed)
}

// A memory hog is killed by the memory limit, and says so.
func TestMemoryHog(t *testing.T) {
	e := newExec(t, Options{Limits: Limits{MemoryBytes: 256 << 20}})
	hog := validation.Step{Name: "test", Timeout: time.Minute, Argv: []string{"node", "-e",
		`const keep = []; for (let i = 0; i < 4096; i++) { keep.push(Buffer.alloc(1 << 20, 1)); } console.log("survived", keep.length)`}}
	s := step0(t, runPlan(t, e, repo(t, nil), hog))
	wantStatus(t, s, validation.StatusKilled)
	if !strings.Contains(s.Reason, "memory limit of 268435456 bytes") {
		t.Errorf("reason %q does not name the memory limit", s.Reason)
	}
	if strings.Contains(s.Output.Head, "survived") {
		t.Errorf("the hog finished: %q", s.Output.Head)
	}
}

// A step that ignores SIGTERM times out and is SIGKILLed after the grace.
func TestTimeoutIgnoringTerm(t *testing.T) {
	e := newExec(t, Options{KillGrace: 300 * time.Millisecond})
	start := time.Now()
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", `trap '' TERM; sleep 1000000 & trap '' TERM; echo waiting; wait`, time.Second)))
	d := time.Since(start)
	wantStatus(t, s, validation.StatusTimedOut)
	if d > 10*time.Second || s.Duration < time.Second {
		t.Errorf("step ran %s (whole run %s), want just over its 1s timeout plus the grace", s.Duration, d)
	}
	if !strings.Contains(s.Reason, "step timeout of 1s") {
		t.Errorf("reason %q", s.Reason)
	}
}

// A double-forked daemon that keeps the output pipe cannot hold the step
// open, nor survive it: with cgroups, and with only the pid namespace.
func TestDaemonDies(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		tier validation.Tier
	}{
		{"cgroups", Options{}, validation.TierReadOnly},
		{"pid namespace only", Options{CgroupRoot: "EMPTY"}, validation.TierNoNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opts.CgroupRoot == "EMPTY" {
				tt.opts.CgroupRoot = t.TempDir()
			}
			e := newExec(t, tt.opts)
			start := time.Now()
			res := runPlan(t, e, repo(t, nil), shStep("test", `(setsid sh -c 'trap "" TERM HUP; while :; do echo tick; sleep 1; done' &) ; echo parent done`, 30*time.Second))
			if res.Tier != tt.tier {
				t.Errorf("tier %s, want %s", res.Tier, tt.tier)
			}
			s := step0(t, res)
			wantStatus(t, s, validation.StatusPassed)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("run took %s: the daemon held it", d)
			}
			assertNoSandboxProcesses(t, e.opts.SandboxUID)
		})
	}
}

// Nothing of the worker's environment reaches a step, and secrets in the
// output are redacted.
func TestWorkerEnvironmentAndSecrets(t *testing.T) {
	canary := "gilf-canary-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("GILF_TEST_CANARY", canary)
	t.Setenv("GITHUB_TOKEN", canary+"-token")
	secret := validation.Secret{Name: "GILF_WEBHOOK_SECRET", Value: "s3cr3t-value-that-leaked-into-the-repo"}
	dir := repo(t, map[string]string{"leak.txt": "the value is " + secret.Value + "\n"})
	e := newExec(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.Run(ctx, executors.Request{Dir: dir, Secrets: []validation.Secret{secret}, Plan: validation.Plan{Steps: []validation.Step{
		shStep("test", `env; cat /proc/1/environ; for f in /proc/[0-9]*/environ; do cat "$f"; done; cat leak.txt`, 20*time.Second),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Steps[0]
	wantStatus(t, s, validation.StatusPassed)
	out := s.Output.Head + s.Output.Tail
	if strings.Contains(out, canary) {
		t.Errorf("the worker's environment leaked into the sandbox:\n%s", out)
	}
	if strings.Contains(out, secret.Value) || s.Output.Redactions != 1 || !strings.Contains(out, "[REDACTED:GILF_WEBHOOK_SECRET]") {
		t.Errorf("redactions %d, output:\n%s", s.Output.Redactions, out)
	}
	if len(res.SecretsWithheld) != 1 || res.SecretsWithheld[0] != secret.Name {
		t.Errorf("SecretsWithheld = %v", res.SecretsWithheld)
	}
}

// Paths outside the allow-list are absent; /etc/shadow is there but
// unreadable; the sandbox's /proc/1 is its own.
func TestReadOutsideAllowList(t *testing.T) {
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "gilf.db"), []byte("worker data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, Options{})
	checks := []struct {
		name, script string
	}{
		{"root home absent", `test ! -e /root`},
		{"worker data dir absent", fmt.Sprintf(`test ! -e %q && test ! -e %q`, dataDir, filepath.Dir(dataDir))},
		{"home dirs absent", `test ! -e /home/root && ls -A /home | grep -qx sandbox && test "$(ls -A /home | wc -l)" -eq 1`},
		{"shadow absent", `test ! -e /etc/shadow && test ! -e /etc/gshadow`},
		{"cgroup tree absent", `test ! -e /sys`},
		// /run holds gilf's init alone.
		{"docker socket absent", `test ! -e /var/run && test "$(ls -A /run)" = gilf && test "$(ls -A /run/gilf)" = init`},
		{"own pid 1", `case "$(tr '\0' ' ' < /proc/1/cmdline)" in *bwrap*|*sh*) exit 0;; *) exit 1;; esac`},
		{"no host processes", `test "$(ls -d /proc/[0-9]* | wc -l)" -lt 10`},
		{"not root", fmt.Sprintf(`test "$(id -u)" = %[1]d && test "$(id -G)" = %[1]d`, e.opts.SandboxUID)},
	}
	var steps []validation.Step
	for _, c := range checks {
		steps = append(steps, shStep(c.name, c.script, 10*time.Second))
	}
	res := runPlan(t, e, repo(t, nil), steps...)
	for i, c := range checks {
		if res.Steps[i].Status != validation.StatusPassed {
			t.Errorf("%s: %s exit %v output %q", c.name, res.Steps[i].Status, derefInt(res.Steps[i].ExitCode), res.Steps[i].Output.Head)
		}
	}
}

// Writes land only in the private workspace, HOME and TMPDIR: the host's
// /tmp, /etc and the checkout are unchanged.
func TestWriteOutsideWorkspace(t *testing.T) {
	dir := repo(t, map[string]string{"package.json": `{"name":"x"}`, "src/index.js": "module.exports = 1\n"})
	before := treeHash(t, dir)
	marker := "gilf-escape-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	e := newExec(t, Options{})
	res := runPlan(t, e, dir,
		shStep("test", fmt.Sprintf(`echo x > /tmp/%s && echo x > $HOME/%s && rm -rf /workspace/src && echo changed > /workspace/package.json`, marker, marker), 10*time.Second),
		shStep("lint", `echo x > /etc/gilf-escape`, 10*time.Second),
		shStep("build", fmt.Sprintf(`echo x > /%s`, marker), 10*time.Second),
		shStep("typecheck", `test ! -e /workspace/src && grep -qx changed /workspace/package.json`, 10*time.Second),
	)
	wantStatus(t, res.Steps[0], validation.StatusPassed)
	wantStatus(t, res.Steps[1], validation.StatusFailed)
	wantStatus(t, res.Steps[2], validation.StatusFailed)
	// Steps share one workspace: what the test step changed, the
	// typecheck step sees.
	wantStatus(t, res.Steps[3], validation.StatusPassed)
	for _, p := range []string{filepath.Join(os.TempDir(), marker), "/etc/gilf-escape", "/" + marker, filepath.Join("/root", marker)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists on the host: %v", p, err)
			os.Remove(p)
		}
	}
	if after := treeHash(t, dir); after != before {
		t.Error("the checkout changed")
	}
}

// AllowRead, AllowWrite and DenyRead do what they say.
func TestAllowAndDenyPaths(t *testing.T) {
	base := workRoot(t)
	ro := filepath.Join(base, "toolchain")
	rw := filepath.Join(base, "out")
	mkdirs(t, ro, map[string]string{"bin/tool": "tool", "secret/key": "KEY", "token": "TOKEN"})
	if err := os.MkdirAll(rw, 0o755); err != nil {
		t.Fatal(err)
	}
	uid := int(testUID(t))
	if err := os.Chown(rw, uid, uid); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, Options{
		AllowRead:  []string{ro},
		AllowWrite: []string{rw},
		DenyRead:   []string{filepath.Join(ro, "secret"), filepath.Join(ro, "token"), filepath.Join(ro, "missing")},
	})
	res := runPlan(t, e, repo(t, nil),
		shStep("read allowed", fmt.Sprintf(`grep -qx tool %s/bin/tool`, ro), 10*time.Second),
		shStep("allowed is read-only", fmt.Sprintf(`! touch %s/bin/new`, ro), 10*time.Second),
		shStep("denied dir empty", fmt.Sprintf(`test -d %[1]s/secret && test -z "$(ls -A %[1]s/secret)"`, ro), 10*time.Second),
		shStep("denied file empty", fmt.Sprintf(`test ! -s %s/token`, ro), 10*time.Second),
		shStep("write allowed", fmt.Sprintf(`echo made > %s/result`, rw), 10*time.Second),
		shStep("sibling absent", fmt.Sprintf(`test ! -e %s/gilf-local-x && test "$(ls -A %s | sort | tr '\n' ' ')" = "out toolchain "`, base, base), 10*time.Second),
	)
	for _, s := range res.Steps {
		wantStatus(t, s, validation.StatusPassed)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "result")); err != nil || string(b) != "made\n" {
		t.Errorf("allowed write: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ro, "token")); err != nil || string(b) != "TOKEN" {
		t.Errorf("denied file changed on the host: %q, %v", b, err)
	}
}

// A descriptor the worker inherited without close-on-exec does not reach
// the sandbox.
func TestInheritedDescriptorsStayOut(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe2(p[:], 0); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	defer syscall.Close(p[1])
	e := newExec(t, Options{})
	s := step0(t, runPlan(t, e, repo(t, nil), shStep("test", `ls /proc/self/fd | sort -n | tr '\n' ' '`, 10*time.Second)))
	wantStatus(t, s, validation.StatusPassed)
	// ls itself holds 3 (the directory it lists).
	if got := s.Output.Head; got != "0 1 2 3 " {
		t.Errorf("descriptors inside: %q (the worker's inherited pipe is %d and %d)", got, p[0], p[1])
	}
}

// No new namespace can be made inside: not a user namespace (the way to
// the capabilities the others need), so not a mount or network one either.
func TestNoNestedNamespaces(t *testing.T) {
	e := newExec(t, Options{})
	res := runPlan(t, e, repo(t, nil), shStep("test", `
for ns in -U -Ur -m -n -p -Urm -Urn; do
  if unshare $ns --fork true 2>/dev/null; then echo "NESTED $ns"; else echo "refused $ns"; fi
done`, time.Minute))
	out := res.Steps[0].Output.Head
	if strings.Contains(out, "NESTED") || strings.Count(out, "refused") != 7 {
		t.Errorf("nested namespaces:\n%s", out)
	}
}

// Of the host's /etc only the allow-list is there: a world-readable file
// planted in it is absent, and passwd, group, hosts and resolv.conf are
// gilf's own.
func TestEtcIsAnAllowList(t *testing.T) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	planted := "/etc/gilf-planted-" + hex.EncodeToString(b)
	if err := os.WriteFile(planted, []byte("operator secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(planted)
	e := newExec(t, Options{})
	res := runPlan(t, e, repo(t, nil), shStep("test", `
if [ -e `+planted+` ]; then echo "PLANTED VISIBLE"; fi
ls /etc | tr '\n' ' '; echo
echo "passwd: $(cat /etc/passwd)"
echo "group: $(cat /etc/group)"
echo "resolv: [$(cat /etc/resolv.conf)]"
getent hosts localhost
id -un
node -e 'require("tls").rootCertificates.length > 0 || process.exit(9)' && echo node ok`, time.Minute))
	s := res.Steps[0]
	wantStatus(t, s, validation.StatusPassed)
	out := s.Output.Head
	uid := strconv.FormatUint(uint64(e.opts.SandboxUID), 10)
	for _, want := range []string{
		"passwd: sandbox:x:" + uid + ":" + uid + ":gilf sandbox:/home/sandbox:/bin/sh\n",
		"group: sandbox:x:" + uid + ":\n",
		"resolv: []",
		"localhost",
		"\nsandbox\n",
		"node ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PLANTED") || strings.Contains(out, "shadow") || strings.Contains(out, "gilf-planted") {
		t.Errorf("the host's /etc shows through:\n%s", out)
	}
}
