package local

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenArgs renders an argv one element per line, quoted, so a golden file
// shows every boundary.
func goldenArgs(argv []string) string {
	var b strings.Builder
	for _, a := range argv {
		b.WriteString(quoteArg(a))
		b.WriteByte('\n')
	}
	return b.String()
}

func quoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func TestBuildArgsGolden(t *testing.T) {
	paths := Paths{
		Workspace: "/var/lib/gilf-run/gilf-local-1/workspace",
		Home:      "/var/lib/gilf-run/gilf-local-1/home",
		Tmp:       "/var/lib/gilf-run/gilf-local-1/tmp",
		Etc:       "/var/lib/gilf-run/gilf-local-1/etc",
		Shm:       "/var/lib/gilf-run/gilf-local-1/shm",
		// Every sandboxed step has the filter, on the descriptor after
		// the others (command numbers them in this order), and the
		// proof's pipes (its token and start descriptors).
		SeccompFD: 3,
		InfoFD:    10,
		TokenFD:   11,
		StartFD:   12,
	}
	install := validation.Step{Name: validation.StepInstall, Argv: []string{"npm", "ci"}, Network: validation.NetworkRegistry, Timeout: time.Minute}
	test := validation.Step{Name: validation.StepTest, Argv: []string{"npm", "run", "test"}, Network: validation.NetworkNone}
	tests := []struct {
		name  string
		opts  Options
		step  validation.Step
		paths func(Paths) Paths
	}{
		{name: "script-default", step: test},
		{
			name: "install-network",
			step: install,
			paths: func(p Paths) Paths {
				p.Egress = &EgressPaths{SocketDir: "/var/lib/gilf-run/gilf-local-1/egress", BridgeFD: 4, ReadyFD: 3}
				p.SeccompFD = 4
				return p
			},
		},
		{name: "install-no-network", step: validation.Step{Name: validation.StepInstall, Argv: []string{"npm", "install"}, Network: validation.NetworkNone}},
		{name: "script-asks-network", step: validation.Step{Name: validation.StepLint, Argv: []string{"npm", "run", "lint"}, Network: validation.NetworkRegistry}},
		{
			name: "allow-and-deny",
			opts: Options{
				AllowRead:  []string{"/opt/toolchain", "/srv/cache"},
				AllowWrite: []string{"/srv/out"},
				DenyRead:   []string{"/opt/toolchain/secret", "/srv/cache/token"},
				Env:        map[string]string{"PATH": "/opt/toolchain/bin:/usr/bin:/bin", "NODE_ENV": "test", "HOME": "/ignored"},
			},
			step: validation.Step{Name: validation.StepBuild, Argv: []string{"/bin/sh", "-c", "echo 'quoted $HOME'"}},
			paths: func(p Paths) Paths {
				p.DenyDirs = []string{"/opt/toolchain/secret"}
				p.DenyFiles = []string{"/srv/cache/token"}
				return p
			},
		},
		{
			name: "cgroup-v1-handshake",
			step: test,
			paths: func(p Paths) Paths {
				p.InfoFD, p.BlockFD, p.SeccompFD = 3, 4, 5
				return p
			},
		},
		{
			// Every descriptor at once: --seccomp is the last sandbox
			// option, after the handshake's, before --chdir and the
			// bridge.
			name: "install-cgroup-v1-seccomp",
			step: install,
			paths: func(p Paths) Paths {
				p.InfoFD, p.BlockFD = 3, 4
				p.Egress = &EgressPaths{SocketDir: "/var/lib/gilf-run/gilf-local-1/egress", BridgeFD: 6, ReadyFD: 5}
				p.SeccompFD = 6
				return p
			},
		},
		{
			// What the step benchmark's bare bwrap runs.
			name: "no-seccomp",
			step: test,
			paths: func(p Paths) Paths {
				p.SeccompFD = 0
				return p
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := paths
			if tt.paths != nil {
				p = tt.paths(p)
			}
			got := goldenArgs(BuildArgs(tt.opts.withDefaults(), tt.step, p))
			file := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("argv differs from %s (-want +got):\n%s", file, diff)
			}
		})
	}
}

// The argv is pure: the same input gives the same argv, and the caller's
// options are not changed.
func TestBuildArgsPure(t *testing.T) {
	opts := Options{Env: map[string]string{"B": "2", "A": "1", "C": "3"}}.withDefaults()
	step := validation.Step{Name: "test", Argv: []string{"node", "t.js"}}
	first := BuildArgs(opts, step, Paths{Workspace: "/w", Home: "/h", Tmp: "/t"})
	for range 20 {
		if diff := cmp.Diff(first, BuildArgs(opts, step, Paths{Workspace: "/w", Home: "/h", Tmp: "/t"})); diff != "" {
			t.Fatalf("argv changed between calls:\n%s", diff)
		}
	}
	if _, ok := opts.Env["HOME"]; ok {
		t.Errorf("BuildArgs wrote into the caller's Env: %v", opts.Env)
	}
}

