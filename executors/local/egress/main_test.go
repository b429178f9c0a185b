package egress

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// helperEnv selects what the test binary does when a bridge test starts
// it as the step (see TestMain).
const helperEnv = "GILF_EGRESS_TEST_HELPER"

func TestMain(m *testing.M) {
	MaybeRunBridge()
	if os.Getenv(helperEnv) == "ready-probe" {
		os.Exit(readyProbe(os.Args[1]))
	}
	os.Exit(m.Run())
}

// readyProbe is the step of TestBridgeReadyBeforeStep. It reports, on
// stdout, every descriptor above stderr it inherited that is a socket, a
// pipe or the FIFO (the bridge's listener, its ready descriptor), then
// what the FIFO at fifo holds the moment the step starts: the bridge's
// ready line must already be there. (The Go runtime's own descriptors,
// such as the cgroup files it reads for GOMAXPROCS, are not inherited.)
func readyProbe(fifo string) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Println("read fds:", err)
		return 2
	}
	for _, en := range entries {
		target, err := os.Readlink("/proc/self/fd/" + en.Name())
		if err != nil || en.Name() == "0" || en.Name() == "1" || en.Name() == "2" {
			continue
		}
		if !strings.HasPrefix(target, "socket:") && !strings.HasPrefix(target, "pipe:") && target != fifo {
			continue
		}
		fmt.Printf("leaked fd %s: %s\n", en.Name(), target)
	}
	fd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("open fifo:", err)
		return 2
	}
	defer syscall.Close(fd)
	buf := make([]byte, 64)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		fmt.Println("read fifo:", err)
		return 2
	}
	fmt.Printf("fifo: %q\n", buf[:n])
	return 0
}
