package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestBridgeArgv(t *testing.T) {
	got := BridgeArgv("/run/gilf/egress-bridge", "/run/gilf/egress/proxy.sock", 3, []string{"npm", "ci", "--ignore-scripts=false"})
	want := []string{
		"/run/gilf/egress-bridge", "__gilf-egress-bridge",
		"--listen", "127.0.0.1:3128",
		"--socket", "/run/gilf/egress/proxy.sock",
		"--ready-fd", "3",
		"--", "npm", "ci", "--ignore-scripts=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	got = BridgeArgv("/b", "/s", 0, []string{"--looks-like-a-flag"})
	want = []string{"/b", BridgeArg, "--listen", SandboxProxyAddr, "--socket", "/s", "--", "--looks-like-a-flag"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("argv without ready fd (-want +got):\n%s", diff)
	}
}

// freeAddr is a loopback address nothing listens on, for a bridge's
// --listen.
func freeAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(closedPort(t))
}

// bridgeCmd is the test binary run as the bridge, in front of step.
func bridgeCmd(t *testing.T, listen, socket string, readyFD int, step ...string) *exec.Cmd {
	t.Helper()
	args := []string{BridgeArg, "--listen", listen, "--socket", socket}
	if readyFD > 0 {
		args = append(args, "--ready-fd", strconv.Itoa(readyFD))
	}
	args = append(append(args, "--"), step...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.WaitDelay = waitLimit
	return cmd
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	ee, ok := errors.AsType[*exec.ExitError](err)
	if !ok {
		t.Fatalf("run bridge: %v", err)
	}
	return ee.ExitCode()
}

// The step's exit decides the bridge's: its code, or 128+N for a signal.
func TestBridgeExitCodes(t *testing.T) {
	for _, tt := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -9 $$", 128 + 9},
		{"kill -TERM $$; sleep 5", 128 + 15}, // SIGTERM is not ignored in the step
	} {
		t.Run(tt.script, func(t *testing.T) {
			cmd := bridgeCmd(t, freeAddr(t), "/nonexistent.sock", 0, "sh", "-c", tt.script)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if got := exitStatus(t, cmd.Run()); got != tt.want {
				t.Errorf("exit %d, want %d; stderr %q", got, tt.want, stderr.String())
			}
		})
	}
}

// The ready line is written before the step starts, and the step
// inherits neither the ready descriptor nor the listener.
func TestBridgeReadyBeforeStep(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Read-write: the open does not wait, and the FIFO keeps what is
	// written to it while the test holds it.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := bridgeCmd(t, freeAddr(t), "/nonexistent.sock", 3, os.Args[0], fifo)
	cmd.Env = append(os.Environ(), helperEnv+"=ready-probe")
	cmd.ExtraFiles = []*os.File{f}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if code := exitStatus(t, err); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, stderr.String())
	}
	if diff := cmp.Diff("fifo: \"ready\\n\"\n", string(out)); diff != "" {
		t.Errorf("step saw (-want +got):\n%s", diff)
	}
}

