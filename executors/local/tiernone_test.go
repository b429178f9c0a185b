package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Tier none sets no_new_privs on every step (bwrap does it at the other
// tiers), and its notes say what the install step really had: the host
// network, no proxy.
func TestTierNoneNoNewPrivsAndNotes(t *testing.T) {
	e := newExec(t, Options{BwrapPath: filepath.Join(t.TempDir(), "missing-bwrap"), MinTier: validation.TierNone})
	status := `while read -r k v; do [ "$k" = NoNewPrivs: ] && echo "nnp $v"; done < /proc/self/status; true`
	res := runPlan(t, e, repo(t, nil),
		validation.Step{Name: validation.StepInstall, Argv: []string{"/bin/sh", "-c", status}, Network: validation.NetworkRegistry, Timeout: time.Minute},
		shStep(validation.StepTest, status, time.Minute))
	if res.Tier != validation.TierNone {
		t.Fatalf("tier %s", res.Tier)
	}
	for _, s := range res.Steps {
		wantStatus(t, s, validation.StatusPassed)
		if !strings.Contains(s.Output.Head, "nnp 1\n") {
			t.Errorf("step %s: no_new_privs not set:\n%s", s.Name, s.Output.Head)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{"step install shared the host network", "no proxy stood between it and the network", "step test shared the host network"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	for _, never := range []string{"seccomp filter in force", "disk ceiling in force", "limits in force"} {
		if strings.Contains(notes, never) && never != "limits in force" {
			t.Errorf("tier none notes claim %q:\n%s", never, notes)
		}
	}
}

// The worker's own threads keep no_new_privs off: the flag was set on a
// thread of the step's own, which ended with it. (Should that have been
// the main thread, the Go runtime does not end it but wedges it: it runs
// nothing again, so it is left out.)
func TestTierNoneLeavesWorkerThreads(t *testing.T) {
	e := newExec(t, Options{BwrapPath: filepath.Join(t.TempDir(), "missing-bwrap"), MinTier: validation.TierNone})
	for range 3 {
		runPlan(t, e, repo(t, nil), shStep(validation.StepTest, "true", time.Minute))
	}
	// The step's thread ends once it has seen the step exit: wait for
	// that (bounded), then none is left.
	var tainted []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		tainted = tainted[:0]
		entries, err := filepath.Glob("/proc/self/task/*/status")
		if err != nil || len(entries) == 0 {
			t.Fatalf("tasks: %v", err)
		}
		for _, st := range entries {
			if filepath.Base(filepath.Dir(st)) == strconv.Itoa(os.Getpid()) {
				continue
			}
			if b, err := readFileString(st); err == nil && strings.Contains(b, "NoNewPrivs:\t1") {
				tainted = append(tainted, st)
			}
		}
		if len(tainted) == 0 {
			return
		}
	}
	t.Errorf("worker threads with no_new_privs set: %v", tainted)
}

func readFileString(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}
