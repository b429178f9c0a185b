package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/executors/local"
)

// gilf seccomp-filter writes the local sandbox's filter, byte for byte, to
// standard output or a file, and bwrap loads that file: a netlink socket
// is then refused.
func TestSeccompFilterCommand(t *testing.T) {
	want, err := local.SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	if code := run(context.Background(), env, []string{"seccomp-filter"}); code != exitOK || !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("seccomp-filter: exit %d, %d bytes (want %d): %s", code, out.Len(), len(want), errOut.String())
	}
	file := filepath.Join(t.TempDir(), "seccomp.bpf")
	if code := run(context.Background(), env, []string{"seccomp-filter", "-o", file}); code != exitOK {
		t.Fatalf("seccomp-filter -o: exit %d: %s", code, errOut.String())
	}
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes (%v), want the filter's %d", len(got), err, len(want))
	}
	if code := run(context.Background(), env, []string{"seccomp-filter", "extra"}); code != exitUsage {
		t.Errorf("an extra argument: exit %d, want %d", code, exitUsage)
	}

	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("bwrap", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--seccomp", "3", "/bin/sh", "-c", "ip -o link 2>&1; echo exit $?")
	cmd.ExtraFiles = []*os.File{f}
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "Operation not permitted") || !strings.Contains(string(b), "exit 1") {
		t.Errorf("bwrap --seccomp with the file: %v\n%s", err, b)
	}
}
