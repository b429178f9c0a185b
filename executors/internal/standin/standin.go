// Package standin holds what the stand-in provider servers of the remote
// executors' tests (e2btest, cfsandboxtest) share: watching a process
// group they started for a sandbox, its output streamed in chunks as the
// provider streams it.
package standin

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ReaderGrace is how long after a process's leader exits its output
// pipes may stay open (a backgrounded child) before its group is killed.
const ReaderGrace = 500 * time.Millisecond

// Watch is one started process group, watched until it ends.
type Watch struct {
	Cmd  *exec.Cmd // started with Setpgid, its output on the pipes below
	PGID int
	// Stdout and Stderr are the read ends of its output pipes (the write
	// ends closed in this process); Wait closes them.
	Stdout, Stderr *os.File
	// ChunkBytes bounds one chunk of output given to Send.
	ChunkBytes int
	// Deadline, when positive, kills the group that long after Wait
	// starts, as the provider does at a process's timeout; TimedOut is
	// called first.
	Deadline time.Duration
	TimedOut func()
	// Send gets each chunk, in order per stream ("stdout", "stderr"); it
	// is called from two goroutines, which have returned when Wait
	// returns.
	Send func(stream string, data []byte)
}

// Wait streams the output, waits for the leader and its output, and
// kills the group: nothing of the process outlives Wait. It returns the
// leader's Wait error.
func (w Watch) Wait() error {
	var readers sync.WaitGroup
	read := func(f *os.File, stream string) {
		defer readers.Done()
		defer f.Close()
		buf := make([]byte, w.ChunkBytes)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				w.Send(stream, bytes.Clone(buf[:n]))
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go read(w.Stdout, "stdout")
	go read(w.Stderr, "stderr")
	var timer *time.Timer
	if w.Deadline > 0 {
		timer = time.AfterFunc(w.Deadline, func() {
			if w.TimedOut != nil {
				w.TimedOut()
			}
			KillGroup(w.PGID, syscall.SIGKILL)
		})
	}
	waitErr := w.Cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(ReaderGrace):
		KillGroup(w.PGID, syscall.SIGKILL)
		<-done
	}
	KillGroup(w.PGID, syscall.SIGKILL)
	return waitErr
}

// KillGroup signals the process group pgid. A group that is gone, or a
// signal that fails, is nothing more a stand-in can act on.
func KillGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return // nothing more a stand-in can do
	}
}

// Start starts cmd in its own process group with stdout and stderr on
// pipes, and returns their read ends for a Watch. gone, when not nil, is
// returned instead of starting (the sandbox went away); the caller decides
// it under its lock and keeps holding the lock until the process is
// registered, so a Close never races a new process.
func Start(cmd *exec.Cmd, gone error) (stdout, stderr *os.File, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, nil, errors.Join(err, outR.Close(), outW.Close())
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	startErr := gone
	if startErr == nil {
		startErr = cmd.Start()
	}
	// The child has its copies; the parent's write ends must close so
	// the readers see EOF.
	closeErr := errors.Join(outW.Close(), errW.Close())
	if startErr != nil {
		return nil, nil, errors.Join(startErr, closeErr, outR.Close(), errR.Close())
	}
	if closeErr != nil {
		KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		return nil, nil, errors.Join(closeErr, cmd.Wait(), outR.Close(), errR.Close())
	}
	return outR, errR, nil
}
