package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// hostListeners are the services of the worker's own network namespace
// that a pull request's install script must not reach: TCP on v4 and v6
// loopback, UDP on loopback, and an abstract unix socket. Each is checked
// after the run with a sentinel of the test's own: whatever a sandbox sent
// earlier would have been queued before it.
type hostListeners struct {
	tcp4, tcp6 net.Listener
	udp        net.PacketConn
	abstract   net.Listener
	name       string // the abstract socket's name, without the NUL
}

func listenHost(t *testing.T) *hostListeners {
	t.Helper()
	h := &hostListeners{}
	var err error
	if h.tcp4, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if h.tcp6, err = net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Fatal(err)
	}
	if h.udp, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h.name = "gilf-egress-test-" + hex.EncodeToString(b)
	if h.abstract, err = net.Listen("unix", "@"+h.name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.tcp4.Close()
		h.tcp6.Close()
		h.udp.Close()
		h.abstract.Close()
	})
	return h
}

func port(a net.Addr) int {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.Port
	case *net.UDPAddr:
		return a.Port
	}
	return 0
}

// assertUntouched connects to each listener itself and checks that its
// own connection (or datagram) is the first one there.
func (h *hostListeners) assertUntouched(t *testing.T) {
	t.Helper()
	for _, l := range []net.Listener{h.tcp4, h.tcp6, h.abstract} {
		c, err := net.Dial(l.Addr().Network(), l.Addr().String())
		if err != nil {
			t.Fatalf("sentinel dial %s: %v", l.Addr(), err)
		}
		if _, err := c.Write([]byte("sentinel")); err != nil {
			t.Fatal(err)
		}
		got, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if err := got.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		_, err = io.ReadFull(got, buf)
		got.Close()
		c.Close()
		if err != nil || string(buf) != "sentinel" {
			t.Errorf("%s %s: the first connection was not the test's own (%q, %v): the sandbox reached it", l.Addr().Network(), l.Addr(), buf, err)
		}
	}
	c, err := net.Dial("udp4", h.udp.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("sentinel")); err != nil {
		t.Fatal(err)
	}
	if err := h.udp.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _, err := h.udp.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "sentinel" {
		t.Errorf("udp: the first datagram was %q (%v): the sandbox reached it", buf[:n], err)
	}
}

// recordingDial dials only loopback addresses and records every address
// the proxy asked for: a refused destination must never be dialed.
type recordingDial struct {
	mu    sync.Mutex
	addrs []string
}

func (r *recordingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.addrs = append(r.addrs, addr)
	r.mu.Unlock()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		// Tests never send anything off this machine.
		return nil, fmt.Errorf("test dialer: %s is not loopback", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (r *recordingDial) dialed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.addrs...)
}

// probeScript is an install script doing what a hostile one would: reach
// the host's services directly, then through the proxy reach what the
// proxy must refuse, and one destination it must allow.
const egressProbeScript = `
const net = require("net"), dgram = require("dgram");
const [p4, p6, pu, abs, allowed, hostPort] = process.argv.slice(1);
const out = (k, v) => console.log(k + " " + v);
function tcp(name, opts) {
  return new Promise(res => {
    const s = net.connect(opts);
    s.setTimeout(5000, () => { out(name, "TIMEOUT"); s.destroy(); res(); });
    s.on("connect", () => { out(name, "CONNECTED"); s.end("from the sandbox"); res(); });
    s.on("error", e => { out(name, "ERR " + e.code); res(); });
  });
}
function udp() {
  return new Promise(res => {
    const s = dgram.createSocket("udp4");
    s.send("from the sandbox", +pu, "127.0.0.1", e => { out("udp", e ? "ERR " + e.code : "SENT"); s.close(); res(); });
  });
}
function connect(name, target, payload) {
  return new Promise(res => {
    const s = net.connect(3128, "127.0.0.1");
    let buf = "";
    s.setTimeout(10000, () => { out(name, "TIMEOUT"); s.destroy(); res(); });
    s.on("connect", () => s.write("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
    s.on("data", d => {
      buf += d;
      const i = buf.indexOf("\r\n\r\n");
      if (i < 0) return;
      const status = buf.slice(0, buf.indexOf("\r\n"));
      if (!/ 200 /.test(status)) { out(name, "STATUS " + status); s.destroy(); res(); return; }
      if (payload === undefined) { out(name, "TUNNEL"); s.destroy(); res(); return; }
      s.removeAllListeners("data");
      s.on("data", e => { out(name, "ECHO " + e); s.destroy(); res(); });
      s.write(payload);
    });
    s.on("error", e => { out(name, "ERR " + e.code); res(); });
  });
}
function get(name, url) {
  return new Promise(res => {
    const s = net.connect(3128, "127.0.0.1");
    let buf = "";
    s.on("connect", () => s.write("GET " + url + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    s.on("data", d => { buf += d; });
    s.on("end", () => { out(name, "STATUS " + buf.slice(0, buf.indexOf("\r\n"))); res(); });
    s.on("error", e => { out(name, "ERR " + e.code); res(); });
  });
}
(async () => {
  await tcp("tcp4", {host: "127.0.0.1", port: +p4});
  await tcp("tcp6", {host: "::1", port: +p6});
  await udp();
  await tcp("abstract", {path: "\0" + abs});
  await connect("private", "10.1.2.3:443");
  await connect("metadata", "169.254.169.254:80");
  await connect("private-name", "private.test:443");
  await connect("metadata-name", "metadata.test:80");
  await connect("localhost", "localhost:" + p4);
  await connect("host-loopback", "127.0.0.1:" + p4);
  await get("plain-http", "http://127.0.0.1:" + p4 + "/");
  await connect("allowed", "127.0.0.1:" + allowed, "ping");
})();
`

