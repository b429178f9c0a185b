package egress

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"
)

// benchBytes is what each transfer of the throughput benchmarks moves.
const benchBytes = 100 << 20

// streamServer is a loopback upstream that sends benchBytes to each
// connection, then closes it.
func streamServer(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	serveConns(b, l, func(c net.Conn) {
		for sent := 0; sent < benchBytes; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	return l.Addr().String()
}

// drain reads c to its end through one large buffer and fails unless it
// got exactly benchBytes.
func drain(b *testing.B, c net.Conn) {
	b.Helper()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		m, err := c.Read(buf)
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if n != benchBytes {
		b.Fatalf("read %d bytes, want %d", n, benchBytes)
	}
}

// connectHead is the proxy's whole answer to an allowed CONNECT.
const connectHead = "HTTP/1.1 200 Connection established\r\n\r\n"

// tunnelDownload opens a tunnel to upstream over c and downloads from it.
func tunnelDownload(b *testing.B, c net.Conn, upstream string) {
	b.Helper()
	if _, err := io.WriteString(c, "CONNECT "+upstream+" HTTP/1.1\r\nHost: "+upstream+"\r\n\r\n"); err != nil {
		b.Fatal(err)
	}
	h := make([]byte, len(connectHead))
	if _, err := io.ReadFull(c, h); err != nil || string(h) != connectHead {
		b.Fatalf("CONNECT answered %q, %v", h, err)
	}
	drain(b, c)
}

func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}

func mbps(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(benchBytes) / (1 << 20) / s[len(s)/2].Seconds()
}

// bareRelay is the least any relay does: it accepts on a fresh listener
// of network and copies from its own connection to dialAddr into each
// accepted one (splicing, as the proxy does), nothing else. It is the
// floor the proxy is measured against: on a host with few CPUs the extra
// hop itself, not the proxy, costs most of the direct rate.
func bareRelay(b *testing.B, network, dialNetwork, dialAddr string) string {
	b.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = shortSocket(b)
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		b.Fatal(err)
	}
	serveConns(b, l, func(c net.Conn) {
		u, err := net.Dial(dialNetwork, dialAddr)
		if err != nil {
			return
		}
		defer u.Close()
		io.Copy(c, u)
	})
	return l.Addr().String()
}

// download times one download of benchBytes from network, addr; when
// tunnel is set, through a CONNECT to it first.
func download(b *testing.B, network, addr, tunnel string) time.Duration {
	return timed(func() {
		c, err := net.Dial(network, addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if tunnel != "" {
			tunnelDownload(b, c, tunnel)
		} else {
			drain(b, c)
		}
	})
}

// benchProxy serves a proxy permitting upstream on a unix socket.
func benchProxy(b *testing.B, upstream string) *testProxy {
	b.Helper()
	return startProxy(b, Config{Rules: rules(b, upstream), Log: slog.New(slog.DiscardHandler)}, nil)
}

// BenchmarkProxyThroughput downloads benchBytes from a loopback upstream
// directly, through the proxy (client on the proxy's unix socket,
// CONNECT, TCP upstream), and through a bare splicing relay on the same
// path, in turn in each iteration so host noise hits all alike. Metrics:
// the median MB/s of each; ratio is proxy/direct, relay-ratio
// proxy/relay (the proxy's own cost).
func BenchmarkProxyThroughput(b *testing.B) {
	upstream := streamServer(b)
	tp := benchProxy(b, upstream)
	relay := bareRelay(b, "unix", "tcp", upstream)
	var direct, proxied, relayed []time.Duration
	for b.Loop() {
		direct = append(direct, download(b, "tcp", upstream, ""))
		proxied = append(proxied, download(b, "unix", tp.socket, upstream))
		relayed = append(relayed, download(b, "unix", relay, ""))
	}
	d, p, r := mbps(direct), mbps(proxied), mbps(relayed)
	b.ReportMetric(d, "direct-MB/s")
	b.ReportMetric(p, "proxy-MB/s")
	b.ReportMetric(r, "relay-MB/s")
	b.ReportMetric(p/d, "ratio")
	b.ReportMetric(p/r, "relay-ratio")
}

// BenchmarkBridgeThroughput is BenchmarkProxyThroughput through the path
// the sandbox uses: TCP to the bridge's forwarder, which hands the
// connection over to the proxy on its unix socket, and TCP upstream, so
// the proxy splices TCP to TCP. The bare baseline is one bare relay, TCP
// to TCP: after the handoff the bridge is no hop at all.
func BenchmarkBridgeThroughput(b *testing.B) {
	upstream := streamServer(b)
	tp := benchProxy(b, upstream)
	f := newForwarder(tp.socket, io.Discard)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	f.start(l)
	b.Cleanup(f.close)
	relay := bareRelay(b, "tcp", "tcp", upstream)
	var direct, bridged, relayed []time.Duration
	for b.Loop() {
		direct = append(direct, download(b, "tcp", upstream, ""))
		bridged = append(bridged, download(b, "tcp", l.Addr().String(), upstream))
		relayed = append(relayed, download(b, "tcp", relay, ""))
	}
	d, br, r := mbps(direct), mbps(bridged), mbps(relayed)
	b.ReportMetric(d, "direct-MB/s")
	b.ReportMetric(br, "bridge-MB/s")
	b.ReportMetric(r, "relay-MB/s")
	b.ReportMetric(br/d, "ratio")
	b.ReportMetric(br/r, "relay-ratio")
}
