package local

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// Attacks made from inside a real sandbox on what gilf leaves there: the
// file systems a step can write, gilf's own helper (the egress bridge),
// and the host's paths and pids.

// helperAttackArg, as the test binary's first argument, makes it attack
// its parent process (maybeRunHelperAttack).
const helperAttackArg = "__gilf-helper-attack"

// maybeRunHelperAttack, with helperAttackArg, attacks the parent process
// (in an install step, the egress bridge), and with initAttackArg the
// sandbox's pid 1 (attackInit); then, as a control, a dumpable child of
// its own. It prints "name result" lines and exits. TestMain calls it.
func maybeRunHelperAttack() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case helperAttackArg:
		parent := os.Getppid()
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", parent))
		fmt.Println("target-is-bridge", strings.Contains(string(cmdline), "__gilf-egress-bridge"))
		attackControl("bridge", parent)
	case initAttackArg:
		attackInit()
	default:
		return
	}
	os.Exit(0)
}

// attackControl attacks pid (as who), then, as the control, a process the
// attacker started: the same attacks succeed there where the kernel alone
// decides.
func attackControl(who string, pid int) {
	attack(who, pid)
	child := exec.Command("/bin/sleep", "30")
	if err := child.Start(); err == nil {
		attack("control", child.Process.Pid)
		child.Process.Kill()
		child.Wait()
	}
}

// attack tries to read, write and rob pid, printing one line per try.
func attack(who string, pid int) {
	say := func(name string, err error) { fmt.Println(who+":"+name, probeResult(err)) }
	p := "/proc/" + strconv.Itoa(pid)
	f, err := os.OpenFile(p+"/mem", os.O_RDWR, 0)
	if err == nil {
		f.Close()
	}
	say("mem-write", err)
	_, err = os.ReadFile(p + "/environ")
	say("environ", err)
	_, err = os.ReadDir(p + "/fd")
	say("fd-list", err)
	pidfd, err := unix.PidfdOpen(pid, 0)
	say("pidfd_open", err)
	if err == nil {
		say("pidfd_getfd", rawFD(unix.Syscall(unix.SYS_PIDFD_GETFD, uintptr(pidfd), 0, 0)))
		page := make([]byte, 4096)
		iov := unix.Iovec{Base: &page[0], Len: uint64(len(page))}
		say("process_madvise", rawErr(unix.Syscall6(unix.SYS_PROCESS_MADVISE, uintptr(pidfd), uintptr(unsafe.Pointer(&iov)), 1, unix.MADV_COLD, 0, 0)))
		unix.Close(pidfd)
	}
	local := make([]byte, 8)
	_, err = unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &local[0], Len: 8}}, []unix.RemoteIovec{{Base: 0x400000, Len: 8}}, 0)
	say("process_vm_readv", err)
	say("ptrace", unix.PtraceAttach(pid))
}

// gilf's own helper inside the install step cannot be read, written or
// robbed of descriptors by the step: its /proc/N/mem, environ and fd are
// closed to the step, pidfd_getfd and process_madvise fail; the same
// attacks on a dumpable process of the step's own get further.
func TestHelperCannotBeRobbed(t *testing.T) {
	e := newExec(t, Options{})
	res := runPlan(t, e, probeCheckout(t), validation.Step{Name: validation.StepInstall,
		Argv: []string{"./" + syscallProbeBin, helperAttackArg}, Network: validation.NetworkRegistry, Timeout: time.Minute})
	s := step0(t, res)
	wantStatus(t, s, validation.StatusPassed)
	got := parseProbe(s.Output.Head)
	t.Logf("attacks: %v", got)
	for name, want := range map[string]string{
		"target-is-bridge":        "true",
		"bridge:mem-write":        "EACCES",
		"bridge:environ":          "EACCES",
		"bridge:fd-list":          "EACCES",
		"bridge:pidfd_getfd":      "EPERM",
		"bridge:process_madvise":  "EPERM",
		"bridge:process_vm_readv": "EPERM",
		"bridge:ptrace":           "EPERM",
		// The control: only the dumpable bit stands between the step
		// and the bridge's memory and descriptors.
		"control:mem-write": "ok",
		"control:fd-list":   "ok",
		"control:environ":   "ok",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %s", name, got[name], want)
		}
	}
}

