// Package threadtest reproduces, for tests, the end of an OS thread that a
// child was started from: what a tier-none step's start does to its own
// thread, and what fires a child's parent-death signal.
package threadtest

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// EndTimeout bounds the wait for the thread's end.
const EndTimeout = 30 * time.Second

// StartOnEndingThread runs start on a goroutine locked to its thread that
// then ends (locked, as a tier-none step's does), and returns once start
// has returned and that thread is gone from /proc. start's error fails
// the test.
func StartOnEndingThread(t testing.TB, start func() error) {
	t.Helper()
	tids := make(chan int, 1)
	errs := make(chan error, 1)
	var ending func()
	ending = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The runtime wedges the main thread rather than end it:
			// hold it while another goroutine gets a thread of its own.
			defer runtime.UnlockOSThread()
			done := make(chan struct{})
			go func() { defer close(done); ending() }()
			<-done
			return
		}
		// Never unlocked: the thread ends with this goroutine.
		tids <- unix.Gettid()
		errs <- start()
	}
	go ending()
	tid := <-tids
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	task := "/proc/self/task/" + strconv.Itoa(tid)
	for deadline := time.Now().Add(EndTimeout); ; runtime.Gosched() {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not end within %s", tid, EndTimeout)
		}
	}
}
