package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

// The seccomp filter's return values.
const (
	retAllow = uint32(seccomp.ActionAllow)
	retEPERM = uint32(seccomp.ActionErrno) | uint32(unix.EPERM)
	retNOSYS = uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)
	retKill  = uint32(seccomp.ActionKillProcess)
)

// seccompData is the struct seccomp_data the kernel hands the filter, as
// bpf.VM must see it: the VM loads words big-endian, the kernel in native
// order, so each 32-bit word of the native layout is stored big-endian.
func seccompData(nr int, auditArch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.NativeEndian.PutUint32(b[0:], uint32(nr))
	binary.NativeEndian.PutUint32(b[4:], auditArch)
	for i, a := range args {
		binary.NativeEndian.PutUint64(b[16+8*i:], a)
	}
	for off := 0; off < len(b); off += 4 {
		binary.BigEndian.PutUint32(b[off:], binary.NativeEndian.Uint32(b[off:]))
	}
	return b
}

// filterVM decodes SeccompFilter's bytes into a classic BPF machine.
func filterVM(t *testing.T) *bpf.VM {
	t.Helper()
	b, err := SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || len(b)%sockFilterBytes != 0 {
		t.Fatalf("filter is %d bytes, want a whole number of %d-byte instructions", len(b), sockFilterBytes)
	}
	raw := make([]bpf.RawInstruction, len(b)/sockFilterBytes)
	for i := range raw {
		c := b[i*sockFilterBytes:]
		raw[i] = bpf.RawInstruction{Op: binary.NativeEndian.Uint16(c), Jt: c[2], Jf: c[3], K: binary.NativeEndian.Uint32(c[4:])}
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter holds instructions classic BPF does not know")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatalf("the filter is not a valid program: %v", err)
	}
	return vm
}

