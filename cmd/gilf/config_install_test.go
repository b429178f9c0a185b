package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

func mustRules(t *testing.T, s string) []egress.Rule {
	t.Helper()
	r, err := egress.ParseAllowList(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoadInstall(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    InstallConfig
		wantErr []string // substrings, all in the one joined error
	}{
		{name: "defaults", want: InstallConfig{Network: validation.NetworkRegistry}},
		{name: "proxy spelled out", env: map[string]string{envInstallNetwork: " Proxy "}, want: InstallConfig{Network: validation.NetworkRegistry}},
		{name: "none", env: map[string]string{envInstallNetwork: "none"}, want: InstallConfig{Network: validation.NetworkNone}},
		{name: "host is not an option", env: map[string]string{envInstallNetwork: "host"}, wantErr: []string{"GILF_INSTALL_NETWORK=\"host\"", "not an option"}},
		{name: "full is not an option", env: map[string]string{envInstallNetwork: "full"}, wantErr: []string{"GILF_INSTALL_NETWORK=\"full\""}},
		{name: "ignore scripts", env: map[string]string{envInstallIgnoreScripts: "1"}, want: InstallConfig{Network: validation.NetworkRegistry, IgnoreScripts: true}},
		{name: "ignore scripts off", env: map[string]string{envInstallIgnoreScripts: "0"}, want: InstallConfig{Network: validation.NetworkRegistry}},
		{name: "ignore scripts true is an error", env: map[string]string{envInstallIgnoreScripts: "true"}, wantErr: []string{"GILF_INSTALL_IGNORE_SCRIPTS=\"true\""}},
		{
			name: "allow hosts",
			env:  map[string]string{envInstallAllowHosts: "npm.internal.example, *.corp.example,github.com:443,127.0.0.1:4873"},
			want: InstallConfig{Network: validation.NetworkRegistry, AllowHosts: mustRules(t, "npm.internal.example,*.corp.example,github.com:443,127.0.0.1:4873")},
		},
		{
			name:    "every bad entry at once, with the other settings",
			env:     map[string]string{envInstallAllowHosts: "https://x.example/,good.example,127.0.0.1", envInstallNetwork: "all"},
			wantErr: []string{"GILF_INSTALL_ALLOW_HOSTS", "https://x.example/", "127.0.0.1", "GILF_INSTALL_NETWORK"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := loadInstall(envMap(tc.env), nil)
			if loadFailed(t, errs, tc.wantErr) {
				return
			}
			tc.want.Cache = defaultInstallCache() // TestLoadInstallCache's
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The install settings reach the plan.
func TestInstallPlanOptions(t *testing.T) {
	c, err := Load(envMap(map[string]string{envInstallNetwork: "none", envInstallIgnoreScripts: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	p := validation.PlanFromManifest([]byte(`{"scripts":{"test":"tap"}}`), []string{"package-lock.json"}, c.Validation.PlanOptions())
	install := p.Steps[0]
	if install.Network != validation.NetworkNone || install.Argv[len(install.Argv)-1] != "--ignore-scripts" {
		t.Errorf("install step %+v", install)
	}
}

type fakeRunner map[string]struct {
	out string
	err error
}

func (f fakeRunner) run(_ context.Context, name string, args ...string) ([]byte, error) {
	r, ok := f[name+" "+strings.Join(args, " ")]
	if !ok {
		return nil, &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	return []byte(r.out), r.err
}

func TestProbeRegistries(t *testing.T) {
	tests := []struct {
		name      string
		runner    fakeRunner
		wantNpm   map[string]string
		wantRules string
		wantNote  string
	}{
		{
			name: "npm's settings, never its credentials; yarn absent; pnpm agrees",
			runner: fakeRunner{
				"npm config list --json": {out: `{"registry":"https://npm.mirror.example/","@corp:registry":"https://npm.corp.example:8443/",
"//npm.corp.example:8443/:_authToken":"(protected)","@bad:registry":"file:///etc","cache":"/root/.npm","@x:registry":"https://a.example/ x=y"}`},
				"pnpm config get registry": {out: "https://npm.mirror.example/\n"},
			},
			wantNpm:   map[string]string{"registry": "https://npm.mirror.example/", "@corp:registry": "https://npm.corp.example:8443/"},
			wantRules: "npm.corp.example:8443,npm.mirror.example:443",
			wantNote:  "@bad:registry",
		},
		{
			name: "yarn's default joins",
			runner: fakeRunner{
				"npm config list --json":   {out: `{"registry":"https://registry.npmjs.org/"}`},
				"yarn config get registry": {out: "https://registry.yarnpkg.com\n"},
			},
			wantNpm:   map[string]string{"registry": "https://registry.npmjs.org/"},
			wantRules: "registry.npmjs.org:443,registry.yarnpkg.com:443",
		},
		{
			name:      "no npm on the worker: npm's default",
			runner:    fakeRunner{},
			wantNpm:   map[string]string{"registry": "https://registry.npmjs.org/"},
			wantRules: "registry.npmjs.org:443",
			wantNote:  "npm's registry setting could not be read",
		},
		{
			name: "a failing pnpm is a note, not a stop",
			runner: fakeRunner{
				"npm config list --json":   {out: `{"registry":"http://127.0.0.1:4873/"}`},
				"pnpm config get registry": {err: errors.New("exit status 1")},
			},
			wantNpm:   map[string]string{"registry": "http://127.0.0.1:4873/"},
			wantRules: "127.0.0.1:4873",
			wantNote:  "pnpm's registry setting could not be read",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := probeRegistries(context.Background(), tc.runner.run)
			if diff := cmp.Diff(tc.wantNpm, w.Npm); diff != "" {
				t.Errorf("npm settings (-want +got):\n%s", diff)
			}
			var rules []string
			for _, r := range w.Rules {
				rules = append(rules, r.String())
			}
			if got := strings.Join(rules, ","); got != tc.wantRules {
				t.Errorf("rules %s, want %s", got, tc.wantRules)
			}
			notes := strings.Join(w.Notes, "\n")
			if tc.wantNote == "" && notes != "" || !strings.Contains(notes, tc.wantNote) {
				t.Errorf("notes %q, want %q", notes, tc.wantNote)
			}
		})
	}
}

func TestInstallRulesAndRemoteHosts(t *testing.T) {
	w := WorkerRegistries{Rules: mustRules(t, "registry.npmjs.org:443")}
	c := InstallConfig{AllowHosts: mustRules(t, "registry.npmjs.org:443,*.corp.example,127.0.0.1:4873,[::1]:4873,github.com")}
	rules := installRules(w, c)
	if len(rules) != 5 {
		t.Errorf("rules %v: the duplicate should appear once", rules)
	}
	if diff := cmp.Diff([]string{"registry.npmjs.org", "*.corp.example", "github.com"}, remoteHosts(rules)); diff != "" {
		t.Errorf("remote hosts (-want +got):\n%s", diff)
	}
}

func TestLoadLocalDisk(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    local.DiskLimit
		wantErr string
	}{
		{name: "defaults", want: local.DiskLimit{}},
		{name: "at the minimum", env: map[string]string{"GILF_LOCAL_DISK_BYTES": "16777216", "GILF_LOCAL_DISK_INODES": "1024"}, want: local.DiskLimit{Bytes: 16 << 20, Inodes: 1024}},
		{name: "under the minimum", env: map[string]string{"GILF_LOCAL_DISK_BYTES": "16777215"}, wantErr: "GILF_LOCAL_DISK_BYTES"},
		{name: "at the maximum", env: map[string]string{"GILF_LOCAL_DISK_BYTES": "4398046511104"}, want: local.DiskLimit{Bytes: 4 << 40}},
		{name: "over the maximum", env: map[string]string{"GILF_LOCAL_DISK_BYTES": "4398046511105"}, wantErr: "GILF_LOCAL_DISK_BYTES"},
		{name: "inodes under the minimum", env: map[string]string{"GILF_LOCAL_DISK_INODES": "1023"}, wantErr: "GILF_LOCAL_DISK_INODES"},
		{name: "not a number", env: map[string]string{"GILF_LOCAL_DISK_INODES": "1e6"}, wantErr: "GILF_LOCAL_DISK_INODES"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := loadLocalDisk(envMap(tc.env), nil)
			err := errors.Join(errs...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestLoadUIDRange(t *testing.T) {
	tests := []struct {
		in           string
		first, count uint32
		bad          bool
	}{
		{in: "", first: 0, count: 0},
		{in: "64000-64999", first: 64000, count: 1000},
		{in: "100000 - 100000", first: 100000, count: 1},
		{in: "0-10", bad: true},
		{in: "10-9", bad: true},
		{in: "64000", bad: true},
		{in: "1-1048576", first: 1, count: 1 << 20},
		{in: "1-1048577", bad: true},
		{in: "4294967294-4294967295", bad: true},
	}
	for _, tc := range tests {
		first, count, errs := loadUIDRange(envMap(map[string]string{"GILF_LOCAL_UID_RANGE": tc.in}), nil)
		if (len(errs) > 0) != tc.bad || first != tc.first || count != tc.count {
			t.Errorf("%q: %d %d %v; want %d %d bad=%v", tc.in, first, count, errs, tc.first, tc.count, tc.bad)
		}
	}
}
