package e2btest

import (
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/executors/internal/standin"
)

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
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	// Started under the lock, so Close (which sets closed under it before
	// waiting) never races a new process.
	s.mu.Lock()
	var gone error
	if _, alive := s.sandboxes[sb.id]; !alive || s.closed {
		gone = errors.New("the sandbox is gone")
	}
	outR, errR, err := standin.Start(cmd, gone)
	if err != nil {
		s.mu.Unlock()
		return nil, err
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
	waitErr := standin.Watch{
		Cmd: cmd, PGID: p.pgid, Stdout: outR, Stderr: errR, ChunkBytes: ChunkBytes,
		Deadline: deadline, TimedOut: func() { p.timedOut.Store(true) },
		Send: func(stream string, data []byte) { p.events <- procEvent{stream: stream, data: data} },
	}.Wait()
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		p.gone.Store(true) // not reaped normally: report it as a dead sandbox
	}
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

func syscallSignal(n int) syscall.Signal { return syscall.Signal(n) }