// The program, run in a BPF machine on the arguments the kernel would
// pass, answers each call as documented.
func TestSeccompFilterProgram(t *testing.T) {
	native, err := arch.GetInfo("")
	if err != nil {
		t.Fatalf("no seccomp filter for %s (the local executor cannot run here): %v", runtime.GOARCH, err)
	}
	vm := filterVM(t)
	foreign := arch.I386
	if native == arch.AARCH64 {
		foreign = arch.ARM
	}
	nr := func(name string) int {
		n, ok := native.SyscallNames[name]
		if !ok {
			t.Fatalf("no syscall %s on %s", name, native.Name)
		}
		return n
	}
	type tc struct {
		name string
		data []byte
		want uint32
	}
	var tests []tc
	for _, name := range seccompDenied() {
		tests = append(tests, tc{name, seccompData(nr(name), uint32(native.ID)), retEPERM})
	}
	const thread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
		unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	call := func(name string, args ...uint64) []byte { return seccompData(nr(name), uint32(native.ID), args...) }
	tests = append(tests,
		tc{"read", call("read", 0), retAllow},
		tc{"write", call("write", 1), retAllow},
		tc{"openat", call("openat"), retAllow},
		tc{"execve", call("execve"), retAllow},
		tc{"clone thread", call("clone", thread), retAllow},
		tc{"clone fork", call("clone", uint64(unix.SIGCHLD)), retAllow},
		tc{"clone vfork", call("clone", unix.CLONE_VM|unix.CLONE_VFORK|uint64(unix.SIGCHLD)), retAllow},
		// The kernel ignores the high word of clone's flags.
		tc{"clone high word only", call("clone", 1<<32|uint64(unix.SIGCHLD)), retAllow},
		tc{"clone high word and newuser", call("clone", 1<<32|unix.CLONE_NEWUSER), retEPERM},
		tc{"clone3", call("clone3"), retNOSYS},
		tc{"socket netlink raw", call("socket", unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE), retEPERM},
		tc{"socket netlink dgram", call("socket", unix.AF_NETLINK, unix.SOCK_DGRAM), retEPERM},
		tc{"socket netlink high word", call("socket", 1<<32|unix.AF_NETLINK, unix.SOCK_DGRAM), retEPERM},
		tc{"socket packet", call("socket", unix.AF_PACKET, unix.SOCK_DGRAM), retEPERM},
		tc{"socket inet raw", call("socket", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), retEPERM},
		tc{"socket inet6 raw nonblock cloexec", call("socket", unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC), retEPERM},
		tc{"socket unix raw", call("socket", unix.AF_UNIX, unix.SOCK_RAW), retEPERM},
		tc{"socket inet stream", call("socket", unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC), retAllow},
		tc{"socket inet6 dgram", call("socket", unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), retAllow},
		tc{"socket unix stream", call("socket", unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC), retAllow},
		tc{"socket unix seqpacket", call("socket", unix.AF_UNIX, unix.SOCK_SEQPACKET), retAllow},
		// Every family but unix, inet and inet6 is denied.
		tc{"socket vsock stream", call("socket", unix.AF_VSOCK, unix.SOCK_STREAM), retEPERM},
		tc{"socket vsock dgram", call("socket", unix.AF_VSOCK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), retEPERM},
		tc{"socket domain 48", call("socket", 48, unix.SOCK_DGRAM), retEPERM},
		tc{"socket bluetooth", call("socket", unix.AF_BLUETOOTH, unix.SOCK_STREAM), retEPERM},
		tc{"socket alg", call("socket", unix.AF_ALG, unix.SOCK_SEQPACKET), retEPERM},
		tc{"socket tipc", call("socket", unix.AF_TIPC, unix.SOCK_STREAM), retEPERM},
		tc{"socket unspec", call("socket", unix.AF_UNSPEC, unix.SOCK_STREAM), retEPERM},
		tc{"socket max family", call("socket", unix.AF_MAX-1, unix.SOCK_STREAM), retEPERM},
		// The high word set on an allowed family: denied (the safe side).
		tc{"socket inet high word", call("socket", 1<<32|unix.AF_INET, unix.SOCK_STREAM), retEPERM},
		tc{"socketpair unix stream", call("socketpair", unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC), retAllow},
		tc{"socketpair vsock", call("socketpair", unix.AF_VSOCK, unix.SOCK_STREAM), retEPERM},
		tc{"socketpair netlink", call("socketpair", unix.AF_NETLINK, unix.SOCK_DGRAM), retEPERM},
		tc{"socketpair unix raw", call("socketpair", unix.AF_UNIX, unix.SOCK_RAW), retEPERM},
		tc{"socket type 0x13", call("socket", unix.AF_INET, 0x13), retEPERM},
		tc{"foreign ABI", seccompData(1, uint32(foreign.ID)), retKill},
	)
	for _, flag := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET} {
		tests = append(tests, tc{fmt.Sprintf("clone %#x", flag), call("clone", flag|uint64(unix.SIGCHLD)), retEPERM})
	}
	if native == arch.X86_64 {
		tests = append(tests, tc{"x32 ABI", seccompData(arch.X32.SeccompMask|nr("read"), uint32(native.ID)), retNOSYS})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := vm.Run(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != tt.want {
				t.Errorf("filter returns %#x, want %#x", uint32(got), tt.want)
			}
		})
	}
}

// Every call the filter names exists on both architectures it supports,
// and the list holds every call it must deny.
func TestSeccompFilterCalls(t *testing.T) {
	denied := seccompDenied()
	for _, want := range []string{
		"unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
		"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
		"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
		"io_uring_setup", "io_uring_enter", "io_uring_register",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	} {
		if !slices.Contains(denied, want) {
			t.Errorf("%s is not denied", want)
		}
	}
	for _, a := range []*arch.Info{arch.X86_64, arch.AARCH64} {
		for _, name := range append(denied, "clone", "clone3", "socket", "socketpair") {
			if _, ok := a.SyscallNames[name]; !ok {
				t.Errorf("%s has no syscall %s", a.Name, name)
			}
		}
	}
	if n := len(denied); !strings.Contains(seccompNote(), strconv.Itoa(n)+" syscalls denied") {
		t.Errorf("note %q does not count %d calls", seccompNote(), n)
	}
}

