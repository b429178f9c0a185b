package ownthread

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/internal/ownthread/threadtest"
)

// sleeper is a child that lives until killed, with Pdeathsig SIGKILL.
func sleeper() *exec.Cmd {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// The child of Start outlives the thread that called Start: once that
// thread is gone, the child is still there to be ended by a SIGTERM of
// the test's (a SIGKILL sent at the thread's end would have won).
func TestChildOutlivesTheCallersThread(t *testing.T) {
	cmd := sleeper()
	var wait <-chan error
	threadtest.StartOnEndingThread(t, func() (err error) {
		wait, err = Start(cmd)
		return err
	})
	pid := cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := <-wait; !errors.As(err, &ee) {
		t.Fatalf("Wait: %v, want the child's end by a signal", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the child ended with %v, want the test's SIGTERM: it died with the thread that started it", ee)
	}
}

// The failure Start prevents, shown: the same child started the usual
// way from that thread is killed when the thread ends.
func TestPlainStartDiesWithTheThread(t *testing.T) {
	cmd := sleeper()
	wait := make(chan error, 1)
	threadtest.StartOnEndingThread(t, func() error {
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { wait <- cmd.Wait() }()
		return nil
	})
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	select {
	case <-wait:
	case <-time.After(30 * time.Second):
		t.Fatal("the child outlived its thread: Pdeathsig did not fire")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, want SIGKILL", cmd.ProcessState)
	}
}

// A command that cannot start is reported, and nothing waits.
func TestStartError(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/ownthread-test")); err == nil {
		t.Fatal("no error for a missing binary")
	}
}

// StartWith's setup runs on the thread the child is forked from: the
// child inherits no_new_privs set there, and the caller's thread does not.
func TestStartWithSetupOnTheChildsThread(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `while read -r k v; do [ "$k" = NoNewPrivs: ] && echo "$v"; done < /proc/self/status; true`)
	var out strings.Builder
	cmd.Stdout = &out
	wait, err := StartWith(cmd, func() error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
	if err != nil {
		t.Fatal(err)
	}
	if err := <-wait; err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "1" {
		t.Fatalf("the child's NoNewPrivs is %q, want 1", got)
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 0 {
		t.Fatalf("the caller's thread has no_new_privs %d (%v)", v, err)
	}
}

// A setup that fails is reported, and the command is not started.
func TestStartWithSetupError(t *testing.T) {
	cmd := sleeper()
	boom := errors.New("boom")
	if _, err := StartWith(cmd, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the setup's", err)
	}
	if cmd.Process != nil {
		t.Fatal("the command was started after its setup failed")
	}
}