func TestInstallEgressIsTheProxyAlone(t *testing.T) {
	h := listenHost(t)
	// The one destination the proxy allows: a server answering "pong:"
	// and the 4 bytes it got.
	echo := serveLoopback(t, func(c net.Conn) {
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err == nil {
			c.Write(append([]byte("pong:"), buf...))
		}
	})
	p4, p6, pu, pe := port(h.tcp4.Addr()), port(h.tcp6.Addr()), port(h.udp.LocalAddr()), port(echo.Addr())
	rules, err := egress.ParseAllowList(fmt.Sprintf("127.0.0.1:%d,localhost:%d,private.test,metadata.test:80", pe, p4))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingDial{}
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "private.test":
			return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
		case "metadata.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "localhost":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
		}
		return nil, errors.New("no such host")
	}
	e := newExec(t, Options{Egress: EgressOptions{AllowHosts: rules, Resolve: resolve, Dial: rec.dial}})
	install := validation.Step{
		Name:    validation.StepInstall,
		Argv:    []string{"node", "-e", egressProbeScript, strconv.Itoa(p4), strconv.Itoa(p6), strconv.Itoa(pu), h.name, strconv.Itoa(pe), strconv.Itoa(p4)},
		Network: validation.NetworkRegistry,
		Timeout: time.Minute,
	}
	// A script step gets nothing, not even the proxy.
	test := validation.Step{Name: validation.StepTest, Argv: []string{"node", "-e", `
const s = require("net").connect(3128, "127.0.0.1");
s.on("connect", () => { console.log("proxy CONNECTED"); process.exit(0) });
s.on("error", e => { console.log("proxy ERR " + e.code + " socket " + require("fs").existsSync("/run/gilf/egress")); process.exit(3) });`}, Network: validation.NetworkNone, Timeout: time.Minute}
	res := runPlan(t, e, repo(t, nil), install, test)
	in := res.Steps[0]
	wantStatus(t, in, validation.StatusPassed)
	got := map[string]string{}
	for _, line := range strings.Split(in.Output.Head, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	for probe, want := range map[string]string{
		"tcp4":          "ERR ECONNREFUSED",
		"tcp6":          "ERR ",
		"udp":           "SENT", // into the sandbox's own loopback, where nobody listens
		"abstract":      "ERR ",
		"private":       "STATUS HTTP/1.1 403",
		"metadata":      "STATUS HTTP/1.1 403",
		"private-name":  "STATUS HTTP/1.1 403",
		"metadata-name": "STATUS HTTP/1.1 403",
		"localhost":     "STATUS HTTP/1.1 403",
		"host-loopback": "STATUS HTTP/1.1 403",
		"plain-http":    "STATUS HTTP/1.1 403",
		"allowed":       "ECHO pong:ping",
	} {
		if !strings.HasPrefix(got[probe], want) {
			t.Errorf("probe %s: %q, want %q", probe, got[probe], want)
		}
	}
	t.Logf("install output:\n%s", in.Output.Head)
	t.Logf("egress record: %+v", in.Egress)
	h.assertUntouched(t)

	eg := in.Egress
	if eg == nil || eg.Network != validation.NetworkRegistry || eg.Enforcement != validation.EnforcedByWorker || !eg.Observed {
		t.Fatalf("install egress record %+v", eg)
	}
	denied := map[string]string{}
	for _, d := range eg.Denied {
		denied[net.JoinHostPort(d.Host, strconv.Itoa(d.Port))] = d.Reason
	}
	for dest, reason := range map[string]string{
		"10.1.2.3:443":                  string(egress.ReasonNotAllowed),
		"169.254.169.254:80":            string(egress.ReasonNotAllowed),
		"private.test:443":              string(egress.ReasonPrivate),
		"metadata.test:80":              string(egress.ReasonLinkLocal),
		"localhost:" + strconv.Itoa(p4): string(egress.ReasonLoopback),
		"127.0.0.1:" + strconv.Itoa(p4): string(egress.ReasonNotAllowed),
	} {
		if denied[dest] != reason {
			t.Errorf("denial of %s: %q, want %q (all: %v)", dest, denied[dest], reason, denied)
		}
	}
	if len(eg.Allowed) != 1 || eg.Allowed[0].Port != pe || eg.Allowed[0].Connections != 1 || eg.Allowed[0].BytesOut != 4 || eg.Allowed[0].BytesIn != 9 {
		t.Errorf("allowed %+v, want one connection to the echo port with 4 bytes out and 9 in", eg.Allowed)
	}
	// Only the allowed destination was ever dialed.
	if d := rec.dialed(); len(d) != 1 || d[0] != echo.Addr().String() {
		t.Errorf("the proxy dialed %q, want only %s", d, echo.Addr())
	}
	if !strings.Contains(eg.Summary(), "registry via proxy: 1 host") || !strings.Contains(eg.Summary(), "denied") {
		t.Errorf("summary %q", eg.Summary())
	}

	ts := res.Steps[1]
	wantStatus(t, ts, validation.StatusFailed)
	if !strings.Contains(ts.Output.Head, "proxy ERR ECONNREFUSED socket false") {
		t.Errorf("test step reached a proxy, or saw its socket: %q", ts.Output.Head)
	}
	if ts.Egress == nil || ts.Egress.Network != validation.NetworkNone || len(ts.Egress.Allowed)+len(ts.Egress.Denied) != 0 {
		t.Errorf("test step egress %+v", ts.Egress)
	}
}