// The filter is pure: the same bytes every call.
func TestSeccompFilterPure(t *testing.T) {
	a, err := SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	b, err := SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two calls gave two programs")
	}
}

// syscallProbeArg, as the test binary's first argument, makes it the
// syscall probe (maybeRunSyscallProbe) instead of the tests.
const syscallProbeArg = "__gilf-syscall-probe"

// syscallProbeBin is the test binary's name in a test's checkout.
const syscallProbeBin = "probe-bin"

// syscallProbe is one call the probe makes from inside a sandbox.
type syscallProbe struct {
	name string
	// want is what the call gives under the filter: an errno name, or
	// "ok".
	want string
	// differs: without the filter the same sandbox answers something
	// else (the capabilities it lacks do not already refuse it).
	differs bool
	// filteredOnly calls are not made without the filter: there they
	// could succeed and stop the sandbox's init.
	filteredOnly bool
	call         func() error
}

// closeFD closes what a call returned when it is a descriptor.
func closeFD(fd int, err error) error {
	if err == nil && fd >= 0 {
		return unix.Close(fd)
	}
	return err
}

func rawErr(_, _ uintptr, e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

func rawFD(r, _ uintptr, e unix.Errno) error {
	if e != 0 {
		return e
	}
	return unix.Close(int(r))
}

// rawClone calls clone with flags; a child, should the call make one,
// exits at once.
//
//go:norace
func rawClone(flags uintptr) error {
	r, _, e := unix.RawSyscall6(unix.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if e == 0 && r == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if e != 0 {
		return e
	}
	return nil
}

// noPid cannot be a pid: it is above the kernel's PID_MAX_LIMIT.
const noPid = 1<<22 + 1

func syscallProbes() []syscallProbe {
	missing := "/gilf-no-such-dir"
	return []syscallProbe{
		{name: "unshare:0", want: "EPERM", differs: true, call: func() error { return unix.Unshare(0) }},
		{name: "unshare:newns", want: "EPERM", call: func() error { return unix.Unshare(unix.CLONE_NEWNS) }},
		{name: "setns", want: "EPERM", differs: true, call: func() error { return unix.Setns(-1, 0) }},
		{name: "mount", want: "EPERM", differs: true, call: func() error { return unix.Mount("none", missing, "tmpfs", 0, "") }},
		{name: "umount2", want: "EPERM", differs: true, call: func() error { return unix.Unmount("/", 0x10) }},
		{name: "pivot_root", want: "EPERM", call: func() error { return unix.PivotRoot(missing, missing) }},
		{name: "chroot", want: "EPERM", differs: true, call: func() error { return unix.Chroot(missing) }},
		{name: "move_mount", want: "EPERM", call: func() error { return unix.MoveMount(-1, "", -1, "", 0) }},
		{name: "open_tree", want: "EPERM", differs: true, call: func() error { return closeFD(unix.OpenTree(unix.AT_FDCWD, "/", 0)) }},
		{name: "open_tree_attr", want: "EPERM", differs: true, call: func() error {
			root := []byte("/\x00")
			cwd := unix.AT_FDCWD
			return rawFD(unix.Syscall6(unix.SYS_OPEN_TREE_ATTR, uintptr(cwd), uintptr(unsafe.Pointer(&root[0])), 0, 0, 0, 0))
		}},
		{name: "fsopen", want: "EPERM", call: func() error { return closeFD(unix.Fsopen("tmpfs", 0)) }},
		{name: "fsconfig", want: "EPERM", differs: true, call: func() error { return unix.FsconfigCreate(9999) }},
		{name: "fsmount", want: "EPERM", call: func() error { return closeFD(unix.Fsmount(-1, 0, 0)) }},
		{name: "fspick", want: "EPERM", call: func() error { return closeFD(unix.Fspick(-1, "", 0)) }},
		{name: "mount_setattr", want: "EPERM", differs: true, call: func() error {
			empty := []byte("\x00")
			return rawErr(unix.Syscall6(unix.SYS_MOUNT_SETATTR, ^uintptr(0), uintptr(unsafe.Pointer(&empty[0])), 0, 0, 0, 0))
		}},
		{name: "ptrace:attach-init", want: "EPERM", filteredOnly: true, call: func() error { return unix.PtraceAttach(1) }},
		{name: "ptrace:attach-nopid", want: "EPERM", differs: true, call: func() error { return unix.PtraceAttach(noPid) }},
		{name: "process_vm_readv", want: "EPERM", differs: true, call: func() error { _, err := unix.ProcessVMReadv(noPid, nil, nil, 0); return err }},
		{name: "process_vm_writev", want: "EPERM", differs: true, call: func() error { _, err := unix.ProcessVMWritev(noPid, nil, nil, 0); return err }},
		{name: "keyctl", want: "EPERM", differs: true, call: func() error { _, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_PROCESS_KEYRING, false); return err }},
		{name: "add_key", want: "EPERM", differs: true, call: func() error {
			_, err := unix.AddKey("user", "gilf-probe", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
			return err
		}},
		{name: "request_key", want: "EPERM", differs: true, call: func() error {
			_, err := unix.RequestKey("user", "gilf-probe-none", "", unix.KEY_SPEC_PROCESS_KEYRING)
			return err
		}},
		{name: "bpf", want: "EPERM", call: func() error { return rawFD(unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, 0, 0)) }},
		{name: "perf_event_open", want: "EPERM", differs: true, call: func() error { return closeFD(unix.PerfEventOpen(nil, 0, -1, -1, 0)) }},
		{name: "userfaultfd", want: "EPERM", call: func() error {
			return rawFD(unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|1 /* UFFD_USER_MODE_ONLY */, 0, 0))
		}},
		{name: "io_uring_setup", want: "EPERM", call: func() error {
			var params [120]byte // struct io_uring_params, zeroed
			return rawFD(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0))
		}},
		{name: "io_uring_enter", want: "EPERM", differs: true, call: func() error { return rawErr(unix.Syscall6(unix.SYS_IO_URING_ENTER, 9999, 0, 0, 0, 0, 0)) }},
		{name: "io_uring_register", want: "EPERM", differs: true, call: func() error { return rawErr(unix.Syscall6(unix.SYS_IO_URING_REGISTER, 9999, 0, 0, 0, 0, 0)) }},
		{name: "kexec_load", want: "EPERM", call: func() error { return rawErr(unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0, 0, 0)) }},
		{name: "kexec_file_load", want: "EPERM", call: func() error {
			return rawErr(unix.Syscall6(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, 0, 0, 0))
		}},
		{name: "init_module", want: "EPERM", call: func() error { return unix.InitModule(nil, "") }},
		{name: "finit_module", want: "EPERM", call: func() error { return unix.FinitModule(-1, "", 0) }},
		{name: "delete_module", want: "EPERM", call: func() error { return unix.DeleteModule("gilf_probe_none", 0) }},
		{name: "clone:newns", want: "EPERM", call: func() error { return rawClone(unix.CLONE_NEWNS | uintptr(unix.SIGCHLD)) }},
		{name: "clone:newuser", want: "EPERM", call: func() error { return rawClone(unix.CLONE_NEWUSER | uintptr(unix.SIGCHLD)) }},
		{name: "clone:newnet", want: "EPERM", call: func() error { return rawClone(unix.CLONE_NEWNET | uintptr(unix.SIGCHLD)) }},
		{name: "clone3", want: "ENOSYS", differs: true, call: func() error { return rawErr(unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)) }},
		{name: "socket:netlink", want: "EPERM", differs: true, call: func() error {
			return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE))
		}},
		{name: "socket:netlink-dgram", want: "EPERM", differs: true, call: func() error { return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM, 0)) }},
		// The kernel drops the high word of an int argument.
		{name: "socket:netlink-high-word", want: "EPERM", differs: true, call: func() error {
			return rawFD(unix.RawSyscall(unix.SYS_SOCKET, 1<<32|unix.AF_NETLINK, unix.SOCK_DGRAM, 0))
		}},
		{name: "socket:packet", want: "EPERM", call: func() error { return closeFD(unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0)) }},
		{name: "socket:inet-raw", want: "EPERM", call: func() error { return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)) }},
		{name: "socket:inet6-raw-nonblock", want: "EPERM", call: func() error {
			return closeFD(unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6))
		}},
		// A network namespace does not cover vsock: on a virtual machine
		// it reaches the VM's host. The filter denies it and every family
		// but unix, inet and inet6 (no traffic: socket alone).
		{name: "socket:vsock-stream", want: "EPERM", differs: true, call: func() error { return closeFD(unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)) }},
		{name: "socket:vsock-dgram", want: "EPERM", differs: true, call: func() error { return closeFD(unix.Socket(unix.AF_VSOCK, unix.SOCK_DGRAM, 0)) }},
		{name: "socket:alg", want: "EPERM", differs: true, call: func() error { return closeFD(unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET, 0)) }},
		{name: "socketpair:vsock", want: "EPERM", call: func() error {
			_, err := unix.Socketpair(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
			return err
		}},
		{name: "pidfd_getfd", want: "EPERM", differs: true, call: func() error {
			return rawFD(unix.Syscall(unix.SYS_PIDFD_GETFD, ^uintptr(0), 0, 0))
		}},
		{name: "process_madvise", want: "EPERM", differs: true, call: func() error {
			return rawErr(unix.Syscall6(unix.SYS_PROCESS_MADVISE, ^uintptr(0), 0, 0, 0, 0, 0))
		}},
		// AF_UNIX takes SOCK_RAW as SOCK_DGRAM: only the filter refuses it.
		{name: "socket:unix-raw", want: "EPERM", differs: true, call: func() error { return closeFD(unix.Socket(unix.AF_UNIX, unix.SOCK_RAW, 0)) }},

		// What steps need keeps working.
		{name: "socket:inet-stream", want: "ok", call: func() error {
			return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0))
		}},
		{name: "socket:inet6-dgram", want: "ok", call: func() error { return closeFD(unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM, 0)) }},
		{name: "tcp:loopback", want: "ok", call: tcpLoopback},
		{name: "unix:scm-rights", want: "ok", call: passDescriptor},
		{name: "exec:true", want: "ok", call: func() error { return exec.Command("/bin/true").Run() }},
	}
}

