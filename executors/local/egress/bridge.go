package egress

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors/internal/descriptors"
)

// BridgeArg is the hidden subcommand of the gilf binary that runs the
// bridge in front of a step:
//
//	gilf __gilf-egress-bridge --listen 127.0.0.1:3128 --socket /run/gilf/egress.sock --ready-fd 3 -- npm ci
const BridgeArg = "__gilf-egress-bridge"

// SandboxProxyAddr is where the bridge listens inside the sandbox: the
// HTTP_PROXY the step is given.
const SandboxProxyAddr = "127.0.0.1:3128"

// Facts of the bridge.
const (
	// BridgeExitFailure is the bridge's exit code when it failed itself
	// (bad usage, cannot listen, cannot start the step), like env(1)'s.
	BridgeExitFailure = 125
	// BridgeReady is what the bridge writes to its ready descriptor once
	// it listens, before it starts the step.
	BridgeReady = "ready\n"
	// BridgeDialTimeout bounds the connection to the proxy's socket.
	BridgeDialTimeout = 10 * time.Second
)

// BridgeArgv returns the argv that runs the bridge binary at bin (its path
// inside the sandbox) in front of step: listening on SandboxProxyAddr,
// forwarding to the proxy's unix socket at socket (inside the sandbox),
// telling the host it is ready on descriptor readyFD (none when not
// positive).
func BridgeArgv(bin, socket string, readyFD int, step []string) []string {
	a := []string{bin, BridgeArg, "--listen", SandboxProxyAddr, "--socket", socket}
	if readyFD > 0 {
		a = append(a, "--ready-fd", strconv.Itoa(readyFD))
	}
	a = append(a, "--")
	return append(a, step...)
}

// MaybeRunBridge runs the bridge and exits when os.Args[1] is BridgeArg;
// otherwise it returns. main, and TestMain of packages that run the
// sandbox, call it first.
func MaybeRunBridge() {
	if len(os.Args) > 1 && os.Args[1] == BridgeArg {
		os.Exit(BridgeMain(os.Args[2:]))
	}
}

// BridgeMain is the bridge's whole program (args are what follows
// BridgeArg) and returns its exit code. It listens on --listen, writes
// BridgeReady to --ready-fd and closes it, starts the step (the argv after
// the flags, looked up in $PATH, with the bridge's own environment,
// stdin, stdout and stderr) and hands every TCP connection it accepts over
// to the proxy: on its own connection to the unix socket --socket it
// sends the accepted socket's descriptor (SCM_RIGHTS, with one marker
// byte) and closes its copies. The proxy then reads and writes the TCP
// connection itself, so the bytes no longer pass through a process
// inside the sandbox (a second hop that halved throughput), and a tunnel
// splices from TCP to TCP. Since anything in the sandbox can send any
// descriptor on that socket, the proxy checks what it receives (see
// Proxy.Serve). A connection the bridge cannot hand over is closed (no
// proxy) or reset (the send failed), and that said on stderr once.
//
// It ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT (the host signals the
// step's processes itself; the step's exit decides) and returns the
// step's exit code, or 128+N when a signal N killed it.
//
// When it fails itself (bad usage, cannot listen, no such command) it
// says so in one line on stderr and returns BridgeExitFailure before it
// writes to the ready descriptor, so the host can tell its failure from
// the step's. Only a command that is found but cannot be executed fails
// after the ready line.
//
// It makes itself undumpable first (PR_SET_DUMPABLE 0), before anything
// of the step runs: the step shares its uid, and a dumpable bridge would
// let it write the bridge's memory through /proc/N/mem or take its
// descriptors with pidfd_getfd. The step it starts is dumpable again (exec
// resets it).
func BridgeMain(args []string) int {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return bridgeFail(fmt.Errorf("undumpable: %w", err))
	}
	// Caught, not ignored: an ignored signal would stay ignored in the
	// step after exec; a caught one is reset to its default there.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	fs := flag.NewFlagSet(BridgeArg, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	listen := fs.String("listen", SandboxProxyAddr, "TCP `address` to listen on")
	socket := fs.String("socket", "", "the proxy's unix socket `path`")
	readyFD := fs.Int("ready-fd", 0, "`descriptor` to write the ready line to (0: none)")
	if err := fs.Parse(args); err != nil {
		return BridgeExitFailure
	}
	step := fs.Args()
	switch {
	case *socket == "":
		return bridgeFail(errors.New("--socket is required"))
	case len(step) == 0:
		return bridgeFail(errors.New("no command after the flags"))
	case *readyFD < 0 || (*readyFD > 0 && *readyFD <= 2):
		return bridgeFail(errors.New("--ready-fd must be above 2"))
	}
	path, err := exec.LookPath(step[0])
	if err != nil {
		return bridgeFail(err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return bridgeFail(err)
	}
	f := newForwarder(*socket, os.Stderr)
	f.start(l)
	defer f.close()
	if *readyFD > 0 {
		if err := writeReady(*readyFD); err != nil {
			return bridgeFail(err)
		}
	}
	if err := descriptors.CloseOnExecFrom(3); err != nil {
		return bridgeFail(err)
	}
	cmd := &exec.Cmd{Path: path, Args: step, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		return bridgeFail(err)
	}
	return exitCode(cmd.Wait())
}

