package local

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// initAttackArg, as the test binary's first argument, makes it attack the
// sandbox's pid 1 (maybeRunHelperAttack).
const initAttackArg = "__gilf-init-attack"

// attackInit attacks pid 1 and the file it runs, and, as a control, a
// dumpable child of its own.
func attackInit() {
	cmdline, _ := os.ReadFile("/proc/1/cmdline")
	fmt.Println("init-is-gilf", strings.HasPrefix(string(cmdline), SandboxInitPath+"\x00"))
	fmt.Println("self-is-pid-2", os.Getppid() == 2 || os.Getpid() == 2)
	// The init's file: executable, never readable (that is what makes
	// it undumpable).
	f, err := os.Open(SandboxInitPath)
	if err == nil {
		f.Close()
	}
	fmt.Println("init-file-read", probeResult(err))
	fmt.Println("init-file-chmod", probeResult(os.Chmod(SandboxInitPath, 0o755)))
	attackControl("init", 1)
}

// The sandbox's pid 1 is gilf's init, undumpable: the step cannot write
// its memory, read its environment or list and take its descriptors, nor
// read or change the file it runs; the same attacks on a dumpable process
// of the step's own get through. In every tier this host can make with
// bwrap, in a script step and in the install step (whose bridge is
// pid 2's).
func TestInitCannotBeRobbed(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) Options
		tier validation.Tier
		net  validation.Network
	}{
		{"read-only", func(*testing.T) Options { return Options{} }, validation.TierReadOnly, validation.NetworkNone},
		{"read-only install", func(*testing.T) Options { return Options{} }, validation.TierReadOnly, validation.NetworkRegistry},
		{"no-network without cgroups", func(t *testing.T) Options { return Options{CgroupRoot: t.TempDir()} }, validation.TierNoNetwork, validation.NetworkNone},
		{"no-network without a disk ceiling", func(t *testing.T) Options { return Options{CgroupRoot: t.TempDir(), Disk: DiskLimit{Bytes: -1}} }, validation.TierNoNetwork, validation.NetworkNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newExec(t, tc.opts(t))
			name := validation.StepTest
			if tc.net == validation.NetworkRegistry {
				name = validation.StepInstall
			}
			res := runPlan(t, e, probeCheckout(t), validation.Step{Name: name,
				Argv: []string{"./" + syscallProbeBin, initAttackArg}, Network: tc.net, Timeout: time.Minute})
			if res.Tier != tc.tier {
				t.Errorf("tier %s, want %s", res.Tier, tc.tier)
			}
			s := step0(t, res)
			wantStatus(t, s, validation.StatusPassed)
			got := parseProbe(s.Output.Head)
			t.Logf("attacks: %v", got)
			for name, want := range map[string]string{
				"init-is-gilf":          "true",
				"self-is-pid-2":         "true",
				"init-file-read":        "EACCES",
				"init-file-chmod":       "EROFS",
				"init:mem-write":        "EACCES",
				"init:environ":          "EACCES",
				"init:fd-list":          "EACCES",
				"init:pidfd_getfd":      "EPERM",
				"init:process_madvise":  "EPERM",
				"init:process_vm_readv": "EPERM",
				"init:ptrace":           "EPERM",
				// The control: only the dumpable bit stands between
				// the step and the init's memory and descriptors.
				"control:mem-write": "ok",
				"control:fd-list":   "ok",
				"control:environ":   "ok",
			} {
				if got[name] != want {
					t.Errorf("%s: %q, want %s", name, got[name], want)
				}
			}
		})
	}
}

// With an init descriptor, bwrap runs gilf's init as pid 1: copied in
// unreadable before the root turns read-only, the step's command (with its
// start shim) its arguments. Without one, bwrap's own init stays.
func TestBuildArgsInit(t *testing.T) {
	opts := Options{}.withDefaults()
	step := validation.Step{Name: "test", Argv: []string{"npm", "test"}}
	paths := Paths{Workspace: "/w", Home: "/h", Tmp: "/t", TokenFD: 4, StartFD: 5, InitFD: 7}
	argv := strings.Join(BuildArgs(opts, step, paths), " ")
	for _, want := range []string{" --as-pid-1 ", " --perms 0111 --ro-bind-data 7 " + SandboxInitPath + " --remount-ro / "} {
		if !strings.Contains(argv, want) {
			t.Errorf("argv lacks %q:\n%s", want, argv)
		}
	}
	_, cmd, _ := strings.Cut(argv, " -- ")
	if wantPrefix := SandboxInitPath + " -c " + initScript + " gilf-init /bin/sh -c "; !strings.HasPrefix(cmd, wantPrefix) || !strings.HasSuffix(cmd, " 0 4 5 npm test") {
		t.Errorf("command %q: want the init, then the start shim, then the step", cmd)
	}
	paths.InitFD = 0
	argv = strings.Join(BuildArgs(opts, step, paths), " ")
	if strings.Contains(argv, "--as-pid-1") || strings.Contains(argv, SandboxInitPath) {
		t.Errorf("no init descriptor, yet: %s", argv)
	}
}

// BenchmarkInitStep is what gilf's init costs a step against bwrap's own:
// a bare sandbox running /bin/true under each, alternately, so host noise
// hits both alike. Metrics: the median bwrap-init-ms/op and
// gilf-init-ms/op, and their ratio.
//
//	go test ./executors/local -run '^$' -bench InitStep -benchtime 40x
func BenchmarkInitStep(b *testing.B) {
	box := newBareBox(b, repo(b, nil), 300997)
	run := func(gilfInit bool) time.Duration {
		paths := Paths{Workspace: box.dirs.Workspace, Home: box.dirs.Home, Tmp: box.dirs.Tmp, Etc: box.dirs.Etc}
		var files []*os.File
		if gilfInit {
			f, err := openInit()
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			files, paths.InitFD = []*os.File{f}, 3
		}
		argv := BuildArgs(box.opts, validation.Step{Name: validation.StepTest, Argv: []string{"/bin/true"}}, paths)
		return box.timeBwrap(b, argv, files)
	}
	alternate(b, "bwrap-init", "gilf-init", run)
}
