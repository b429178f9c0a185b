package local

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// BenchmarkInstallEgress measures what the proxy costs an install: npm
// installs the registry's real tree (express and its 71 dependencies) from
// the same loopback registry, into a fresh workspace and an empty cache
// each time, once through the bridge and the proxy, once with bwrap's
// --share-net (the host network, which gilf never gives a step: it is the
// baseline only). Both are bare bwrap with the same binds and uid, no
// cgroup, alternating, so host noise hits both alike. Metrics: the median
// host-ms/op and proxy-ms/op and their ratio (target ≤ 1.10).
func BenchmarkInstallEgress(b *testing.B) {
	r := registry(b)
	rule, err := egress.RuleFromURL(r.URL)
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{SandboxUID: 300997, SandboxGID: 300997, Egress: EgressOptions{AllowHosts: []egress.Rule{rule}}}.withDefaults()
	opts.WorkRoot = b.TempDir()
	for p := opts.WorkRoot; p != os.TempDir() && p != "/"; p = parentDir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			b.Fatal(err)
		}
	}
	src := registryRepo(b, r.URL, nil)
	step := validation.Step{Name: validation.StepInstall, Argv: validation.InstallArgv(validation.NPM, false), Network: validation.NetworkRegistry}
	ctx := context.Background()

	run := func(proxied bool) time.Duration {
		dirs, _, err := makeRunDirs(opts.WorkRoot, src, int(opts.SandboxUID), int(opts.SandboxGID))
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dirs.Root)
		sb := &sandbox{opts: opts, log: discardLogger(), dirs: dirs}
		paths := Paths{Workspace: dirs.Workspace, Home: dirs.Home, Tmp: dirs.Tmp}
		var extra []*os.File
		var sp *stepProxy
		if proxied {
			if sp, err = sb.startProxy(sb.log); err != nil {
				b.Fatal(err)
			}
			readyR, readyW, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			defer readyR.Close()
			defer readyW.Close()
			bridge, err := os.Open(sp.bridge)
			if err != nil {
				b.Fatal(err)
			}
			defer bridge.Close()
			extra = []*os.File{readyW, bridge}
			paths.Egress = &EgressPaths{SocketDir: sp.dir, BridgeFD: 4, ReadyFD: 3}
		}
		argv := BuildArgs(opts, step, paths)
		if !proxied {
			argv = slices.Insert(argv, 2, "--share-net")
		}
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{}
		cmd.Dir = dirs.Workspace
		cmd.ExtraFiles = extra
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: opts.SandboxUID, Gid: opts.SandboxGID, Groups: []uint32{}},
			Setpgid:    true,
			Pdeathsig:  syscall.SIGKILL,
		}
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("install (proxied %v): %v\n%s", proxied, err, out)
		}
		if sp != nil {
			rec, err := sp.stop()
			if err != nil || len(rec.Allowed) != 1 || len(rec.Denied) != 0 {
				b.Fatalf("proxy: %v %+v", err, rec)
			}
		}
		return d
	}
	alternate(b, "host", "proxy", run)
}
