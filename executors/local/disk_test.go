package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

func freeBytes(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// A step that writes without end hits the run's ceiling: ENOSPC inside,
// the record says so, and the host lost no more than the ceiling.
func TestDiskCeiling(t *testing.T) {
	const ceiling = 64 << 20
	e := newExec(t, Options{Disk: DiskLimit{Bytes: ceiling, Inodes: 4096}})
	before := freeBytes(t, e.opts.WorkRoot)
	minFree := before
	res := runPlan(t, e, repo(t, map[string]string{"package.json": "{}"}),
		shStep("test", `dd if=/dev/zero of=big bs=1M count=256 2>&1; echo "dd exit $?"; df -k . | tail -1`, time.Minute),
		shStep("lint", `rm -f big; i=0; while [ $i -lt 6000 ]; do : > f$i || { echo "touch failed at $i"; break; }; i=$((i+1)); done`, time.Minute),
		shStep("build", `dd if=/dev/zero of="$HOME/h" bs=1M count=100 2>&1 | tail -1; dd if=/dev/zero of=/tmp/t bs=1M count=100 2>&1 | tail -1`, time.Minute),
	)
	if free := freeBytes(t, e.opts.WorkRoot); free < minFree {
		minFree = free
	}
	dd := res.Steps[0]
	if !strings.Contains(dd.Output.Head, "No space left on device") || strings.Contains(dd.Output.Head, "268435456 bytes") {
		t.Errorf("dd past the ceiling:\n%s", dd.Output.Head)
	}
	if !strings.Contains(dd.Reason, "disk ceiling") {
		t.Errorf("the record does not say the ceiling was reached: %q", dd.Reason)
	}
	inodes := res.Steps[1]
	if !strings.Contains(inodes.Output.Head, "No space left on device") || !strings.Contains(inodes.Reason, "disk ceiling") {
		t.Errorf("inode ceiling: %q (%s)", inodes.Output.Head, inodes.Reason)
	}
	// HOME and TMPDIR share the one ceiling.
	if b := res.Steps[2].Output.Head; strings.Count(b, "No space left on device") < 1 {
		t.Errorf("HOME and TMPDIR:\n%s", b)
	}
	if lost := before - minFree; lost > ceiling+(16<<20) {
		t.Errorf("the host lost %d bytes for a %d-byte ceiling", lost, ceiling)
	}
	for _, n := range res.Notes {
		if strings.Contains(n, "disk ceiling in force") {
			return
		}
	}
	t.Errorf("notes %q do not name the disk ceiling", res.Notes)
}

// A second local uid cannot read a running workspace, nor list the run
// directory.
func TestWorkspacePrivateToTheRun(t *testing.T) {
	gateDir := t.TempDir()
	if err := os.Chmod(gateDir, 0o711); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(gateDir, "gate")
	if err := syscall.Mkfifo(gate, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(gate, 0o666); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, Options{AllowRead: []string{gateDir}})
	other := testUID(t) + 1
	peek := func(path string) string {
		cmd := exec.Command("/bin/sh", "-c", `ls "$1" 2>&1; cat "$1/secret.js" 2>&1`, "peek", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: other, Gid: other, Groups: []uint32{}}}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	done := make(chan string, 1)
	go func() {
		var out strings.Builder
		defer func() { done <- out.String() }()
		// The step waits on the gate, so the run is live while the
		// other uid looks.
		f, err := os.OpenFile(gate, os.O_WRONLY, 0)
		if err != nil {
			out.WriteString("gate: " + err.Error())
			return
		}
		defer f.Close()
		entries, err := os.ReadDir(e.opts.WorkRoot)
		if err != nil || len(entries) != 1 {
			out.WriteString("no live run directory")
			return
		}
		run := filepath.Join(e.opts.WorkRoot, entries[0].Name())
		for _, p := range []string{e.opts.WorkRoot, run, filepath.Join(run, "fs"), filepath.Join(run, "fs", "workspace"), filepath.Join(run, "fs", "home")} {
			out.WriteString(p + ": " + peek(p) + "\n")
		}
		f.WriteString("go\n")
	}()
	res := runPlan(t, e, repo(t, map[string]string{"secret.js": "private repository code\n"}),
		shStep("test", `test -f secret.js && echo present; read x < `+gate+`; echo "gate $x"`, time.Minute))
	got := <-done
	wantStatus(t, res.Steps[0], validation.StatusPassed)
	if !strings.Contains(res.Steps[0].Output.Head, "gate go") {
		t.Fatalf("the step did not wait for the look: %q\n%s", res.Steps[0].Output.Head, got)
	}
	if strings.Contains(got, "private repository code") || strings.Contains(got, "secret.js\n") || strings.Count(got, "Permission denied") < 4 {
		t.Errorf("another uid saw the run:\n%s", got)
	}
}