// fillScript lists every directory the step may write to (find's
// -writable asks the kernel, read-only mounts included) with its file
// system's device, tries to fill each with 64 MiB and 200 files, then
// waits (bounded) until the host has measured the run's footprint. The
// signals are removals: on a full disk nothing can be created.
const fillScript = `ws=$(stat -c %d /workspace)
: > /workspace/.gilf-started; : > /workspace/.gilf-filling
find / \( -path /proc -o -path /sys \) -prune -o -type d -writable -print 2>/dev/null > /tmp/.gilf-dirs
while read -r d; do
  { true > "$d/.gilf-w"; } 2>/dev/null && echo "writable $(stat -c %d "$d") $d"
done < /tmp/.gilf-dirs
while read -r d; do
  head -c 64M /dev/zero > "$d/.gilf-fill" 2>/dev/null
  i=0; while [ $i -lt 200 ] && { true > "$d/.gilf-inode-$i"; } 2>/dev/null; do i=$((i+1)); done
done < /tmp/.gilf-dirs
echo "workspace-device $ws"
rm /workspace/.gilf-filling
n=0; while [ -e /workspace/.gilf-started ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done
find /workspace /tmp /home/sandbox /dev/shm -name '.gilf-*' -delete
`

// Nothing a step writes lands outside the run's own file system: every
// directory writable from inside either step (the install step has the
// proxy's socket directory) is on the run's disk, and filling all of them
// leaves the run's footprint on the host within its ceiling.
func TestNothingWritableOutsideTheRunDisk(t *testing.T) {
	const ceiling = 16 << 20
	root := workRoot(t)
	e := newExec(t, Options{WorkRoot: root, Disk: DiskLimit{Bytes: ceiling}})
	var mu sync.Mutex
	var peak int64
	stop := make(chan struct{})
	measured := make(chan struct{})
	go func() {
		defer close(measured)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			marks, _ := filepath.Glob(filepath.Join(root, runPrefix+"*", "fs", "workspace", ".gilf-started"))
			for _, m := range marks {
				if _, err := os.Lstat(filepath.Join(filepath.Dir(m), ".gilf-filling")); err == nil {
					continue // still filling
				}
				n := footprint(filepath.Dir(filepath.Dir(filepath.Dir(m))))
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
				if err := os.Remove(m); err != nil {
					t.Errorf("release the step: %v", err)
				}
			}
		}
	}()
	res := runPlan(t, e, repo(t, nil),
		validation.Step{Name: validation.StepInstall, Argv: []string{"/bin/sh", "-c", fillScript}, Network: validation.NetworkRegistry, Timeout: 2 * time.Minute},
		shStep(validation.StepTest, fillScript, 2*time.Minute))
	close(stop)
	<-measured
	for _, s := range res.Steps {
		wantStatus(t, s, validation.StatusPassed)
		out := s.Output.Head + s.Output.Tail
		var ws string
		var writable []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "writable":
				writable = append(writable, f[1]+" "+f[2])
			case len(f) == 2 && f[0] == "workspace-device":
				ws = f[1]
			}
		}
		if ws == "" || len(writable) < 4 {
			t.Fatalf("step %s: no list of writable directories:\n%s", s.Name, out)
		}
		for _, w := range writable {
			dev, dir, _ := strings.Cut(w, " ")
			if dev != ws {
				t.Errorf("step %s: %s is writable and not on the run's disk (device %s, the run's %s)", s.Name, dir, dev, ws)
			}
		}
		for _, must := range []string{"/workspace", "/tmp", "/home/sandbox", "/dev/shm"} {
			if !strings.Contains(out, " "+must+"\n") {
				t.Errorf("step %s: %s is not writable:\n%s", s.Name, must, out)
			}
		}
		if s.Name == validation.StepInstall && strings.Contains(out, " "+SandboxSocketDir+"\n") {
			t.Errorf("the proxy's socket directory is writable")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if peak == 0 {
		t.Fatal("the run's footprint was never measured")
	}
	// The image, its metadata, etc and the mount point: the ceiling and
	// a little.
	if peak > ceiling+(1<<20) {
		t.Errorf("the run took %d bytes of the host's disk, ceiling %d", peak, ceiling)
	}
	t.Logf("peak footprint %d bytes (ceiling %d)", peak, ceiling)
}

