// Package ownthread starts a child process with a parent-death signal (a
// test's registry or database server, a local executor's step) so that
// the signal means what it says.
//
// A child's Pdeathsig fires when the thread that forked it ends, not the
// process. A Go program's threads do end: one whose goroutine exits while
// locked to it (runtime.LockOSThread without unlocking) is terminated,
// and the local executor's tier-none steps end theirs on purpose. A server
// forked from whichever thread the caller happened to run on is killed
// when that thread is later handed to such a goroutine and ends, long
// before the process does; every later request to it then fails.
package ownthread

import (
	"os/exec"
	"runtime"
)

// Start starts cmd from a thread of its own, locked, that waits for cmd
// and ends only once cmd has exited; the returned channel receives
// cmd.Wait's result. Nothing else runs on that thread, so no other
// goroutine's end can take it (and the child) away. The caller must not
// call cmd.Wait itself.
func Start(cmd *exec.Cmd) (<-chan error, error) { return StartWith(cmd, nil) }

// StartWith is Start with setup run first on that thread (when not nil):
// what setup sets on the thread (no_new_privs, say) the child inherits,
// and the thread is never given back to run anything else. An error of
// setup's is returned and cmd is not started.
func StartWith(cmd *exec.Cmd, setup func() error) (<-chan error, error) {
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, after cmd.
		runtime.LockOSThread()
		if setup != nil {
			if err := setup(); err != nil {
				started <- err
				return
			}
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