// bridgeFail prints the bridge's own failure and returns its exit code.
func bridgeFail(err error) int {
	fmt.Fprintf(os.Stderr, "gilf egress bridge: %v\n", err)
	return BridgeExitFailure
}

// writeReady writes the ready line to fd and closes it, so the step
// never inherits it.
func writeReady(fd int) error {
	f := os.NewFile(uintptr(fd), "ready-fd")
	if f == nil {
		return fmt.Errorf("ready fd %d is not open", fd)
	}
	_, err := io.WriteString(f, BridgeReady)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ready fd %d: %w", fd, err)
	}
	return nil
}

// exitCode is the bridge's exit code for the step's wait result.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return bridgeFail(err)
}

// forwarder hands each TCP connection it accepts over to the proxy on
// the unix socket: one unix connection each, which carries the accepted
// socket's descriptor (handOff), and no byte of the connection. It has no
// limits of its own: the proxy behind the socket has them.
type forwarder struct {
	socket string
	stderr io.Writer
	dialer net.Dialer
	warn   sync.Once

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// newForwarder returns a forwarder to the unix socket at socket; it
// says on stderr, once, when a connection cannot be handed over.
func newForwarder(socket string, stderr io.Writer) *forwarder {
	return &forwarder{
		socket:    socket,
		stderr:    stderr,
		dialer:    net.Dialer{Timeout: BridgeDialTimeout},
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}
}

// start accepts on l, on a goroutine close waits for, until l is
// closed; close closes it.
func (f *forwarder) start(l net.Listener) {
	if !f.track(nil, l) {
		return
	}
	f.spawn(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				if transientAccept(err) {
					time.Sleep(acceptPauseMax / 100)
					continue
				}
				return
			}
			if !f.track(c, nil) {
				return
			}
			f.spawn(func() { f.forward(c) })
		}
	})
}

// forward hands one connection over to the proxy on its own connection
// to the socket, then closes its copies of both. When the socket cannot
// be reached c is closed; when the handoff fails it is reset.
func (f *forwarder) forward(c net.Conn) {
	defer f.drop(c)
	u, err := f.dialer.Dial("unix", f.socket)
	if err != nil {
		f.say(err)
		return
	}
	if !f.track(u, nil) {
		return
	}
	defer f.drop(u)
	if err := u.SetWriteDeadline(time.Now().Add(BridgeDialTimeout)); err != nil {
		f.say(err)
		return
	}
	if err := handOff(u.(*net.UnixConn), c); err != nil {
		// A reset: the client sees its connection refused rather
		// than an empty answer.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		f.say(err)
	}
}

// say tells stderr why a connection could not be handed over, the first
// time: a step's every connection failing would flood its output.
func (f *forwarder) say(err error) {
	f.warn.Do(func() { fmt.Fprintf(f.stderr, "gilf egress bridge: proxy: %v\n", err) })
}

// track registers a connection or listener so close closes it; after
// close it closes it instead and reports false.
func (f *forwarder) track(c net.Conn, l net.Listener) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		if c != nil {
			c.Close()
		}
		if l != nil {
			l.Close()
		}
		return false
	}
	if c != nil {
		f.conns[c] = struct{}{}
	}
	if l != nil {
		f.listeners[l] = struct{}{}
	}
	return true
}

// drop closes a tracked connection and forgets it.
func (f *forwarder) drop(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

// spawn runs fn on a goroutine close waits for.
func (f *forwarder) spawn(fn func()) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
}

// close closes every listener and connection and waits for every
// forwarding goroutine.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	ls, cs := f.listeners, f.conns
	f.listeners, f.conns = map[net.Listener]struct{}{}, map[net.Conn]struct{}{}
	f.mu.Unlock()
	for l := range ls {
		l.Close()
	}
	for c := range cs {
		c.Close()
	}
	f.wg.Wait()
}