// An install step that asks for no network gets none, proxy included.
func TestInstallNetworkNone(t *testing.T) {
	e := newExec(t, Options{})
	res := runPlan(t, e, repo(t, nil), validation.Step{
		Name: validation.StepInstall, Network: validation.NetworkNone, Timeout: time.Minute,
		Argv: []string{"node", "-e", `const s = require("net").connect(3128, "127.0.0.1");
s.on("connect", () => process.exit(0)); s.on("error", e => { console.log("ERR " + e.code); process.exit(3) });`},
	})
	s := res.Steps[0]
	wantStatus(t, s, validation.StatusFailed)
	if s.Network != validation.NetworkNone || !strings.Contains(s.Output.Head, "ERR ECONNREFUSED") || s.Egress == nil || s.Egress.Enforcement != validation.EnforcedByKernel {
		t.Errorf("network %s egress %+v output %q", s.Network, s.Egress, s.Output.Head)
	}
}

// The bridge failing to start is gilf's failure, never the step's.
func TestBridgeFailureIsInfrastructure(t *testing.T) {
	e := newExec(t, Options{Egress: EgressOptions{BridgeBinary: "/bin/false"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.Run(ctx, executors.Request{Dir: repo(t, nil), Plan: validation.Plan{Steps: []validation.Step{{
		Name: validation.StepInstall, Network: validation.NetworkRegistry, Timeout: time.Minute, Argv: []string{"true"},
	}}}})
	if err == nil || !strings.Contains(err.Error(), "egress bridge did not start") {
		t.Fatalf("Run error %v, want the bridge's failure", err)
	}
	var r *validation.Refusal
	if errors.As(err, &r) {
		t.Errorf("a broken bridge is not a refusal: %v", err)
	}
}

// The install step's proxy serves InstallMaxConns connections at once; one
// more is turned away (503) and recorded as throttled, not as a denial:
// no policy refused it.
func TestInstallConnectionLimit(t *testing.T) {
	// An echo server: each connection stays open until its client ends.
	echo := serveLoopback(t, func(c net.Conn) { io.Copy(c, c) })
	pe := port(echo.Addr())
	rules, err := egress.ParseAllowList(fmt.Sprintf("127.0.0.1:%d", pe))
	if err != nil {
		t.Fatal(err)
	}
	e := newExec(t, Options{Egress: EgressOptions{AllowHosts: rules}})
	script := fmt.Sprintf(`
const net = require("net");
const n = %d, target = "127.0.0.1:%d", socks = [];
function open() {
  return new Promise(res => {
    const s = net.connect(3128, "127.0.0.1");
    let buf = "";
    s.on("connect", () => s.write("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
    s.on("data", d => { buf += d; if (buf.includes("\r\n\r\n")) { socks.push(s); res(buf.slice(9, 12)); } });
    s.on("error", e => res("ERR " + e.code));
    s.on("end", () => res(buf.slice(9, 12) || "EOF"));
  });
}
(async () => {
  const codes = [];
  for (let i = 0; i < n; i++) codes.push(await open());
  console.log("first " + codes.filter(c => c === "200").length);
  console.log("over " + await open());
  socks.forEach(s => s.destroy());
})();`, InstallMaxConns, pe)
	res := runPlan(t, e, repo(t, nil), validation.Step{Name: validation.StepInstall, Argv: []string{"node", "-e", script}, Network: validation.NetworkRegistry, Timeout: time.Minute})
	out := res.Steps[0].Output.Head
	if !strings.Contains(out, fmt.Sprintf("first %d\n", InstallMaxConns)) || !strings.Contains(out, "over 503") {
		t.Errorf("output:\n%s", out)
	}
	eg := res.Steps[0].Egress
	if eg.Throttled != 1 || len(eg.Denied) != 0 {
		t.Errorf("throttled %d, denied %+v: want 1 throttled, none denied", eg.Throttled, eg.Denied)
	}
	if s := eg.Summary(); !strings.Contains(s, "1 throttled") || strings.Contains(s, "denied") {
		t.Errorf("summary %q", s)
	}
}

// serveLoopback serves handle on a loopback listener until the test ends,
// one goroutine per connection, each connection closed after handle.
func serveLoopback(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l
}
