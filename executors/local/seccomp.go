package local

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strings"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter of every sandboxed step (bwrap --seccomp). It closes
// what the namespaces and the dropped capabilities leave open to an
// unprivileged process, or open only by a sysctl the host may have left at
// its default: new namespaces and mounts, tracing other processes, the
// kernel keyrings, BPF, perf, userfaultfd, io_uring, kexec and modules,
// taking another process's descriptors or advising on its memory, raw
// sockets, and every socket family but AF_UNIX, AF_INET and AF_INET6
// (netlink, packet, vsock — which a network namespace does not cover, and
// which on a virtual machine reaches the VM's host — and the rest). A denied call fails with EPERM, so
// the step sees an error it can print, and its own exit decides its
// status; nothing is killed for asking. Everything else is allowed.
//
// A call made through another ABI than the native one would carry other
// syscall numbers past the list: the program kills a process that makes
// one through i386 on x86_64 or AArch32 on aarch64, and answers ENOSYS to
// x32 calls (the library's own check).
const (
	// seccompNamespaceFlags are clone's namespace flags (the low word of
	// its first argument; the kernel ignores the high word). CLONE_NEWTIME
	// is not among them: in clone's flags that bit is part of the exit
	// signal, and only clone3 and unshare (both denied) take it.
	seccompNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
		unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	// seccompSockTypeMask is the part of socket's type argument that is
	// the type; SOCK_NONBLOCK and SOCK_CLOEXEC are above it.
	seccompSockTypeMask = 0xf
	// seccompMaxInstructions is the kernel's BPF_MAXINSNS: a longer
	// program is refused at load, so it is refused here first.
	seccompMaxInstructions = 4096
	// sockFilterBytes is the size of one struct sock_filter.
	sockFilterBytes = 8
)

// seccompFamily is a group of syscalls the filter denies outright, named
// for the record.
type seccompFamily struct {
	name  string
	calls []string
}

// seccompFamilies are the syscalls denied with EPERM whatever their
// arguments. ptrace is denied as a whole, not only against processes
// other than the caller's children: seccomp cannot tell a child from any
// other pid, and a blanket deny is simpler to trust. strace, gdb and
// other debuggers therefore fail inside the sandbox.
func seccompFamilies() []seccompFamily {
	return []seccompFamily{
		{"namespaces", []string{"unshare", "setns"}},
		{"mounts", []string{"mount", "umount2", "pivot_root", "chroot",
			"move_mount", "open_tree", "open_tree_attr", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"}},
		{"ptrace", []string{"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise"}},
		{"keyrings", []string{"keyctl", "add_key", "request_key"}},
		{"bpf", []string{"bpf"}},
		{"perf", []string{"perf_event_open"}},
		{"userfaultfd", []string{"userfaultfd"}},
		{"io_uring", []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
		{"kexec", []string{"kexec_load", "kexec_file_load"}},
		{"modules", []string{"init_module", "finit_module", "delete_module"}},
	}
}

// seccompDenied lists every syscall of seccompFamilies.
func seccompDenied() []string {
	var names []string
	for _, f := range seccompFamilies() {
		names = append(names, f.calls...)
	}
	return names
}

// seccompPolicy is the filter as go-seccomp-bpf describes it.
//
// Argument checks compare the low 32 bits only: socket's domain and type
// and clone's flags are ints to the kernel, which drops the high word a
// caller may set, so a 64-bit Equal would let 1<<32|AF_NETLINK through.
// The library has no masked compare, but BitsSet and BitsNotSet with a
// zero high word look at the low word alone (lowWordEquals).
//
// clone3 passes its flags in memory, out of seccomp's reach: it answers
// ENOSYS, and glibc (pthread_create, posix_spawn) falls back to clone,
// whose flags are checked. Docker and systemd do the same.
func seccompPolicy() seccomp.Policy {
	conds := []seccomp.NameWithConditions{
		{Name: "clone", Conditions: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.BitsSet, Value: seccompNamespaceFlags},
		}},
		{Name: "socket", Conditions: otherFamily(0)},
		{Name: "socketpair", Conditions: otherFamily(0)},
		{Name: "socket", Conditions: lowWordEquals(1, seccompSockTypeMask, unix.SOCK_RAW)},
		{Name: "socketpair", Conditions: lowWordEquals(1, seccompSockTypeMask, unix.SOCK_RAW)},
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			// ActionErrno alone is EPERM in this library.
			{Names: seccompDenied(), NamesWithCondtions: conds, Action: seccomp.ActionErrno},
			{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
		},
	}
}

// seccompFamiliesAllowed are the socket families a step may open: every
// other one is denied.
func seccompFamiliesAllowed() []uint64 {
	return []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}
}