// maybeRunSyscallProbe is the syscall probe: when the test binary is
// started with syscallProbeArg (by TestSeccompInsideTheSandbox, inside a
// sandbox), it makes every call of syscallProbes, prints one line per
// call ("name ok" or "name ERRNO") and exits. A second argument
// "unfiltered" leaves out the filteredOnly calls. TestMain calls it.
func maybeRunSyscallProbe() {
	if len(os.Args) < 2 || os.Args[1] != syscallProbeArg {
		return
	}
	unfiltered := len(os.Args) > 2 && os.Args[2] == "unfiltered"
	for _, p := range syscallProbes() {
		if unfiltered && p.filteredOnly {
			continue
		}
		fmt.Println(p.name, probeResult(p.call()))
	}
	os.Exit(0)
}

func probeResult(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno) && unix.ErrnoName(errno) != "":
		return unix.ErrnoName(errno)
	}
	return strings.ReplaceAll(err.Error(), " ", "_")
}

// tcpLoopback listens on 127.0.0.1, connects and echoes one message.
func tcpLoopback() error {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("echo %q", buf)
	}
	return nil
}

// passDescriptor sends a descriptor over an AF_UNIX socket (SCM_RIGHTS),
// as the egress bridge does.
func passDescriptor() error {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	if err := unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(1), nil, 0); err != nil {
		return err
	}
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(pair[1], make([]byte, 1), oob, 0)
	if err != nil {
		return err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("control messages %d: %v", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("rights %d: %v", len(fds), err)
	}
	return unix.Close(fds[0])
}