// footprint is the disk space the run directory takes on the host: every
// file's allocated blocks, the run's own file system counted once, as its
// image.
func footprint(run string) int64 {
	var n int64
	filepath.WalkDir(run, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil // files come and go while the step runs
		}
		if de.IsDir() && p == filepath.Join(run, "fs") {
			return filepath.SkipDir
		}
		if info, err := de.Info(); err == nil {
			n += info.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return n
}

// hostTraceScript prints what a step can read of its sandbox's making:
// mountinfo first, up to mountinfoEnd.
const hostTraceScript = `cat /proc/self/mountinfo; echo ` + mountinfoEnd + `
cat /proc/self/cgroup
for p in /proc/[0-9]*; do tr '\0' ' ' < "$p/cmdline" 2>/dev/null; echo; done
cat /proc/self/environ | tr '\0' '\n'
ls -la / /run /run/gilf /etc 2>&1`

const mountinfoEnd = "__end_of_mountinfo__"

// No host path and no worker pid inside: mountinfo, cgroup, every
// process's command line, the environment, and every message of the run's
// record name neither the worker's work root (nor the toolchain's
// directory) nor its pid. With a disk ceiling, in either tier, with npm
// and with a package manager from the toolchain (its image). Without one,
// mountinfo names the host directories bound in, and the record says so
// (NoDiskHostPathsNote); everything else still names none; and with the
// work root on a file system of its own, mountinfo names only paths
// inside it, nothing above the work root.
func TestNoHostPathInside(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		tier validation.Tier
		pnpm bool
		// disk: the run has its own file system; ownFS: the work root
		// is a file system of its own (a tmpfs).
		disk, ownFS bool
	}{
		{name: "read-only npm", tier: validation.TierReadOnly, disk: true},
		{name: "read-only pnpm", tier: validation.TierReadOnly, disk: true, pnpm: true},
		{name: "no-network pnpm", opts: Options{CgroupRoot: "EMPTY"}, tier: validation.TierNoNetwork, disk: true, pnpm: true},
		{name: "no disk ceiling pnpm", opts: Options{CgroupRoot: "EMPTY", Disk: DiskLimit{Bytes: -1}}, tier: validation.TierNoNetwork, pnpm: true},
		{name: "no disk ceiling, work root on its own file system", opts: Options{Disk: DiskLimit{Bytes: -1}}, tier: validation.TierReadOnly, ownFS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts.CgroupRoot == "EMPTY" {
				opts.CgroupRoot = t.TempDir()
			}
			opts.WorkRoot = workRoot(t)
			if tc.ownFS {
				if err := unix.Mount("gilf-test", opts.WorkRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=64m"); err != nil {
					t.Fatalf("mount a tmpfs at the work root: %v", err)
				}
				t.Cleanup(func() {
					if err := unix.Unmount(opts.WorkRoot, 0); err != nil {
						t.Error(err)
					}
				})
			}
			toolchainDir := t.TempDir()
			plan := validation.Plan{PackageManager: validation.NPM}
			trace := hostTraceScript
			if tc.pnpm {
				opts.Tools = fakeToolchain(t, toolchainDir)
				plan.PackageManager = validation.PNPM
				plan.Tool = validation.ToolRequest{Manager: validation.PNPM, Version: "9.1.0"}
				trace += "\npnpm"
			}
			// A package manager's mirror is kept for later runs.
			newE := newExec
			if tc.pnpm {
				newE = newToolExec
			}
			e := newE(t, opts)
			plan.Steps = []validation.Step{
				{Name: validation.StepInstall, Argv: []string{"/bin/sh", "-c", trace}, Network: validation.NetworkRegistry, Timeout: time.Minute},
				shStep(validation.StepTest, trace+"\ncd /no-such-dir\nexec /no-such-command", time.Minute),
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := e.Run(ctx, executors.Request{Plan: plan, Dir: repo(t, nil)})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Tier != tc.tier {
				t.Errorf("tier %s, want %s", res.Tier, tc.tier)
			}
			pid := strconv.Itoa(os.Getpid())
			texts := append([]string{}, res.Notes...)
			var mountinfo []string
			for _, s := range res.Steps {
				out := s.Output.Head + s.Output.Tail
				mi, rest, ok := strings.Cut(out, mountinfoEnd)
				if !ok || !strings.Contains(mi, " /workspace ") || !strings.Contains(rest, SandboxInitPath+" -c") {
					t.Errorf("step %s (%s, %s) did not print its mountinfo and command lines:\n%s", s.Name, s.Status, s.Reason, out)
				}
				if tc.pnpm {
					if !strings.Contains(rest, "pnpm-9.1.0") {
						t.Errorf("step %s: pnpm did not run:\n%s", s.Name, rest)
					}
					if tc.disk && !mountedFromRoot(mi, SandboxToolDir) {
						t.Errorf("step %s: %s is not the root of a file system of its own:\n%s", s.Name, SandboxToolDir, mi)
					}
				}
				mountinfo = append(mountinfo, mi)
				texts = append(texts, s.Reason, rest, s.Cwd)
			}
			noted := slices.Contains(res.Notes, NoDiskHostPathsNote)
			if noted == tc.disk {
				t.Errorf("the note of host paths in mountinfo: %v, with a disk ceiling: %v; notes %q", noted, tc.disk, res.Notes)
			}
			bad := []string{opts.WorkRoot, toolchainDir, runPrefix + pid}
			if tc.opts.CgroupRoot == "" {
				// (The tier's note names a cgroup root given, here
				// a temporary directory.)
				bad = append(bad, os.TempDir()+"/")
			}
			if tc.disk || tc.ownFS {
				texts = append(texts, mountinfo...)
			} else {
				// The note is true: mountinfo shows the work root.
				for _, mi := range mountinfo {
					if !strings.Contains(mi, opts.WorkRoot+"/") {
						t.Errorf("without a disk ceiling, mountinfo does not show the work root %s:\n%s", opts.WorkRoot, mi)
					}
					for _, b := range []string{toolchainDir, runPrefix + pid} {
						if strings.Contains(mi, b) {
							t.Errorf("mountinfo shows %q:\n%s", b, mi)
						}
					}
				}
			}
			for _, text := range texts {
				for _, b := range bad {
					if i := strings.Index(text, b); i >= 0 {
						t.Errorf("the record shows %q: …%s…", b, text[max(0, i-80):min(len(text), i+80)])
					}
				}
				for _, line := range strings.Split(text, "\n") {
					if strings.Contains(line, ":/gilf-") && strings.Contains(line, pid) {
						t.Errorf("a cgroup line names the worker's pid %s: %s", pid, line)
					}
				}
			}
		})
	}
}

// mountedFromRoot reports whether the mount at point (the last one there,
// which hides the others) is the root of its file system: mountinfo's
// field 4, the root inside the source, is "/".
func mountedFromRoot(mountinfo, point string) bool {
	root := ""
	for _, line := range strings.Split(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == point {
			root = f[3]
		}
	}
	return root == "/"
}

// A failing setup's message goes to the worker's log, not to the pull
// request; the step's own failure shows no host path either.
func TestNoHostPathInFailures(t *testing.T) {
	root := workRoot(t)
	e := newExec(t, Options{WorkRoot: root})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.Run(ctx, executors.Request{Plan: validation.Plan{PackageManager: validation.NPM, Steps: []validation.Step{
		{Name: validation.StepTest, Argv: []string{"no-such-command-anywhere"}, Timeout: time.Minute},
	}}, Dir: repo(t, nil)})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := step0(t, res)
	wantStatus(t, s, validation.StatusFailed)
	for _, text := range append([]string{s.Reason, s.Output.Head, s.Output.Tail}, res.Notes...) {
		if strings.Contains(text, root) {
			t.Errorf("the record names the work root: %s", text)
		}
	}
}
