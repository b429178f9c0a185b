package local

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The proof that a step ran inside its sandbox. An exit status of 0 from
// bwrap says nothing by itself: a bwrap that is not bubblewrap (a stand-in,
// a wrapper that gave up, a broken install) can exit 0 having run nothing.
// A sandboxed step counts only when gilf saw both of:
//
//   - bwrap's own report on --info-fd: the pid of the sandbox's first
//     process, which exists only once bwrap has made its namespaces;
//   - the step's token, from the sandbox's first process (startShim): the
//     worker writes a fresh random token on a pipe only that process reads
//     (never in an argv or the environment, so nothing the step runs could
//     have known it), and the shim writes it back on another pipe, with
//     its own pid, before it runs the step. The pid must be 2, the first
//     child of the sandbox's init (pid1.go) in a new pid namespace.
//
// A step without both fails as gilf's own error, SetupError
// (sandbox_setup_failed), never as a result: not a pass, not a failure of
// the pull request's.

// CodeSandboxSetupFailed names a sandbox that could not be set up, or
// never proved that it ran the step.
const CodeSandboxSetupFailed = "sandbox_setup_failed"

// sandboxStepPid is the pid the sandbox's first process has in its own pid
// namespace: the sandbox's init (pid1.go) is 1.
const sandboxStepPid = 2

// proofMaxBytes bounds what gilf reads from the start and info pipes.
const proofMaxBytes = 64 << 10

// SetupError is a step whose sandbox could not be set up or did not prove
// that it ran the step: gilf's own failure, whatever the step's exit
// status. Code is CodeSandboxSetupFailed.
type SetupError struct {
	Step  string
	Cause error
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("%s: step %s: %v", CodeSandboxSetupFailed, e.Step, e.Cause)
}

func (e *SetupError) Unwrap() error { return e.Cause }

// Code is CodeSandboxSetupFailed.
func (e *SetupError) Code() string { return CodeSandboxSetupFailed }

// startShim is the sandbox's first process: $1 is the guard descriptor (0:
// none), $2 the token descriptor and $3 the start descriptor (0: none),
// then the step's argv. With a guard it waits for the worker's go-ahead
// (cgroup v1 placement), exiting 125 at EOF; then it copies the token to
// the start descriptor with its pid, closes every descriptor it was given
// and execs the step (never a shell string).
const startShim = `__gilf_g=$1 __gilf_k=$2 __gilf_s=$3; shift 3
if [ "$__gilf_g" != 0 ]; then eval "read -r _ <&$__gilf_g" || exit 125; eval "exec $__gilf_g<&-"; fi
if [ "$__gilf_k" != 0 ]; then eval "read -r __gilf_t <&$__gilf_k" || exit 125; eval "exec $__gilf_k<&-"
eval "printf '%s %s\n' \"\$__gilf_t\" \$\$ >&$__gilf_s" || exit 125; eval "exec $__gilf_s>&-"; fi
unset __gilf_g __gilf_k __gilf_s __gilf_t; exec "$@"`

// startArgv wraps argv in startShim (descriptors of 0 are none).
func startArgv(guardFD, tokenFD, startFD int, argv []string) []string {
	if tokenFD <= 0 || startFD <= 0 {
		tokenFD, startFD = 0, 0
	}
	return append([]string{"/bin/sh", "-c", startShim, "gilf-start",
		strconv.Itoa(guardFD), strconv.Itoa(tokenFD), strconv.Itoa(startFD)}, argv...)
}

// guardArgv wraps argv in startShim with only a guard on descriptor fd.
func guardArgv(fd int, argv []string) []string { return startArgv(fd, 0, 0, argv) }

// proof holds the pipes of one sandboxed step's proof.
type proof struct {
	token          string
	tokenR, tokenW *os.File
	startR, startW *os.File
	// started yields what the shim wrote, once every copy of startW is
	// closed.
	started <-chan []byte
	// info yields what bwrap wrote on --info-fd (cgroup v2; under v1
	// place reads it itself and sets childPid).
	info     <-chan []byte
	childPid int
}

// open makes the token and both pipes, with the token already written.
func (p *proof) open() error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("step token: %w", err)
	}
	p.token = hex.EncodeToString(b)
	var err error
	if p.tokenR, p.tokenW, err = os.Pipe(); err != nil {
		return fmt.Errorf("token pipe: %w", err)
	}
	if p.startR, p.startW, err = os.Pipe(); err != nil {
		return fmt.Errorf("start pipe: %w", err)
	}
	// Far below a pipe's buffer: the write does not block.
	if _, err := io.WriteString(p.tokenW, p.token+"\n"); err != nil {
		return fmt.Errorf("token pipe: %w", err)
	}
	if err := p.tokenW.Close(); err != nil {
		return fmt.Errorf("token pipe: %w", err)
	}
	p.tokenW = nil
	return nil
}

// check reports why the step did not prove that it ran in its sandbox,
// nil when it did. By now every process of the step is dead.
func (p *proof) check() error {
	if p.info != nil {
		var info struct {
			ChildPid int `json:"child-pid"`
		}
		b := drained(p.info)
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&info); err != nil {
			return fmt.Errorf("bwrap reported no sandbox on --info-fd (%q)", firstLine(string(b)))
		}
		p.childPid = info.ChildPid
	}
	if p.childPid <= 0 {
		return errors.New("bwrap reported no sandbox process on --info-fd")
	}
	got := string(drained(p.started))
	line, _, _ := strings.Cut(got, "\n")
	tok, pid, _ := strings.Cut(line, " ")
	if tok != p.token {
		return errors.New("the sandbox's first process never started: its token did not come back")
	}
	if pid != strconv.Itoa(sandboxStepPid) {
		return fmt.Errorf("the step's first process has pid %q, not %d in a pid namespace of its own", firstLine(pid), sandboxStepPid)
	}
	return nil
}

// watchPipe reads r to its end (at most limit bytes) in the background.
func watchPipe(r *os.File, limit int64) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, limit)) // an error leaves what was read: checked by the caller
		ch <- b
	}()
	return ch
}

// drained returns what a watched pipe yielded. By now every process of the
// step is dead, so the pipe is at its end; the bound only guards a
// descriptor that escaped every kill.
func drained(ch <-chan []byte) []byte {
	select {
	case b := <-ch:
		return b
	case <-time.After(OutputDrainTimeout):
		return nil
	}
}

// memFile returns an anonymous file holding data, positioned at its start,
// for a child to read (bwrap's --args and --seccomp).
func memFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// argsFile holds bwrap's options, NUL-separated, for --args.
func argsFile(options []string) (*os.File, error) {
	var b bytes.Buffer
	for _, a := range options {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return memFile("gilf-bwrap-args", b.Bytes())
}