// probeCheckout is a checkout holding a copy of the test binary, run as
// the syscall probe.
func probeCheckout(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(filepath.Join(dir, syscallProbeBin), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// parseProbe reads the probe's "name result" lines.
func parseProbe(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			got[k] = v
		}
	}
	return got
}

// Hostile steps try every denied family from inside an executor's
// sandbox: each call is refused with the filter's errno, the denial shows
// in the step's output, and the step's own exit decides its status.
func TestSeccompInsideTheSandbox(t *testing.T) {
	e := newExec(t, Options{})
	res := runPlan(t, e, probeCheckout(t),
		validation.Step{Name: validation.StepInstall, Argv: []string{"/bin/sh", "-c",
			`while read -r k v; do [ "$k" = Seccomp: ] && echo "seccomp $v"; done < /proc/self/status; ip -o link 2>&1; echo "ip exit $?"`},
			Network: validation.NetworkRegistry, Timeout: time.Minute},
		validation.Step{Name: validation.StepBuild, Argv: []string{"./" + syscallProbeBin, syscallProbeArg}, Timeout: time.Minute},
		shStep(validation.StepLint, `unshare -m true; echo "unshare exit $?"
node -e 'require("os").networkInterfaces()' 2>&1 | grep -m1 -o 'uv_interface_addresses returned [A-Za-z ]*[0-9]*'
exit 0`, time.Minute),
		shStep(validation.StepTest, `exec unshare -n true`, time.Minute),
	)
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "seccomp filter in force: ") {
		t.Errorf("notes do not name the seccomp filter:\n%s", notes)
	}

	install := res.Steps[0]
	wantStatus(t, install, validation.StatusPassed)
	for _, w := range []string{"seccomp 2\n", "Cannot open netlink socket: Operation not permitted", "ip exit 1"} {
		if !strings.Contains(install.Output.Head, w) {
			t.Errorf("install step (behind the egress bridge) output lacks %q:\n%s", w, install.Output.Head)
		}
	}

	probe := res.Steps[1]
	wantStatus(t, probe, validation.StatusPassed)
	got := parseProbe(probe.Output.Head)
	for _, p := range syscallProbes() {
		if got[p.name] != p.want {
			t.Errorf("%s: %q, want %s", p.name, got[p.name], p.want)
		}
	}

	lint := res.Steps[2]
	wantStatus(t, lint, validation.StatusPassed)
	for _, w := range []string{"unshare failed: Operation not permitted", "unshare exit 1", "uv_interface_addresses returned Unknown system error 1"} {
		if !strings.Contains(lint.Output.Head, w) {
			t.Errorf("lint output lacks %q:\n%s", w, lint.Output.Head)
		}
	}
	// A denied call is an error, not a kill: the step fails by its own
	// exit status.
	test := res.Steps[3]
	wantStatus(t, test, validation.StatusFailed)
	if test.ExitCode == nil || *test.ExitCode != 1 || test.Signal != "" {
		t.Errorf("test step: exit %v signal %q, want exit 1 and no signal", derefInt(test.ExitCode), test.Signal)
	}
}

