package local

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

func TestOptionsDefaults(t *testing.T) {
	got := Options{}.withDefaults()
	want := Options{
		Env:            DefaultEnv(),
		MaxOutputBytes: validation.DefaultMaxOutputBytes,
		MaxStreamBytes: 4 << 30,
		MinTier:        validation.TierNoNetwork,
		Limits:         Limits{MemoryBytes: 4 << 30, Pids: 512, CPUs: 2},
		SandboxUID:     64000,
		SandboxGID:     64000,
		UIDCount:       1000,
		UIDLockDir:     "/run/lock/gilf-uids",
		BwrapPath:      "/usr/bin/bwrap",
		WorkRoot:       got.WorkRoot, // os.TempDir(), which the test does not pin
		CgroupRoot:     "/sys/fs/cgroup",
		KillGrace:      2 * time.Second,
		StepTimeout:    15 * time.Minute,
		Disk:           DiskLimit{Bytes: 8 << 30, Inodes: 1 << 20},
		MkfsPath:       "/usr/sbin/mkfs.ext4",
		// npm's own registry, and nothing else.
		Egress: EgressOptions{AllowHosts: []egress.Rule{{Host: "registry.npmjs.org", Port: 443}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got.WorkRoot == "" {
		t.Error("WorkRoot has no default")
	}
	// The default environment is the allow-list, nothing else.
	if diff := cmp.Diff([]string{"CI", "HOME", "LANG", "LC_ALL", "PATH", "TERM", "TMPDIR"}, sortedKeys(got.stepEnv(nil))); diff != "" {
		t.Errorf("step environment names (-want +got):\n%s", diff)
	}
}

func TestOptionsKeepSetValues(t *testing.T) {
	in := Options{
		Env:            map[string]string{},
		MaxOutputBytes: 10,
		MaxStreamBytes: 20,
		MinTier:        validation.TierReadOnly,
		Limits:         Limits{MemoryBytes: 1, Pids: 2, CPUs: 0.5},
		SandboxUID:     1234,
		SandboxGID:     5678,
		KillGrace:      time.Millisecond,
		StepTimeout:    time.Second,
	}
	got := in.withDefaults()
	if len(got.Env) != 0 || got.MaxOutputBytes != 10 || got.MaxStreamBytes != 20 || got.MinTier != validation.TierReadOnly ||
		got.Limits != in.Limits || got.SandboxUID != 1234 || got.SandboxGID != 5678 || got.KillGrace != time.Millisecond || got.StepTimeout != time.Second {
		t.Errorf("withDefaults changed set values: %+v", got)
	}
	// An empty Env still gets HOME, TMPDIR and CI, and nothing else.
	if diff := cmp.Diff([]string{"CI", "HOME", "TMPDIR"}, sortedKeys(got.stepEnv(nil))); diff != "" {
		t.Errorf("step environment names (-want +got):\n%s", diff)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string // substring of the error; "" means valid
	}{
		{"defaults", Options{}, ""},
		{"relative allow-read", Options{AllowRead: []string{"srv/x"}}, "AllowRead"},
		{"unclean deny-read", Options{DenyRead: []string{"/srv/../etc"}}, "DenyRead"},
		{"root allowed", Options{AllowRead: []string{"/"}}, "whole root"},
		{"write over system path", Options{AllowWrite: []string{"/usr/local"}}, "overlaps the system path /usr"},
		{"write above system path", Options{AllowWrite: []string{"/"}}, "AllowWrite"},
		{"write next to system path", Options{AllowWrite: []string{"/usr2"}}, ""},
		{"bad tier", Options{MinTier: "strong"}, "MinTier"},
		{"negative output", Options{MaxOutputBytes: -1}, "MaxOutputBytes"},
		{"negative stream", Options{MaxStreamBytes: -1}, "MaxStreamBytes"},
		{"negative limits", Options{Limits: Limits{Pids: -1}}, "Limits"},
		{"negative grace", Options{KillGrace: -time.Second}, "KillGrace"},
		{"env name with =", Options{Env: map[string]string{"A=B": "x"}}, "env: invalid name"},
		{"relative bwrap", Options{BwrapPath: "bwrap"}, "BwrapPath"},
		{"registry settings", Options{Egress: EgressOptions{Registries: map[string]string{"registry": "https://npm.example/", "@corp:registry": "http://127.0.0.1:4873/"}}}, ""},
		// Only registry URLs enter the sandbox's .npmrc: never a token,
		// never a second setting smuggled in a value.
		{"registry token", Options{Egress: EgressOptions{Registries: map[string]string{"//npm.example/:_authToken": "https://x.example/"}}}, "Egress.Registries"},
		{"registry not a URL", Options{Egress: EgressOptions{Registries: map[string]string{"registry": "file:///etc/passwd"}}}, "not a registry URL"},
		{"registry smuggles a line", Options{Egress: EgressOptions{Registries: map[string]string{"registry": "https://npm.example/\nignore-scripts=false"}}}, "not a registry URL"},
		{"relative bridge", Options{Egress: EgressOptions{BridgeBinary: "gilf"}}, "Egress.BridgeBinary"},
		{"disk at the minimum", Options{Disk: DiskLimit{Bytes: MinDiskBytes, Inodes: MinDiskInodes}}, ""},
		{"disk under the minimum", Options{Disk: DiskLimit{Bytes: MinDiskBytes - 1}}, "Disk.Bytes"},
		{"disk over the maximum", Options{Disk: DiskLimit{Bytes: MaxDiskBytes + 1}}, "Disk.Bytes"},
		{"inodes under the minimum", Options{Disk: DiskLimit{Inodes: MinDiskInodes - 1}}, "Disk.Inodes"},
		{"disk off", Options{Disk: DiskLimit{Bytes: -1, Inodes: -1}}, ""},
		{"uid pool at the top", Options{SandboxUID: 1<<32 - 1 - 1000, SandboxGID: 70000, UIDCount: 1000}, ""},
		{"uid pool past the top", Options{SandboxUID: 1<<32 - 1000, SandboxGID: 70000, UIDCount: 1000}, "UIDCount"},
		{"uid pool too large", Options{UIDCount: MaxUIDCount + 1}, "UIDCount"},
		{"warm disks", Options{Warm: WarmOptions{Dir: "/var/lib/gilf/warm-disks", MaxBytes: 1}}, ""},
		{"warm dir relative", Options{Warm: WarmOptions{Dir: "warm"}}, "Warm"},
		{"warm bound negative", Options{Warm: WarmOptions{Dir: "/w", MaxBytes: -1}}, "Warm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.withDefaults().validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("validate: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("validate: %v, want an error naming %q", err, tt.want)
			}
		})
	}
	// New reports the same problems, all at once.
	_, err := New(nil, Options{AllowRead: []string{"a"}, DenyRead: []string{"b"}})
	if err == nil || !strings.Contains(err.Error(), "AllowRead") || !strings.Contains(err.Error(), "DenyRead") {
		t.Errorf("New: %v, want both problems", err)
	}
}

func TestParseTier(t *testing.T) {
	tests := []struct {
		in      string
		want    validation.Tier
		wantErr bool
	}{
		{"", validation.TierNoNetwork, false},
		{"read-only", validation.TierReadOnly, false},
		{"no-network", validation.TierNoNetwork, false},
		{"none", validation.TierNone, false},
		{"remote", "", true},
		{"READ-ONLY", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTier(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseTier(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMeets(t *testing.T) {
	tiers := []validation.Tier{validation.TierNone, validation.TierNoNetwork, validation.TierReadOnly}
	for i, got := range tiers {
		for j, want := range tiers {
			if m := meets(got, want); m != (i >= j) {
				t.Errorf("meets(%s, %s) = %v", got, want, m)
			}
		}
	}
	if meets(validation.TierRemote, validation.TierNone) {
		t.Error("a tier the local executor cannot establish meets nothing")
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/srv/repo", "/srv/repo", true},
		{"/srv/repo/a", "/srv/repo", true},
		{"/srv/repo-evil", "/srv/repo", false},
		{"/srv", "/srv/repo", false},
		{"/srv/repo/../x", "/srv/repo", false},
		{"/srv/..x", "/srv", true},
	}
	for _, tt := range tests {
		if got := within(tt.p, tt.dir); got != tt.want {
			t.Errorf("within(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestStepEnvRepoVariablesUnderTheExecutors(t *testing.T) {
	o := Options{Env: map[string]string{"PATH": DefaultPath, "LANG": "C.UTF-8"}}
	got := o.stepEnv(map[string]string{
		"FORCE_COLOR": "1", "LANG": "de_DE.UTF-8", "HOME": "/root", "CI": "false", "NPM_TOKEN": "x",
	})
	want := map[string]string{
		"FORCE_COLOR": "1", "LANG": "C.UTF-8", "PATH": DefaultPath,
		"HOME": SandboxHome, "TMPDIR": SandboxTmp, "CI": "true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stepEnv (-want +got):\n%s", diff)
	}
}
