package local

import (
	"bufio"
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

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// Environment of the sleeping-run helper.
const (
	helperWorkRoot = "GILF_LOCAL_TEST_WORKROOT"
	helperUID      = "GILF_LOCAL_TEST_UID"
)

// sleepingRun is a worker that starts a run whose step sleeps, says so on
// stdout, and waits to be killed.
func sleepingRun() int {
	uid, err := strconv.ParseUint(os.Getenv(helperUID), 10, 32)
	if err != nil {
		fmt.Println("uid:", err)
		return 2
	}
	e, err := New(nil, Options{WorkRoot: os.Getenv(helperWorkRoot), SandboxUID: uint32(uid), SandboxGID: uint32(uid)})
	if err != nil {
		fmt.Println("new:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "gilf-helper-src-")
	if err != nil {
		fmt.Println("mkdir:", err)
		return 2
	}
	_, err = e.Run(context.Background(), executors.Request{Dir: dir, Plan: validation.Plan{Steps: []validation.Step{
		{Name: "lint", Argv: []string{"true"}},
		{Name: "test", Argv: []string{"/bin/sh", "-c", "echo > started-marker; exec sleep 600"}, Timeout: time.Hour},
	}}, Progress: func(s string, _ time.Time) {
		if s == "test" {
			fmt.Println("step started")
		}
	}})
	fmt.Println("run ended:", err)
	return 1
}

func mountedUnder(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], root+"/") {
			out = append(out, fields[4])
		}
	}
	return out
}

// A worker SIGKILLed mid-step leaves its run directory, its mounted disk
// and its cgroup; the next worker's Sweep removes them, and never a live
// run's.
func TestSweepAfterSIGKILL(t *testing.T) {
	root := workRoot(t)
	uid := testUID(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=sleeping-run", helperWorkRoot+"="+root, helperUID+"="+strconv.FormatUint(uint64(uid), 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	started := false
	for lines.Scan() {
		if lines.Text() == "step started" {
			started = true
			break
		}
	}
	if !started {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the helper never started its step: %v", lines.Err())
	}
	// The step's own command runs: its sandbox is set up and placed.
	// (Any process of the uid is not enough: the sandbox's init of an
	// earlier step may still be exiting, or this step's bwrap still
	// setting up.)
	waitUntil(t, "the step runs", func() bool { return running(t, uid, "sleep", "600") })
	tag := workerTag(cmd.Process.Pid) // read while the worker lives
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // killed: the error is the point
	if left := cgroupsOf(t, &Executor{opts: Options{CgroupRoot: DefaultCgroupRoot}}, tag); len(left) == 0 {
		t.Logf("no cgroup of the killed worker to sweep (cgroups unavailable here?)")
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the killed worker left %v (%v), want its one run directory", entries, err)
	}
	if m := mountedUnder(t, root); len(m) != 1 {
		t.Fatalf("mounts left: %v, want the run's disk", m)
	}
	// The sandbox dies with its parent (--die-with-parent).
	waitUntil(t, "the sandbox dies with its worker", func() bool { return len(sandboxProcesses(t, uid)) == 0 })

	// A live run of this process, which the sweep must leave alone.
	e := newExec(t, Options{WorkRoot: root, SandboxUID: uid + 7, SandboxGID: uid + 7})
	live, _, err := makeRunDirsOn(context.Background(), root, "", int(uid+7), int(uid+7), nil, DiskLimit{Bytes: -1}, "")
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.Sweep(context.Background())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if n < 1 {
		t.Errorf("Sweep removed %d", n)
	}
	if m := mountedUnder(t, root); len(m) != 0 {
		t.Errorf("mounts left after the sweep: %v", m)
	}
	if left := cgroupsOf(t, e, tag); len(left) != 0 {
		t.Errorf("cgroups of the killed worker left: %v", left)
	}
	entries, err = os.ReadDir(root)
	if err != nil || len(entries) != 1 || root+"/"+entries[0].Name() != live.Root {
		t.Errorf("after the sweep: %v (%v), want only the live run %s", entries, err, live.Root)
	}
	if err := live.remove(); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cgroupsOf lists the cgroup directories of the worker with tag
// (workerTag) under this process's own cgroups.
func cgroupsOf(t *testing.T, e *Executor, tag string) []string {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	h := detectCgroups(e.opts.CgroupRoot, self)
	parents := append([]string{h.v2}, slices.Collect(maps.Values(h.v1))...)
	var out []string
	for _, p := range parents {
		if p == "" {
			continue
		}
		entries, _ := os.ReadDir(p) // a missing hierarchy has none
		for _, en := range entries {
			if strings.HasPrefix(en.Name(), cgroupPrefix+tag+"-") {
				out = append(out, filepath.Join(p, en.Name()))
			}
		}
	}
	return out
}
