package egress

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/internal/logkey"
)

// The watchdog of a handed-over connection. The descriptor the bridge
// hands over shares its open file with whatever in the sandbox kept a
// copy, and the file status flags belong to the open file: code in the
// sandbox can clear O_NONBLOCK behind the proxy's back. The proxy's reads
// and writes of the connection then wait in the kernel, where no deadline
// reaches them (the runtime enforces HeaderTimeout and IdleTimeout only
// while it waits in its poller), and each one holds an OS thread as well
// as a goroutine until the connection ends. Enough of them would take the worker to the runtime's
// thread limit, which kills the process.
//
// So every BlockingCheckInterval the watchdog reads the connection's file
// status flags (fcntl F_GETFL, on the connection's own descriptor through
// its RawConn: never a duplicate, never past the connection's life), and
// the first time O_NONBLOCK is clear it takes the client for hostile: it
// records a refusal (ReasonTampered), shuts the connection down, which
// wakes any read or write waiting in the kernel, closes it, and hangs up
// the tunnel's upstream, if any, so both of the tunnel's directions end.
// A plain-HTTP request in flight then ends at its next read or write of
// the client, or when the upstream answers or idles, as for a client that
// went away; none of that waits in the kernel.
//
// The window: between the clearing and the next check (at most one
// interval) a read or write of the connection may still wait in the
// kernel and hold a thread: at most one per goroutine serving the
// connection, which is one, or two in a tunnel (one each way), each
// released by the check's shutdown. That is accepted. It bounds how long
// a thread is held, not how many: a sandbox that keeps opening
// connections and clearing each can have that many waiting per open
// connection (MaxConns of them served, and as many being refused), but
// none past its connection's next check, where before they waited until
// Close.
//
// The check sees the flag, not the wait: code that clears O_NONBLOCK and
// sets it again between two checks can leave a read or write that began
// in between waiting in the kernel until data, the peer's end, or Close.
// Once any watchdog of a proxy has fired, the proxy takes no further
// handoff from that sandbox (Proxy.tampered): only hostile code clears
// the flag, so the toggling game ends at its first lost round.
//
// Direct clients on the unix socket need none: the proxy's end of that
// socket is its own open file, which no one in the sandbox holds.
type watchdog struct {
	p    *Proxy
	c    *net.TCPConn
	stop chan struct{} // closed by halt
	done chan struct{} // closed when the goroutine ends

	mu       sync.Mutex
	fired    bool
	dest     hostPort // what the connection last asked for
	upstream net.Conn // the tunnel's, hung up too when the watchdog fires
}

// watch starts the watchdog of c, a connection handed over from the
// sandbox, on a goroutine Close waits for; halt stops it. It ends by
// itself when c is closed or Close begins.
func (p *Proxy) watch(ctx context.Context, c *net.TCPConn) *watchdog {
	w := &watchdog{p: p, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	p.spawn(func() {
		defer close(w.done)
		w.run(ctx)
	})
	return w
}

// run checks c every BlockingCheckInterval until it fires, c is closed,
// halt or Close.
func (w *watchdog) run(ctx context.Context) {
	t := time.NewTicker(w.p.cfg.BlockingCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rc, err := w.c.SyscallConn()
		if err != nil {
			return
		}
		var flags int
		var ferr error
		if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
			return // closed: the connection is over
		}
		switch {
		case ferr != nil:
			// Not seen on an open descriptor; a connection that
			// cannot be checked is not served.
			w.p.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "egress watchdog", slog.String(logkey.Err, ferr.Error()))
			w.hangUp()
			return
		case flags&unix.O_NONBLOCK == 0:
			w.fire(ctx)
			return
		}
	}
}

// fire records the tampering, unless Close has begun, then hangs up. The
// record comes first, so whoever sees the connection end finds it.
func (w *watchdog) fire(ctx context.Context) {
	w.mu.Lock()
	dest := w.dest
	w.mu.Unlock()
	w.p.tampered.Store(true)
	if !w.p.isClosed() {
		w.p.deny(ctx, dest.host, dest.port, ReasonTampered)
	}
	w.hangUp()
}

// hangUp hangs up c and the upstream, and any upstream set after.
func (w *watchdog) hangUp() {
	w.mu.Lock()
	w.fired = true
	up := w.upstream
	w.upstream = nil
	w.mu.Unlock()
	hangUp(w.c)
	if up != nil {
		hangUp(up)
	}
}

// halt stops the watchdog and waits for its goroutine. A nil watchdog
// (a direct client) has nothing to stop.
func (w *watchdog) halt() {
	if w == nil {
		return
	}
	close(w.stop)
	<-w.done
}

// setDest notes the destination the connection asks for now, recorded
// should the watchdog fire. A nil watchdog ignores it.
func (w *watchdog) setDest(host string, port int) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.dest = hostPort{host, port}
	w.mu.Unlock()
}

// also has the watchdog hang up up, a tunnel's upstream, with the
// client; once it has fired, up is hung up at once. A nil watchdog
// ignores it.
func (w *watchdog) also(up net.Conn) {
	if w == nil {
		return
	}
	w.mu.Lock()
	fired := w.fired
	if !fired {
		w.upstream = up
	}
	w.mu.Unlock()
	if fired {
		hangUp(up)
	}
}