// otherFamily is the condition "argument arg is none of
// seccompFamiliesAllowed". It compares all 64 bits: a family with its high
// word set is not equal to any allowed one and is denied, which is the
// safe side (the kernel would drop the high word).
func otherFamily(arg uint32) seccomp.ArgumentConditions {
	var c seccomp.ArgumentConditions
	for _, f := range seccompFamiliesAllowed() {
		c = append(c, seccomp.Condition{Argument: arg, Operation: seccomp.NotEqual, Value: f})
	}
	return c
}

// lowWordEquals is the condition arg&mask == want on the low 32 bits of
// argument arg: every bit of want set, every other bit of mask clear.
func lowWordEquals(arg, mask, want uint32) seccomp.ArgumentConditions {
	var c seccomp.ArgumentConditions
	for bit := uint32(1); bit != 0; bit <<= 1 {
		if want&bit != 0 {
			c = append(c, seccomp.Condition{Argument: arg, Operation: seccomp.BitsSet, Value: uint64(bit)})
		}
	}
	if rest := mask &^ want; rest != 0 {
		c = append(c, seccomp.Condition{Argument: arg, Operation: seccomp.BitsNotSet, Value: uint64(rest)})
	}
	return c
}

// SeccompFilter returns the compiled filter for this process's
// architecture (x86_64 or aarch64; any other is an error) as bwrap's
// --seccomp reads it: the struct sock_filter array, in native byte order.
// It is pure: the same program every call.
func SeccompFilter() ([]byte, error) {
	switch runtime.GOARCH {
	case "amd64", "arm64":
	default:
		return nil, fmt.Errorf("seccomp filter: unsupported architecture %s (want amd64 or arm64)", runtime.GOARCH)
	}
	native, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	policy := seccompPolicy()
	body, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	// The library sends a foreign architecture to its default action
	// (allow); this prefix kills the process instead. A foreign ABI gets
	// no errno: with every call failing, not even exit would work.
	prog := append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}, body...)
	if len(prog) > seccompMaxInstructions {
		return nil, fmt.Errorf("seccomp filter: %d instructions, the kernel takes %d", len(prog), seccompMaxInstructions)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	out := make([]byte, 0, len(raw)*sockFilterBytes)
	for _, in := range raw {
		out = binary.NativeEndian.AppendUint16(out, in.Op)
		out = append(out, in.Jt, in.Jf)
		out = binary.NativeEndian.AppendUint32(out, in.K)
	}
	return out, nil
}

// seccompFile returns an anonymous file holding the filter, positioned at
// its start, for bwrap to read through --seccomp.
func seccompFile() (*os.File, error) {
	prog, err := SeccompFilter()
	if err != nil {
		return nil, err
	}
	return memFile("gilf-seccomp", prog)
}

// seccompNote describes the filter for the tier's notes.
func seccompNote() string {
	fams := seccompFamilies()
	names := make([]string, len(fams))
	for i, f := range fams {
		names[i] = f.name
	}
	return fmt.Sprintf("seccomp filter in force: %d syscalls denied (%s), also clone with namespace flags, raw sockets and sockets of any family but unix, inet and inet6 (vsock, netlink, packet, ...) (EPERM); clone3 gets ENOSYS",
		len(seccompDenied()), strings.Join(names, ", "))
}
