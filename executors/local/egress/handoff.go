package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/internal/logkey"
)

// The handoff: instead of copying a connection's bytes to the proxy, the
// bridge opens a connection to the proxy's unix socket and sends on it one
// message, the single byte handoffMarker with the connection's descriptor
// attached (SCM_RIGHTS), then closes its own copies. The proxy serves the
// TCP connection itself, so no byte passes through a process inside the
// sandbox and tunnels splice from TCP to TCP.
//
// Anything in the sandbox can connect to the socket and send anything, so
// the proxy takes a descriptor only as the whole first message (one byte,
// the marker, one descriptor, no other control data) and only when it is
// a TCP socket that is not listening: fstat says a socket, SO_TYPE
// SOCK_STREAM, SO_DOMAIN AF_INET or AF_INET6, SO_PROTOCOL IPPROTO_TCP,
// SO_ACCEPTCONN false. Everything else is closed and refused
// (ReasonBadRequest, no host). A first message with no descriptor is the
// start of a client speaking on the unix connection itself.

// handoffMarker is the byte a handoff message carries.
const handoffMarker byte = 0

// errBadHandoff is a first message that carried descriptors but is not a
// handoff the proxy takes.
var errBadHandoff = errors.New("bad handoff")

// handOff sends c's descriptor over u, with handoffMarker. The caller
// closes both after: the descriptor in flight keeps the socket open.
func handOff(u *net.UnixConn, c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return fmt.Errorf("hand off: a %T has no descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return fmt.Errorf("hand off: %w", err)
	}
	var werr error
	// Control keeps c's descriptor open while it runs, and needs no dup
	// (File would, and its Fd would switch the open file the sandbox's
	// client shares to blocking mode).
	cerr := rc.Control(func(fd uintptr) {
		_, _, werr = u.WriteMsgUnix([]byte{handoffMarker}, unix.UnixRights(int(fd)), nil)
	})
	if err := cmp.Or(cerr, werr); err != nil {
		return fmt.Errorf("hand off: %w", err)
	}
	return nil
}

// receiveHandoff reads the first message of a connection accepted on the
// proxy's unix socket: the descriptor it handed over, or (fd -1) the
// bytes a client speaking on u itself sent first. It never leaves a
// received descriptor open but the one it returns: a message that is not
// exactly a handoff yet carried descriptors has them closed and is
// errBadHandoff. Other errors are u's read error (the client left or
// stalled).
//
// Received descriptors are close-on-exec from the start: on Linux
// ReadMsgUnix receives with MSG_CMSG_CLOEXEC (readMsgFlags in
// net/unixsock_readmsg_cmsg_cloexec.go of the standard library), so no
// child the worker starts can inherit one.
func receiveHandoff(u *net.UnixConn) ([]byte, int, error) {
	b := make([]byte, 1)
	// Room for one descriptor's control data. (Alignment leaves room
	// for a second on 64-bit systems; more than one is refused all the
	// same, and the kernel closes what does not fit, setting
	// MSG_CTRUNC.)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := u.ReadMsgUnix(b, oob)
	fds, only := rights(oob[:oobn])
	switch {
	case len(fds) == 0 && flags&unix.MSG_CTRUNC == 0 && only:
		if err != nil {
			return nil, -1, err
		}
		return b[:n], -1, nil
	case len(fds) == 1 && flags&unix.MSG_CTRUNC == 0 && only && err == nil && n == 1 && b[0] == handoffMarker:
		return nil, fds[0], nil
	}
	closeAll(fds)
	return nil, -1, fmt.Errorf("%w: %d descriptors, %d bytes, flags %#x, control data not only SCM_RIGHTS: %t",
		errBadHandoff, len(fds), n, flags, !only)
}

// rights returns every descriptor in the control data oob, and whether
// oob held nothing but well-formed SCM_RIGHTS messages.
func rights(oob []byte) (fds []int, only bool) {
	only = true
	for len(oob) > 0 {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return fds, false
		}
		oob = rest
		if h.Level != unix.SOL_SOCKET || h.Type != unix.SCM_RIGHTS {
			only = false
			continue
		}
		got, err := unix.ParseUnixRights(&unix.SocketControlMessage{Header: h, Data: data})
		if err != nil {
			only = false
		}
		fds = append(fds, got...)
	}
	return fds, only
}

