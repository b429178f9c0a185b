package e2btest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// readerGrace is how long after a process exits its output pipes may stay
// open (a backgrounded child) before its group is killed.
const readerGrace = 500 * time.Millisecond

// proc is one running process of a sandbox.
type proc struct {
	pid, pgid int
	// events carries output chunks in order, then one event with the
	// state; it is closed after that. Someone must drain it.
	events   chan procEvent
	timedOut atomic.Bool // killed at its Connect-Timeout-Ms
	gone     atomic.Bool // killed with its sandbox
}

type procEvent struct {
	stream string // "stdout" or "stderr"; "" for the end
	data   []byte
	state  *os.ProcessState
}

// startProc runs argv in its own process group with stdout and stderr on
// pipes. deadline > 0 kills it then, as envd does at Connect-Timeout-Ms.
func (s *Server) startProc(sb *sandbox, argv []string, dir string, env []string, deadline time.Duration) (*proc, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, outR.Close(), outW.Close())
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Started under the lock, so Close (which sets closed under it before
	// waiting) never races a new process.
	s.mu.Lock()
	_, alive := s.sandboxes[sb.id]
	startErr := errors.New("the sandbox is gone")
	if alive && !s.closed {
		startErr = cmd.Start()
	}
	// The child has its copies; the parent's write ends must close so
	// the readers see EOF.
	closeErr := errors.Join(outW.Close(), errW.Close())
	if startErr != nil {
		s.mu.Unlock()
		return nil, errors.Join(startErr, closeErr, outR.Close(), errR.Close())
	}
	p := &proc{pid: cmd.Process.Pid, pgid: cmd.Process.Pid, events: make(chan procEvent, 16)}
	sb.procs[p.pid] = p
	s.procs[p] = struct{}{}
	s.procsDone.Add(1)
	s.mu.Unlock()
	go s.watch(sb, p, cmd, outR, errR, deadline)
	return p, nil
}

func (s *Server) watch(sb *sandbox, p *proc, cmd *exec.Cmd, outR, errR *os.File, deadline time.Duration) {
	defer s.procsDone.Done()
	var readers sync.WaitGroup
	read := func(f *os.File, stream string) {
		defer readers.Done()
		defer f.Close()
		buf := make([]byte, ChunkBytes)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				p.events <- procEvent{stream: stream, data: bytes.Clone(buf[:n])}
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go read(outR, "stdout")
	go read(errR, "stderr")
	var timer *time.Timer
	if deadline > 0 {
		timer = time.AfterFunc(deadline, func() {
			p.timedOut.Store(true)
			killGroup(p.pgid, syscall.SIGKILL)
		})
	}
	waitErr := cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		p.gone.Store(true) // not reaped normally: report it as a dead sandbox
	}
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(readerGrace):
		killGroup(p.pgid, syscall.SIGKILL)
		<-done
	}
	killGroup(p.pgid, syscall.SIGKILL) // nothing of the step outlives it
	p.events <- procEvent{state: cmd.ProcessState}
	close(p.events)
	s.mu.Lock()
	delete(sb.procs, p.pid)
	delete(s.procs, p)
	s.mu.Unlock()
}

// drain discards the rest of a process's events once nobody streams them
// (the client went away; the process runs on, as in envd).
func (p *proc) drain() {
	go func() {
		for range p.events {
		}
	}()
}

func killGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return // nothing more a stand-in can do
	}
}

func syscallSignal(n int) syscall.Signal { return syscall.Signal(n) }
