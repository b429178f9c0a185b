package local

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// alternate runs run(false) and run(true) once each per iteration, so
// host noise hits both alike, and reports the median of each as
// name0-ms/op and name1-ms/op, and their ratio.
func alternate(b *testing.B, name0, name1 string, run func(second bool) time.Duration) {
	var first, second []time.Duration
	for b.Loop() {
		first = append(first, run(false))
		second = append(second, run(true))
	}
	m0, m1 := median(first), median(second)
	b.ReportMetric(float64(m0.Microseconds())/1000, name0+"-ms/op")
	b.ReportMetric(float64(m1.Microseconds())/1000, name1+"-ms/op")
	b.ReportMetric(float64(m1)/float64(m0), "ratio")
}

// BenchmarkBridgeCopy is what copying the bridge binary into the
// sandbox's own root (--ro-bind-data, so that no host path of it is
// mounted) costs an install step's bwrap, against binding it from the
// host (--ro-bind): a bare sandbox running /bin/true with each,
// alternately, so host noise hits both alike. The binary is this test
// binary, as large as gilf's. Metrics: the median bind-ms/op and
// copy-ms/op, their ratio, and the binary's size.
func BenchmarkBridgeCopy(b *testing.B) {
	box := newBareBox(b, probeCheckout(b), 300996)
	bin := box.dirs.Workspace + "/" + syscallProbeBin
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	base := BuildArgs(box.opts, validation.Step{Name: validation.StepInstall, Argv: []string{"/bin/true"}},
		Paths{Workspace: box.dirs.Workspace, Home: box.dirs.Home, Tmp: box.dirs.Tmp, Etc: box.dirs.Etc})
	at := slices.Index(base, "--remount-ro") // binds go before the root turns read-only
	run := func(copyIn bool) time.Duration {
		var extra []string
		var files []*os.File
		if copyIn {
			f, err := os.Open(bin)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			files = []*os.File{f}
			extra = []string{"--perms", "0555", "--ro-bind-data", "3", SandboxBridgePath}
		} else {
			extra = []string{"--ro-bind", bin, SandboxBridgePath}
		}
		return box.timeBwrap(b, slices.Concat(base[:at], extra, base[at:]), files)
	}
	alternate(b, "bind", "copy", run)
	b.ReportMetric(float64(st.Size())/(1<<20), "binary-MiB")
}

// timeBwrap runs the bwrap argv as the box's uid, handed files, and
// returns how long it took.
func (box *bareBox) timeBwrap(b *testing.B, argv []string, files []*os.File) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.ExtraFiles = []string{}, box.dirs.Workspace, files
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: box.opts.SandboxUID, Gid: box.opts.SandboxGID, Groups: []uint32{}},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("bwrap: %v %s", err, out)
	}
	return time.Since(t0)
}