// closeAll closes received descriptors.
func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// handedConn validates a descriptor handed over from the sandbox and
// returns it as a TCP connection; fd is closed in every case (the
// connection holds a duplicate).
func handedConn(fd int) (*net.TCPConn, error) {
	if err := checkHandedSocket(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %w", errBadHandoff, err)
	}
	f := os.NewFile(uintptr(fd), "handoff")
	c, err := net.FileConn(f)
	f.Close() // a duplicate: closing it loses nothing
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadHandoff, err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("%w: a %T", errBadHandoff, c)
	}
	return tc, nil
}

// checkHandedSocket accepts only a TCP socket that is not listening.
func checkHandedSocket(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("not a socket (mode %#o)", st.Mode)
	}
	for _, o := range []struct {
		name string
		opt  int
		ok   func(int) bool
	}{
		{"SO_TYPE", unix.SO_TYPE, func(v int) bool { return v == unix.SOCK_STREAM }},
		{"SO_DOMAIN", unix.SO_DOMAIN, func(v int) bool { return v == unix.AF_INET || v == unix.AF_INET6 }},
		{"SO_PROTOCOL", unix.SO_PROTOCOL, func(v int) bool { return v == unix.IPPROTO_TCP }},
		{"SO_ACCEPTCONN", unix.SO_ACCEPTCONN, func(v int) bool { return v == 0 }},
	} {
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, o.opt)
		if err != nil {
			return fmt.Errorf("getsockopt %s: %w", o.name, err)
		}
		if !o.ok(v) {
			return fmt.Errorf("%s is %d", o.name, v)
		}
	}
	return nil
}

// client is the client connection c stands for, read by deadline: a
// connection accepted on a unix listener either hands over a TCP
// connection, which replaces it (tracked in its place, c closed, its
// watchdog started), or is the client itself, whose first bytes are
// returned to be read before the rest. The connection returned is the one
// to release, also with an error: errBadHandoff for a handoff refused
// (and recorded), another for a connection that left or stalled before
// its first byte, or Close. The watchdog, nil but for a handed-over
// connection, is the caller's to halt, in every case.
func (p *Proxy) client(ctx context.Context, c net.Conn, deadline time.Time) (net.Conn, []byte, *watchdog, error) {
	u, ok := c.(*net.UnixConn)
	if !ok {
		return c, nil, nil, nil
	}
	if err := u.SetReadDeadline(deadline); err != nil {
		return c, nil, nil, err
	}
	first, fd, err := receiveHandoff(u)
	switch {
	case err != nil:
		if errors.Is(err, errBadHandoff) {
			p.refuseHandoff(ctx, err)
		}
		return c, nil, nil, err
	case fd < 0:
		return c, first, nil, nil
	case p.tampered.Load():
		// This sandbox tampered with a socket before: take no more.
		closeAll([]int{fd})
		err := fmt.Errorf("%w: a socket of this sandbox was tampered with before", errBadHandoff)
		p.refuseHandoff(ctx, err)
		return c, nil, nil, err
	}
	tc, err := handedConn(fd)
	if err != nil {
		p.refuseHandoff(ctx, err)
		return c, nil, nil, err
	}
	if !p.swap(c, tc) {
		return c, nil, nil, net.ErrClosed
	}
	c.Close() // the bridge's connection: done with
	return tc, nil, p.watch(ctx, tc), nil
}

// refuseHandoff records a refused handoff, unless Close has begun.
func (p *Proxy) refuseHandoff(ctx context.Context, err error) {
	if p.isClosed() {
		return
	}
	p.cfg.Log.LogAttrs(ctx, slog.LevelDebug, "egress handoff", slog.String(logkey.Err, err.Error()))
	p.deny(ctx, "", 0, ReasonBadRequest)
}

// swap tracks the connection handed over on old in its place. After
// Close it closes handed instead and reports false.
func (p *Proxy) swap(old, handed net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		handed.Close()
		return false
	}
	delete(p.conns, old)
	p.conns[handed] = struct{}{}
	return true
}

// hangUp shuts c down both ways, then closes it. A connection handed over
// from the sandbox shares its open file with whatever else there still
// holds it, which can switch it to blocking mode: a read or write then
// waits in the kernel, where neither a deadline nor Close reaches it, but
// shutdown(2) still ends it. (Its watchdog notices the switch and calls
// hangUp itself.)
func hangUp(c net.Conn) {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
		}
	}
	c.Close()
}
