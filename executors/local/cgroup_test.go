package local

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

func mkdirs(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// detectCgroups reads only a layout: a directory tree stands in for the
// mount here. The real hierarchies are exercised by the tests below.
func TestDetectCgroups(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		self   string
		want   cgroupHost
		prefix string
	}{
		{
			name:  "v1 all controllers",
			files: map[string]string{"memory/job/a": "", "pids": "", "cpu,cpuacct": "", "freezer": ""},
			self:  "9:freezer:/\n8:pids:/\n4:memory:/job/a\n2:cpu,cpuacct:/\n0::/\n",
			want: cgroupHost{version: cgroupV1, limits: true, v1: map[string]string{
				"memory": "memory/job/a", "pids": "pids", "cpu": "cpu,cpuacct", "freezer": "freezer",
			}},
		},
		{
			name:  "v1 without pids",
			files: map[string]string{"memory": "", "cpu": ""},
			self:  "4:memory:/\n1:cpu:/\n",
			want:  cgroupHost{version: cgroupV1, v1: map[string]string{"memory": "memory", "cpu": "cpu"}, why: "cgroup v1 controllers missing: pids"},
		},
		{
			name:  "nothing mounted",
			files: map[string]string{},
			self:  "0::/\n",
			want:  cgroupHost{why: "no cgroup v1 controller or v2 hierarchy found under ROOT"},
		},
		{
			name:  "v2 with controllers enabled",
			files: map[string]string{"cgroup.controllers": "cpu memory pids io", "svc/cgroup.subtree_control": "cpu memory pids"},
			self:  "0::/svc\n",
			want:  cgroupHost{version: cgroupV2, v2: "svc", limits: true},
		},
		{
			name:  "v2 without a unified entry",
			files: map[string]string{"cgroup.controllers": ""},
			self:  "4:memory:/\n",
			want:  cgroupHost{why: "cgroup v2 is mounted but /proc/self/cgroup has no unified entry"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			mkdirs(t, root, tt.files)
			got := detectCgroups(root, []byte(tt.self))
			want := tt.want
			for c, d := range want.v1 {
				want.v1[c] = filepath.Join(root, d)
			}
			if want.v2 != "" {
				want.v2 = filepath.Join(root, want.v2)
			}
			want.why = strings.ReplaceAll(want.why, "ROOT", root)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(cgroupHost{})); diff != "" {
				t.Errorf("detectCgroups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeyedValue(t *testing.T) {
	f := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(f, []byte("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{"oom_kill": 2, "max": 12, "missing": 0} {
		if got := keyedValue(f, key); got != want {
			t.Errorf("keyedValue(%s) = %d, want %d", key, got, want)
		}
	}
	if got := keyedValue(filepath.Join(t.TempDir(), "absent"), "max"); got != 0 {
		t.Errorf("absent file: %d", got)
	}
}

// hostCgroups is the worker's real cgroup layout.
func hostCgroups(t *testing.T, root string) cgroupHost {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	h := detectCgroups(root, self)
	if h.version == cgroupNone {
		t.Fatalf("no cgroups under %s: %s", root, h.why)
	}
	return h
}

// A real step cgroup on the host's hierarchy: limits written, a process
// placed in it, killed with everything it forked, and the cgroup removed.
func TestStepCgroupReal(t *testing.T) {
	h := hostCgroups(t, DefaultCgroupRoot)
	id, err := randomID()
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{MemoryBytes: 128 << 20, Pids: 32, CPUs: 0.5}
	cg, err := h.create("gilf-test-"+id, lim, true)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			if err := cg.kill(context.Background(), true); err != nil {
				t.Error(err)
			}
			if err := cg.remove(); err != nil {
				t.Error(err)
			}
		}
	})
	if h.limits {
		want := map[string]string{}
		switch h.version {
		case cgroupV1:
			want[filepath.Join(cg.dirs["memory"], "memory.limit_in_bytes")] = "134217728"
			want[filepath.Join(cg.dirs["pids"], "pids.max")] = "32"
			want[filepath.Join(cg.dirs["cpu"], "cpu.cfs_quota_us")] = "50000"
		case cgroupV2:
			want[filepath.Join(cg.dirs[""], "memory.max")] = "134217728"
			want[filepath.Join(cg.dirs[""], "pids.max")] = "32"
			want[filepath.Join(cg.dirs[""], "cpu.max")] = "50000 100000"
		}
		for f, v := range want {
			b, err := os.ReadFile(f)
			if err != nil || strings.TrimSpace(string(b)) != v {
				t.Errorf("%s = %q, %v; want %s", f, b, err, v)
			}
		}
	}

	// A shell that forks a daemon in a new session: only the cgroup
	// still knows both. It waits on stdin until it is in the cgroup.
	cmd := exec.Command("/bin/sh", "-c", "read go; setsid sleep 1000 & sleep 1000")
	cmd.Env = []string{"PATH=" + DefaultPath}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	release, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if h.version == cgroupV2 {
		f, err := cg.fd()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(f.Fd())
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	if h.version == cgroupV1 {
		if err := cg.add(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := release.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	go func() { waited <- cmd.Wait() }()
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pids, err = cg.pids(); err == nil && len(pids) >= 3 {
			break
		}
	}
	if len(pids) < 3 {
		t.Fatalf("cgroup holds %v, want the shell and its two sleeps", pids)
	}
	if !containsInt(pids, cmd.Process.Pid) {
		t.Errorf("cgroup %v lacks the shell %d", pids, cmd.Process.Pid)
	}
	start := time.Now()
	if err := cg.kill(context.Background(), true); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if d := time.Since(start); d > CgroupKillTimeout {
		t.Errorf("kill took %s", d)
	}
	<-waited
	for _, p := range pids {
		if err := unix.Kill(p, 0); err == nil && !zombie(p) {
			t.Errorf("process %d survived the cgroup kill", p)
		}
	}
	if err := cg.remove(); err != nil {
		t.Fatalf("remove: %v", err)
	}
	removed = true
	for _, d := range cg.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup dir %s still there: %v", d, err)
		}
	}
}

// cgroup v2 on this host too: the unified hierarchy is mounted privately
// for the test (on a v1 host it carries no controllers, so the executor
// must fall back to the no-network tier while still killing through it).
func TestCgroupV2Hierarchy(t *testing.T) {
	mnt := t.TempDir()
	if err := unix.Mount("gilf-test", mnt, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mount cgroup2: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	h := hostCgroups(t, mnt)
	if h.version != cgroupV2 {
		t.Fatalf("detected %s under a cgroup2 mount", h.version)
	}
	e := newExec(t, Options{CgroupRoot: mnt, KillGrace: 2 * time.Second})
	tier, err := e.Tier(context.Background())
	if err != nil {
		t.Fatalf("Tier: %v", err)
	}
	wantTier := validation.TierNoNetwork
	if h.limits {
		wantTier = validation.TierReadOnly
	}
	if tier != wantTier {
		t.Errorf("tier %s, want %s (limits possible: %v, %s)", tier, wantTier, h.limits, h.why)
	}
	// While the step runs, its processes are in a step cgroup of the
	// mounted hierarchy.
	seen := make(chan int, 1)
	progress := func(step string, _ time.Time) {
		if step != "test" {
			return
		}
		go func() {
			most := 0
			defer func() { seen <- most }()
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				dirs, _ := filepath.Glob(filepath.Join(h.v2, "gilf-local-*", "cgroup.procs"))
				for _, d := range dirs {
					b, _ := os.ReadFile(d)
					most = max(most, len(strings.Fields(string(b))))
				}
				if most >= 3 {
					return
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.Run(ctx, executors.Request{
		Dir:      repo(t, nil),
		Progress: progress,
		Plan: validation.Plan{Steps: []validation.Step{
			shStep("test", "setsid sleep 100000 & sleep 2; echo done", 10*time.Second),
			// A second step in the same cgroup, stopped by its
			// timeout: SIGTERM reaches the step, not the sandbox's init.
			shStep("lint", `trap 'echo cleaned up; exit 0' TERM; sleep 1000 & wait`, time.Second),
		}},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := <-seen; n < 3 {
		t.Errorf("the step cgroup held at most %d processes, want bwrap, its init and the step", n)
	}
	if s := res.Steps[0]; s.Status != validation.StatusPassed {
		t.Errorf("step %s: %s %s %q", s.Name, s.Status, s.Reason, s.Output.Head)
	}
	if s := res.Steps[1]; s.Status != validation.StatusTimedOut || !strings.Contains(s.Output.Head, "cleaned up") {
		t.Errorf("step %s: %s %s %q", s.Name, s.Status, s.Reason, s.Output.Head)
	}
	entries, err := os.ReadDir(filepath.Join(h.v2))
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), "gilf-") {
			t.Errorf("step cgroup %s left behind", en.Name())
		}
	}
}

// A cgroup's name carries no pid of the worker's: the worker's tag is a
// hash, the same for the same process, another for another.
func TestCgroupNameHasNoPid(t *testing.T) {
	name := cgroupName("run-x")
	if strings.Contains(name, strconv.Itoa(os.Getpid())) || !strings.HasPrefix(name, cgroupPrefix+"w") {
		t.Errorf("cgroup name %q names the worker's pid %d", name, os.Getpid())
	}
	if self := workerTag(os.Getpid()); self != workerTag(os.Getpid()) || self == workerTag(1) {
		t.Error("workerTag is not one per process")
	}
	if !staleTag("w0000000000000000", liveTags) || staleTag(workerTag(os.Getpid()), liveTags) || staleTag("other", liveTags) {
		t.Error("staleTag misjudges")
	}
}

// The cgroups of a worker that died are swept at the probe, with what
// still runs in them; those of a live worker are left alone.
func TestSweepStaleCgroups(t *testing.T) {
	h := hostCgroups(t, DefaultCgroupRoot)
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := dead.Process.Pid
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", deadPid)); err == nil {
		t.Fatalf("pid %d was reused already", deadPid)
	}
	lim := Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 1}
	stale, err := h.create(fmt.Sprintf("%s%d-run-stale", cgroupPrefix, deadPid), lim, true)
	if err != nil {
		t.Fatal(err)
	}
	live, err := h.create(cgroupPrefix+"1-run-live", lim, true)
	if err != nil {
		t.Fatal(err)
	}
	// Names carry a hash, not a pid: one no live process has is stale,
	// a live process's (init's) is not.
	staleHash, err := h.create(cgroupPrefix+"w0000000000000000-run-stale", lim, true)
	if err != nil {
		t.Fatal(err)
	}
	liveHash, err := h.create(cgroupPrefix+workerTag(1)+"-run-live", lim, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, cg := range []*stepCgroup{stale, live, staleHash, liveHash} {
			if err := cg.kill(context.Background(), true); err != nil {
				t.Error(err)
			}
			if err := cg.remove(); err != nil {
				t.Error(err)
			}
		}
	})
	// A daemon left in the stale cgroup.
	daemon := exec.Command("/bin/sleep", "1000")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- daemon.Wait() }()
	if err := stale.add(daemon.Process.Pid); err != nil {
		t.Fatal(err)
	}

	e := newExec(t, Options{})
	if _, err := e.Tier(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Error("the daemon in the stale cgroup was not killed")
	}
	for _, d := range append(slices.Collect(maps.Values(stale.dirs)), slices.Collect(maps.Values(staleHash.dirs))...) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("stale cgroup %s still there: %v", d, err)
		}
	}
	for _, d := range append(slices.Collect(maps.Values(live.dirs)), slices.Collect(maps.Values(liveHash.dirs))...) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a live worker's cgroup %s was removed: %v", d, err)
		}
	}
}