func TestBuildArgsInvariants(t *testing.T) {
	opts := Options{}.withDefaults()
	argv := BuildArgs(opts, validation.Step{Name: "test", Argv: []string{"npm", "test"}}, Paths{Workspace: "/w", Home: "/h", Tmp: "/t"})
	joined := " " + strings.Join(argv, " ") + " "
	for _, want := range []string{" --unshare-all ", " --unshare-user ", " --disable-userns ", " --assert-userns-disabled ", " --die-with-parent ", " --new-session ", " --clearenv ", " --remount-ro / ", " --chdir /workspace -- npm test "} {
		if !strings.Contains(joined, want) {
			t.Errorf("argv lacks %q: %s", want, joined)
		}
	}
	for _, bad := range []string{"--share-net", "/root", "/home ", "/sys", "--ro-bind-try /etc /etc"} {
		if strings.Contains(joined, bad) {
			t.Errorf("argv holds %q: %s", bad, joined)
		}
	}
	if argv[len(argv)-3] != "--" {
		t.Errorf("the step's argv must follow --: %v", argv)
	}
	if strings.Contains(joined, "--seccomp") {
		t.Errorf("argv has --seccomp without a SeccompFD: %s", joined)
	}
	// With a filter, --seccomp is the last option before --chdir.
	argv = BuildArgs(opts, validation.Step{Name: "test", Argv: []string{"npm", "test"}}, Paths{Workspace: "/w", Home: "/h", Tmp: "/t", InfoFD: 3, BlockFD: 4, SeccompFD: 5})
	if i := slices.Index(argv, "--chdir"); i < 2 || argv[i-2] != "--seccomp" || argv[i-1] != "5" {
		t.Errorf("--seccomp 5 must come right before --chdir: %v", argv)
	}
}

func TestStepNetwork(t *testing.T) {
	tests := []struct {
		name string
		step validation.Step
		want validation.Network
	}{
		{"install asks registry", validation.Step{Name: validation.StepInstall, Network: validation.NetworkRegistry}, validation.NetworkRegistry},
		{"install asks none", validation.Step{Name: validation.StepInstall, Network: validation.NetworkNone}, validation.NetworkNone},
		// Nothing widens to the host network, whoever asks.
		{"install asks host", validation.Step{Name: validation.StepInstall, Network: validation.NetworkHost}, validation.NetworkNone},
		{"install asks full", validation.Step{Name: validation.StepInstall, Network: validation.NetworkFull}, validation.NetworkNone},
		{"script asks registry", validation.Step{Name: validation.StepTest, Network: validation.NetworkRegistry}, validation.NetworkNone},
		{"script asks host", validation.Step{Name: validation.StepTest, Network: validation.NetworkHost}, validation.NetworkNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stepNetwork(tt.step); got != tt.want {
				t.Errorf("stepNetwork = %s, want %s", got, tt.want)
			}
		})
	}
}

// The guard comes first after "--": in front of the egress bridge too, so
// nothing of the step (nor the bridge) runs before the worker's go-ahead.
func TestBuildArgsGuardFirst(t *testing.T) {
	opts := Options{}.withDefaults()
	step := validation.Step{Name: validation.StepInstall, Argv: []string{"npm", "ci"}, Network: validation.NetworkRegistry}
	a := BuildArgs(opts, step, Paths{Workspace: "/w", Home: "/h", Tmp: "/t", GuardFD: 7,
		Egress: &EgressPaths{SocketDir: "/s", BridgeFD: 8, ReadyFD: 6}})
	i := slices.Index(a, "--")
	if i < 0 || !slices.Equal(a[i+1:i+8], guardArgv(7, nil)) {
		t.Fatalf("after --: %q, want the guard reading descriptor 7 first", a[i+1:])
	}
	if rest := a[i+8:]; rest[0] != SandboxBridgePath || !slices.Equal(rest[len(rest)-2:], step.Argv) {
		t.Errorf("after the guard: %q, want the bridge, then the step", rest)
	}
	if b := BuildArgs(opts, step, Paths{Workspace: "/w", Home: "/h", Tmp: "/t"}); slices.Contains(b, startShim) {
		t.Errorf("no GuardFD, but the guard is in the argv")
	}
}
