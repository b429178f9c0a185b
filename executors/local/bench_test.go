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

// BenchmarkStepOverhead compares one executor step running /bin/true
// (placed in the run's cgroup through bwrap's info/block handshake, its
// output piped through the redactor and the capture, the cgroup emptied
// after it) with a bare bwrap running /bin/true with the same uid switch
// and the same binds. Both run in each iteration, alternately, so host
// noise hits both alike. Metrics: the median bare-ms/op and step-ms/op,
// and their ratio.
func BenchmarkStepOverhead(b *testing.B) {
	opts := Options{SandboxUID: 300999, SandboxGID: 300999}.withDefaults()
	opts.WorkRoot = b.TempDir()
	if err := os.Chmod(opts.WorkRoot, 0o711); err != nil {
		b.Fatal(err)
	}
	for p := opts.WorkRoot; p != os.TempDir() && p != "/"; p = parentDir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			b.Fatal(err)
		}
	}
	e, err := New(nil, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	p, err := e.probe.get(ctx)
	if err != nil {
		b.Fatal(err)
	}
	dirs, _, err := makeRunDirs(opts.WorkRoot, "", int(opts.SandboxUID), int(opts.SandboxGID))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dirs.Root) })
	sb := &sandbox{opts: e.opts, dirs: dirs, cg: p.cg, name: "gilf-bench"}
	if err := sb.openCgroup(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := sb.closeCgroup(ctx); err != nil {
			b.Error(err)
		}
	})
	step := validation.Step{Name: "test", Argv: []string{"/bin/true"}}
	// The bare side gets the same sandbox: the same flags, generated
	// /etc and seccomp filter (descriptor 3), so the ratio is what the
	// executor adds around bwrap.
	bareArgs := BuildArgs(e.opts, step, Paths{Workspace: dirs.Workspace, Home: dirs.Home, Tmp: dirs.Tmp, Etc: dirs.Etc, SeccompFD: 3})

	var bare, stepped []time.Duration
	b.ResetTimer()
	for b.Loop() {
		filter, err := seccompFile()
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		cmd := exec.Command(bareArgs[0], bareArgs[1:]...)
		cmd.ExtraFiles = []*os.File{filter}
		cmd.Env = []string{}
		cmd.Dir = dirs.Workspace
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: opts.SandboxUID, Gid: opts.SandboxGID, Groups: []uint32{}},
			Setpgid:    true,
		}
		out, err := cmd.CombinedOutput()
		bare = append(bare, time.Since(t0))
		filter.Close()
		if err != nil {
			b.Fatalf("bare bwrap: %v %s", err, out)
		}

		t0 = time.Now()
		res, err := sb.runStep(ctx, stepRun{step: step, timeout: time.Minute, maxOutput: 1 << 10})
		if err != nil || res.Status != validation.StatusPassed {
			b.Fatalf("step: %v %s", err, res.Status)
		}
		stepped = append(stepped, time.Since(t0))
	}
	// Medians: on a shared host one slow iteration says nothing about
	// either side.
	mb, ms := median(bare), median(stepped)
	b.ReportMetric(float64(mb.Microseconds())/1000, "bare-ms/op")
	b.ReportMetric(float64(ms.Microseconds())/1000, "step-ms/op")
	b.ReportMetric(float64(ms)/float64(mb), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func parentDir(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}
