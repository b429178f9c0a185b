package registrytest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the forwarder's connect to Verdaccio's socket.
const dialTimeout = 5 * time.Second

// forwarder copies each TCP connection it accepts to a new connection to a
// unix socket, byte for byte, so Verdaccio sees the client's own Host.
type forwarder struct {
	ln       net.Listener
	sock     string
	accepted atomic.Int64

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup // serve and every connection's copy
}

func newForwarder(ln net.Listener, sock string) *forwarder {
	f := &forwarder{ln: ln, sock: sock, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	return f
}

// serve accepts until close.
func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed; a transient accept error would end it too, failing the test loudly
		}
		f.accepted.Add(1)
		if !f.track(c) {
			return
		}
		f.wg.Add(1)
		go f.handle(c)
	}
}

// track registers c for close, or closes it when the forwarder is closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close() // dropping a connection that came too late
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}

func (f *forwarder) handle(c net.Conn) {
	defer f.wg.Done()
	defer f.untrack(c)
	defer c.Close()
	u, err := net.DialTimeout("unix", f.sock, dialTimeout)
	if err != nil {
		return // the client sees its connection closed
	}
	if !f.track(u) {
		return
	}
	defer f.untrack(u)
	defer u.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(u, c)
	}()
	pipe(c, u)
	<-done
}

// pipe copies src to dst, then half-closes dst so its reader sees the end.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		// A reset either side ends both: close the read side too.
		src.Close() // already failing
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() // the peer may be gone already
	}
}

// close stops accepting, cuts every open connection and waits for the
// copies to end.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close() // cutting it is the point
	}
	f.mu.Unlock()
	f.ln.Close() // only stops Accept
	f.wg.Wait()
}
