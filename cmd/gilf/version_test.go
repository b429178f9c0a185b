package main

import (
	"bytes"
	"net/http"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/webhook"
)

func TestVersionOf(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want buildVersion
	}{
		{"no build info", nil, false, buildVersion{Version: "unknown", GoVersion: runtime.Version()}},
		{"a tagged module build", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/gilf-review/gilf", Version: "v1.4.0"}},
			true, buildVersion{Module: "github.com/gilf-review/gilf", Version: "v1.4.0", GoVersion: "go1.26.1"}},
		{"a work tree build", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/gilf-review/gilf", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "f06bb45aa"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			true, buildVersion{Module: "github.com/gilf-review/gilf", Version: "(devel)", Revision: "f06bb45aa", Time: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, versionOf(tt.bi, tt.ok)); diff != "" {
				t.Errorf("versionOf (-want +got):\n%s", diff)
			}
		})
	}
	var b bytes.Buffer
	if err := (buildVersion{Module: "m", Version: "(devel)", Revision: "abc", Time: "t", Modified: true, GoVersion: "go1.26.1"}).write(&b); err != nil {
		t.Fatal(err)
	}
	want := "gilf (devel)\nmodule:   m\nrevision: abc (modified)\ntime:     t\ngo:       go1.26.1\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("write (-want +got):\n%s", diff)
	}
}

// TestVersionCommand runs the built binary: what it prints is its own
// build information.
func TestVersionCommand(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), gilfBin, "version").Output()
	if err != nil {
		t.Fatalf("gilf version: %v", err)
	}
	mod, err := exec.CommandContext(t.Context(), "go", "version", "-m", gilfBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	// go version -m: "<path>: go1.x", then "\tmod\t<path>\t<version>…".
	var goVersion, module, version string
	for i, l := range strings.Split(string(mod), "\n") {
		f := strings.Fields(l)
		switch {
		case i == 0 && len(f) == 2:
			goVersion = f[1]
		case len(f) >= 3 && f[0] == "mod":
			module, version = f[1], f[2]
		}
	}
	for _, w := range []string{"gilf " + version + "\n", "module:   " + module + "\n", "go:       " + goVersion + "\n", "revision: ", "time:     "} {
		if !strings.Contains(string(out), w) {
			t.Errorf("gilf version lacks %q:\n%s", w, out)
		}
	}
	if module != "github.com/gilf-review/gilf" {
		t.Errorf("module %q from go version -m", module)
	}
}

func TestBuildInfoMetric(t *testing.T) {
	db := newTestStore(t, nil)
	m := newServeMetrics(db)
	srv := routesServer(t, db, m, testHook(t, newWakingInbox(db, m), webhook.Config{}), nil, 0)
	code, body := httpGet(t, srv.URL, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	v := readBuildVersion()
	rev := v.Revision
	if rev == "" {
		rev = "unknown"
	}
	want := `gilf_build_info{goversion="` + v.GoVersion + `",revision="` + rev + `",version="` + v.Version + `"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, grepLines(body, "gilf_build_info"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