// When the bridge cannot listen it fails with 125, one line on stderr,
// nothing on the ready descriptor, and never starts the step; so for a
// command it cannot find, and for bad usage.
func TestBridgeOwnFailures(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := freeAddr(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"address in use", []string{"--listen", busy.Addr().String(), "--socket", "/s", "--ready-fd", "3", "--", "sh", "-c", "echo ran"}},
		{"no such command", []string{"--listen", free, "--socket", "/s", "--ready-fd", "3", "--", "gilf-no-such-command"}},
		{"no socket", []string{"--listen", free, "--ready-fd", "3", "--", "sh", "-c", "echo ran"}},
		{"no command", []string{"--listen", free, "--socket", "/s", "--ready-fd", "3", "--"}},
		{"unknown flag", []string{"--listen", free, "--socket", "/s", "--ready-fd", "3", "--bogus", "--", "sh", "-c", "echo ran"}},
		{"ready fd is stdout", []string{"--listen", free, "--socket", "/s", "--ready-fd", "1", "--", "sh", "-c", "echo ran"}},
		{"bad listen address", []string{"--listen", "not an address", "--socket", "/s", "--ready-fd", "3", "--", "sh", "-c", "echo ran"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command(os.Args[0], append([]string{BridgeArg}, tt.args...)...)
			cmd.ExtraFiles = []*os.File{w}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Start()
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if code := exitStatus(t, cmd.Wait()); code != BridgeExitFailure {
				t.Errorf("exit %d, want %d", code, BridgeExitFailure)
			}
			ready, err := io.ReadAll(r)
			if err != nil || len(ready) != 0 {
				t.Errorf("ready descriptor got %q, %v", ready, err)
			}
			if stdout.Len() != 0 {
				t.Errorf("the step ran: %q", stdout.String())
			}
			msg := stderr.String()
			if !strings.Contains(msg, "gilf egress bridge: ") && !strings.Contains(msg, "flag provided but not defined") {
				t.Errorf("stderr %q", msg)
			}
			if strings.HasPrefix(msg, "gilf egress bridge: ") && strings.Count(msg, "\n") != 1 {
				t.Errorf("stderr is not one line: %q", msg)
			}
		})
	}
}

// A connection to the bridge is handed over on the unix socket: the TCP
// connection itself arrives there, bytes both ways with half-close;
// signals sent to the bridge itself do not end it.
func TestBridgeForwards(t *testing.T) {
	sock := shortSocket(t)
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ul.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		first, fd, err := receiveHandoff(c.(*net.UnixConn))
		if err != nil || fd < 0 {
			t.Errorf("no handoff: %q, %v", first, err)
			return
		}
		tc, err := handedConn(fd)
		if err != nil {
			t.Error(err)
			return
		}
		defer tc.Close()
		got, _ := io.ReadAll(tc) // until the client half-closes
		tc.Write(append([]byte("got:"), got...))
	})

	listen := freeAddr(t)
	ready, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	stdin, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	cmd := bridgeCmd(t, listen, sock, 3, "sh", "-c", "read line; exit 4")
	cmd.ExtraFiles = []*os.File{rw}
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	stdin.Close()
	line, err := bufio.NewReader(ready).ReadString('\n')
	if err != nil || line != BridgeReady {
		t.Fatalf("ready line %q, %v; stderr %q", line, err, stderr.String())
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}

	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(c, "hello through the bridge"); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got:hello through the bridge" {
		t.Errorf("got %q, %v", got, err)
	}

	io.WriteString(sw, "done\n")
	if code := exitStatus(t, cmd.Wait()); code != 4 {
		t.Errorf("exit %d, want the step's 4; stderr %q", code, stderr.String())
	}
}

// The bridge's forwarder in front of a real proxy: the path the sandbox
// uses, TCP to the bridge, unix socket to the proxy, TCP upstream.
func TestBridgeToProxy(t *testing.T) {
	port, _ := echoServer(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(port)
	tp := startProxy(t, Config{Rules: rules(t, target)}, nil)
	var stderr bytes.Buffer
	f := newForwarder(tp.socket, &stderr)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.start(l)
	defer f.close()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLimit))
	br, h := connect(t, c, target)
	if h.status != http.StatusOK {
		t.Fatalf("status %d", h.status)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	go func() {
		c.Write(payload)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(br)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, %v", len(got), err)
	}
	f.close()
	tp.stop(t)
	n := int64(len(payload))
	want := Report{Allowed: []validation.EgressHost{{Host: "127.0.0.1", Port: port, Connections: 1, BytesOut: n, BytesIn: n}}}
	if diff := cmp.Diff(want, tp.Report()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q", stderr.String())
	}
}

// With the proxy gone, connections are closed and the bridge says so
// once.
func TestForwarderProxyDown(t *testing.T) {
	var stderr bytes.Buffer
	f := newForwarder(filepath.Join(t.TempDir(), "gone.sock"), &stderr)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.start(l)
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c, c)
		c.Close()
	}
	f.close()
	if n := strings.Count(stderr.String(), "gilf egress bridge: proxy: "); n != 1 {
		t.Errorf("stderr %q: want the failure said once", stderr.String())
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Error("listener open after close")
	}
}
