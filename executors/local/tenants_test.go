package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// Two concurrent runs get uids of their own: even at tier none (no
// namespaces at all), one cannot signal the other's processes nor write
// its workspace.
func TestTenantsApart(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(shared, "gate")
	if err := syscall.Mkfifo(gate, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(gate, 0o666); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, Options{BwrapPath: filepath.Join(t.TempDir(), "missing-bwrap"), MinTier: validation.TierNone, UIDCount: 4})
	run := func(script string) executors.Result {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := e.Run(ctx, executors.Request{Dir: repo(t, map[string]string{"own.txt": "mine\n"}), Plan: validation.Plan{Steps: []validation.Step{shStep("test", script, time.Minute)}}})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		return res
	}
	var wg sync.WaitGroup
	var victim executors.Result
	wg.Go(func() {
		victim = run(`id -u > ` + shared + `/b.uid; pwd > ` + shared + `/b.dir.tmp; echo $$ > ` + shared + `/b.pid.tmp; mv ` + shared + `/b.dir.tmp ` + shared + `/b.dir; mv ` + shared + `/b.pid.tmp ` + shared + `/b.pid; read x < ` + gate + `; cat own.txt`)
	})
	waitUntil(t, "the first run waits", func() bool {
		_, err1 := os.Stat(filepath.Join(shared, "b.pid"))
		_, err2 := os.Stat(filepath.Join(shared, "b.dir"))
		return err1 == nil && err2 == nil
	})
	attacker := run(`id -u; pid=$(cat ` + shared + `/b.pid); dir=$(cat ` + shared + `/b.dir)
kill -0 "$pid" 2>&1 && echo SIGNALLED
echo pwned > "$dir/own.txt" 2>&1 && echo WROTE
ls "$dir" 2>&1 && echo LISTED
echo released > ` + gate)
	wg.Wait()
	out := attacker.Steps[0].Output.Head
	for _, bad := range []string{"SIGNALLED", "WROTE", "LISTED"} {
		if strings.Contains(out, bad) {
			t.Errorf("the second run reached the first: %s\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "Operation not permitted") || !strings.Contains(out, "Permission denied") {
		t.Errorf("attacker output:\n%s", out)
	}
	b, _ := os.ReadFile(filepath.Join(shared, "b.uid")) // checked below
	if first, second := strings.TrimSpace(string(b)), strings.SplitN(out, "\n", 2)[0]; first == "" || first == second {
		t.Errorf("the runs shared uid %q / %q", first, second)
	}
	if got := victim.Steps[0].Output.Head; got != "mine\n" {
		t.Errorf("the first run's own file: %q", got)
	}
}

// The pool's boundary: UIDCount runs at once, and one more is an error
// until one ends.
func TestUIDPoolBoundary(t *testing.T) {
	o := Options{SandboxUID: testUID(t), SandboxGID: testUID(t), UIDCount: 2, UIDLockDir: t.TempDir()}.withDefaults()
	p := newUIDPool(o)
	a, err := p.take(0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.take(0)
	if err != nil {
		t.Fatal(err)
	}
	if a.uid == b.uid || a.gid == b.gid {
		t.Fatalf("shared ids %+v %+v", a, b)
	}
	if _, err := p.take(0); err == nil {
		t.Fatal("a third run got a uid of a pool of two")
	}
	// Another process's pool (the same lock directory) sees them taken.
	other := newUIDPool(o)
	if _, err := other.take(0); err == nil {
		t.Fatal("another pool took a uid held by this one")
	}
	if err := p.release(a); err != nil {
		t.Fatal(err)
	}
	c, err := other.take(0)
	if err != nil || c.uid != a.uid {
		t.Fatalf("after a release: %+v %v, want uid %d", c, err, a.uid)
	}
	for _, x := range []struct {
		p *uidPool
		t *tenant
	}{{p, b}, {other, c}} {
		if err := x.p.release(x.t); err != nil {
			t.Fatal(err)
		}
	}
}

// A run takes the uid it prefers (its warm store's owner) when it is the
// pool's and free, another when a run holds it; the next run goes on from
// where the pool's turn was.
func TestUIDPoolPrefer(t *testing.T) {
	first := testUID(t)
	p := newUIDPool(Options{SandboxUID: first, SandboxGID: first, UIDCount: 3, UIDLockDir: t.TempDir()}.withDefaults())
	var got []uint32
	for _, prefer := range []uint32{first + 2, first + 2, first + 3} {
		tn, err := p.take(prefer)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tn.uid-first)
	}
	if want := []uint32{2, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("uids taken %v, want %v", got, want)
	}
	if _, err := p.take(first + 1); !errors.Is(err, errPoolExhausted) {
		t.Errorf("a fourth uid of a pool of three: %v", err)
	}
}

// Without its locks the pool cannot tell which uids are free: refused with
// sandbox_user_unknown, nothing started.
func TestUIDPoolUnknown(t *testing.T) {
	e := newExec(t, Options{UIDLockDir: "/proc/version/gilf-uids"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.Run(ctx, executors.Request{Dir: repo(t, nil), Plan: validation.Plan{Steps: []validation.Step{shStep("test", "true", time.Minute)}}})
	var r *validation.Refusal
	if !errors.As(err, &r) || r.Code != validation.CodeSandboxUserUnknown {
		t.Fatalf("Run: %v, want sandbox_user_unknown", err)
	}
	if strings.Contains(r.Msg, "/proc") {
		t.Errorf("the public message names a worker path: %q", r.Msg)
	}
}

// An install step asking for the registry, without a bridge binary: its
// network cannot be stated, so nothing runs (egress_unknown).
func TestEgressUnknown(t *testing.T) {
	e := newExec(t, Options{Egress: EgressOptions{BridgeBinary: "/nonexistent/gilf"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plan := validation.Plan{Steps: []validation.Step{{Name: validation.StepInstall, Argv: []string{"true"}, Network: validation.NetworkRegistry}}}
	_, err := e.Run(ctx, executors.Request{Dir: repo(t, nil), Plan: plan})
	var r *validation.Refusal
	if !errors.As(err, &r) || r.Code != validation.CodeEgressUnknown {
		t.Fatalf("Run: %v, want egress_unknown", err)
	}
	// The same plan with no network asked for runs.
	plan.Steps[0].Network = validation.NetworkNone
	if _, err := e.Run(ctx, executors.Request{Dir: repo(t, nil), Plan: plan}); err != nil {
		t.Fatalf("no-network install: %v", err)
	}
}
