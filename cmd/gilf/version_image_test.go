package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The image's build stage stamps what `gilf version` and gilf_build_info
// report: the binary built with deploy/Dockerfile's own -ldflags, from a
// context without VCS information as the image's is, says the version,
// revision and time it was given.
func TestImageBuildStampsVersion(t *testing.T) {
	var run string
	for _, in := range parseDockerfile(t, readRepoFile(t, "deploy/Dockerfile")) {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			run = in.args
		}
	}
	m := regexp.MustCompile(`-ldflags="([^"]+)"`).FindStringSubmatch(run)
	if m == nil {
		t.Fatalf("the build stage's go build has no -ldflags=\"…\": %q", run)
	}
	args := map[string]string{"GILF_VERSION": "0.1.0", "GILF_REVISION": "0123456789abcdef0123456789abcdef01234567",
		"GILF_BUILD_TIME": "2026-12-03T09:00:00Z"}
	ldflags := os.Expand(m[1], func(k string) string { return args[k] })
	if strings.Contains(ldflags, "$") {
		t.Fatalf("an ARG the test does not give: %q", m[1])
	}
	bin := filepath.Join(t.TempDir(), "gilf")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags="+ldflags, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("gilf version: %v\n%s", err, out)
	}
	for _, want := range []string{"gilf 0.1.0\n", "revision: " + args["GILF_REVISION"] + "\n", "time:     " + args["GILF_BUILD_TIME"] + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("gilf version lacks %q:\n%s", want, out)
		}
	}
	// Unstamped (the ARGs empty, no VCS): unknown, never made up.
	v := buildVersion{Version: "(devel)"}.stamped("", "", "")
	if v.Revision != "" || v.Version != "(devel)" {
		t.Errorf("unstamped: %+v", v)
	}
}

func TestBuildInfoMetricIsStamped(t *testing.T) {
	v := buildVersion{Version: "(devel)", Revision: "abc", Modified: true, GoVersion: "go1.26.8"}.stamped("0.2.0", "def", "2026-12-03T09:00:00Z")
	if v.Version != "0.2.0" || v.Revision != "def" || v.Modified || v.Time != "2026-12-03T09:00:00Z" {
		t.Errorf("stamped: %+v", v)
	}
}