// What steps do every day still works under the filter: node, its
// threads and child processes, npm, TCP on the loopback and unix sockets.
func TestSeccompOrdinaryWork(t *testing.T) {
	e := newExec(t, Options{})
	res := runPlan(t, e, repo(t, nil),
		validation.Step{Name: validation.StepBuild, Argv: []string{"npm", "--version"}, Timeout: time.Minute},
		validation.Step{Name: validation.StepTest, Argv: []string{"node", "-e", `
const net = require("net");
const { Worker } = require("worker_threads");
const { execFileSync } = require("child_process");
const want = new Set(["tcp", "unix", "thread", "spawn"]);
const done = k => { console.log(k + " ok"); want.delete(k); if (want.size === 0) process.exit(0) };
const echo = (listen, connect, name) => {
  const srv = net.createServer(c => c.pipe(c)).listen(...listen, () => {
    const c = net.connect(...connect(srv), () => c.write("ping"));
    c.on("data", d => { if (String(d) === "ping") { c.destroy(); srv.close(); done(name) } });
  });
};
echo([0, "127.0.0.1"], s => [s.address().port, "127.0.0.1"], "tcp");
echo(["/tmp/gilf.sock"], () => ["/tmp/gilf.sock"], "unix");
new Worker("require('worker_threads').parentPort.postMessage(1)", { eval: true }).on("message", () => done("thread"));
if (execFileSync("/bin/echo", ["child"]).toString() === "child\n") done("spawn");
`}, Timeout: time.Minute},
	)
	npm := res.Steps[0]
	wantStatus(t, npm, validation.StatusPassed)
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\n`).MatchString(npm.Output.Head) {
		t.Errorf("npm --version printed %q", npm.Output.Head)
	}
	node := res.Steps[1]
	wantStatus(t, node, validation.StatusPassed)
	for _, w := range []string{"tcp ok", "unix ok", "thread ok", "spawn ok"} {
		if !strings.Contains(node.Output.Head, w) {
			t.Errorf("node output lacks %q:\n%s", w, node.Output.Head)
		}
	}
}

// bareBox is a run directory laid out like a step's, for sandboxes the
// test starts itself with BuildArgs, so it chooses the filter.
type bareBox struct {
	opts Options
	dirs runDirs
}

// newBareBox makes the run directory (a copy of src as the workspace) for
// sandboxes of uid; it is removed when the test ends.
func newBareBox(tb testing.TB, src string, uid uint32) *bareBox {
	tb.Helper()
	root := tb.TempDir()
	for p := root; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			tb.Fatal(err)
		}
	}
	dirs, _, err := makeRunDirs(root, src, int(uid), int(uid))
	tb.Cleanup(func() {
		if err := dirs.remove(); err != nil {
			tb.Errorf("remove run dirs: %v", err)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &bareBox{opts: Options{SandboxUID: uid, SandboxGID: uid}.withDefaults(), dirs: dirs}
}

// run runs argv in a sandbox of the box whose bwrap reads prog on
// --seccomp (nil: no filter at all) and returns its output and exit
// status (nil for 0).
func (b *bareBox) run(tb testing.TB, prog []byte, argv ...string) (string, error) {
	tb.Helper()
	d := b.dirs
	paths := Paths{Workspace: d.Workspace, Home: d.Home, Tmp: d.Tmp, Etc: d.Etc}
	var extra []*os.File
	if prog != nil {
		// The program is far smaller than a pipe's buffer.
		r, w, err := os.Pipe()
		if err != nil {
			tb.Fatal(err)
		}
		defer r.Close()
		_, werr := w.Write(prog)
		if err := errors.Join(werr, w.Close()); err != nil {
			tb.Fatal(err)
		}
		extra, paths.SeccompFD = []*os.File{r}, 3
	}
	args := BuildArgs(b.opts, validation.Step{Name: validation.StepTest, Argv: argv}, paths)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env, cmd.Dir, cmd.ExtraFiles = []string{}, d.Workspace, extra
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: b.opts.SandboxUID, Gid: b.opts.SandboxGID, Groups: []uint32{}},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		tb.Fatalf("run bwrap: %v", err)
	}
	return string(out), err
}

// bareSandbox runs argv in a fresh bareBox of the test's own uid and
// checks that nothing of it is left.
func bareSandbox(t *testing.T, src string, prog []byte, argv ...string) (string, error) {
	t.Helper()
	uid := testUID(t)
	out, err := newBareBox(t, src, uid).run(t, prog, argv...)
	assertNoSandboxProcesses(t, uid)
	return out, err
}

// Without the filter, the same sandbox answers the calls marked differs
// otherwise: their denials inside come from the filter, not from the
// capabilities bwrap drops.
func TestSeccompProbeWithoutFilter(t *testing.T) {
	out, err := bareSandbox(t, probeCheckout(t), nil, "./"+syscallProbeBin, syscallProbeArg, "unfiltered")
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	got := parseProbe(out)
	t.Logf("without the filter: %v", got)
	for _, p := range syscallProbes() {
		switch {
		case p.filteredOnly:
		case p.want == "ok" && got[p.name] != "ok":
			t.Errorf("%s: %q without the filter, want ok", p.name, got[p.name])
		case p.differs && (got[p.name] == "" || got[p.name] == p.want):
			t.Errorf("%s: %q without the filter too", p.name, got[p.name])
		}
	}
}

// The probe script passes only under gilf's filter: with none the kernel
// reports no filter, and with a filter that allows everything a netlink
// socket opens.
func TestProbeScriptNeedsTheFilter(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip(8) is required (scripts/test installs iproute2): %v", err)
	}
	prog, err := SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	allowAll := binary.NativeEndian.AppendUint16(nil, unix.BPF_RET|unix.BPF_K)
	allowAll = binary.NativeEndian.AppendUint32(append(allowAll, 0, 0), retAllow)
	tests := []struct {
		name string
		prog []byte
		want int
	}{
		{"gilf's filter", prog, 0},
		{"no filter", nil, probeExitSeccomp},
		{"a filter allowing everything", allowAll, probeExitNetlink},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := bareSandbox(t, "", tt.prog, "/bin/sh", "-c", probeScript, "probe", strconv.FormatUint(uint64(testUID(t)), 10))
			code := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			}
			if code != tt.want {
				t.Errorf("probe script exits %d, want %d (%s); output:\n%s", code, tt.want,
					probeFailure(validation.StepResult{ExitCode: &code}, nil), out)
			}
		})
	}
}

// A filter the kernel or bwrap refuses fails the sandbox before anything
// runs in it: no step ever runs unfiltered.
func TestSeccompLoadFailureRunsNothing(t *testing.T) {
	prog, err := SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	badOp := binary.NativeEndian.AppendUint16(nil, 0xffff)
	badOp = binary.NativeEndian.AppendUint32(append(badOp, 0, 0), 0)
	for name, bad := range map[string][]byte{
		"not whole instructions": prog[:len(prog)-1],
		"unknown instruction":    badOp,
		"empty":                  {},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := bareSandbox(t, "", bad, "/bin/sh", "-c", "echo STEP-RAN")
			if err == nil || strings.Contains(out, "STEP-RAN") || !strings.Contains(out, "bwrap: ") {
				t.Errorf("bwrap with a bad filter: %v\n%s", err, out)
			}
		})
	}
}

// BenchmarkSeccompFilter is what building the filter adds to every step.
func BenchmarkSeccompFilter(b *testing.B) {
	for b.Loop() {
		if _, err := SeccompFilter(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSeccompLoad is what the filter costs bwrap itself: a bare
// sandbox running /bin/true with and without --seccomp, alternately, so
// host noise hits both alike. Metrics: the median ms/op of each, and
// their ratio.
func BenchmarkSeccompLoad(b *testing.B) {
	prog, err := SeccompFilter()
	if err != nil {
		b.Fatal(err)
	}
	box := newBareBox(b, "", 300998)
	var without, with []time.Duration
	for b.Loop() {
		for _, p := range [][]byte{nil, prog} {
			t0 := time.Now()
			if out, err := box.run(b, p, "/bin/true"); err != nil {
				b.Fatalf("bwrap: %v %s", err, out)
			}
			if p == nil {
				without = append(without, time.Since(t0))
			} else {
				with = append(with, time.Since(t0))
			}
		}
	}
	m0, m1 := median(without), median(with)
	b.ReportMetric(float64(m0.Microseconds())/1000, "bare-ms/op")
	b.ReportMetric(float64(m1.Microseconds())/1000, "seccomp-ms/op")
	b.ReportMetric(float64(m1)/float64(m0), "ratio")
}
