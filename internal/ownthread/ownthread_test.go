package ownthread

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper is a child that lives until killed, with Pdeathsig SIGKILL.
func sleeper() *exec.Cmd {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// startFromDoomedThread runs start on a goroutine locked to its thread
// that then ends, as a tier-none step's does, and waits until that thread
// is gone from /proc.
func startFromDoomedThread(t *testing.T, start func() error) {
	t.Helper()
	tids := make(chan int, 1)
	errs := make(chan error, 1)
	var doomed func()
	doomed = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The runtime wedges the main thread rather than end it:
			// hold it while another goroutine gets a thread of its own.
			defer runtime.UnlockOSThread()
			done := make(chan struct{})
			go func() { defer close(done); doomed() }()
			<-done
			return
		}
		// Never unlocked: the thread ends with this goroutine.
		tids <- unix.Gettid()
		errs <- start()
	}
	go doomed()
	waitThreadGone(t, <-tids, errs)
}

// waitThreadGone waits for the doomed goroutine's start and its thread's end.
func waitThreadGone(t *testing.T, tid int, errs <-chan error) {
	t.Helper()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	task := "/proc/self/task/" + strconv.Itoa(tid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not end", tid)
		}
		runtime.Gosched()
	}
}

// The child of Start outlives the thread that called Start: once that
// thread is gone, the child is still there to be ended by a SIGTERM of
// the test's (a SIGKILL sent at the thread's end would have won).
func TestChildOutlivesTheCallersThread(t *testing.T) {
	cmd := sleeper()
	var wait <-chan error
	startFromDoomedThread(t, func() (err error) {
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
	startFromDoomedThread(t, func() error {
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
