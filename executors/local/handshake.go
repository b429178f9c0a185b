package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// directShim holds a direct-mode step until it is in its cgroup: it reads
// one line from descriptor 3, closes it and execs its arguments.
const directShim = `read -r _ <&3 || exit 126; exec 3<&-; exec "$@"`

// handshake holds the pipes with which a cgroup v1 step is placed in its
// cgroup before it runs anything: bwrap's --info-fd and --block-fd, or
// the block pipe of directShim; and the other descriptors one step's
// bwrap is handed (the bridge's ready pipe, the seccomp filter).
type handshake struct {
	infoR, infoW   *os.File
	blockR, blockW *os.File
	cgroupDir      *os.File
	// readyR/readyW are the pipe on which the bridge says it listens.
	// Install steps only.
	readyR, readyW *os.File
	// seccomp holds the filter bwrap reads (--seccomp); child only.
	seccomp *os.File
	// guardR/guardW are the pipe on which the worker lets a cgroup v1
	// step run once it is placed (startShim).
	guardR, guardW *os.File
	// args holds bwrap's options (--args); bridge is the bridge binary
	// and init the sandbox's init (pid1.go), both of which bwrap copies
	// into the sandbox. Child only.
	args, bridge, init *os.File
	// proof is the step's proof that it ran in its sandbox (bwrap
	// only).
	proof *proof
}

// openGuard opens the guard pipe.
func (h *handshake) openGuard() error {
	var err error
	if h.guardR, h.guardW, err = os.Pipe(); err != nil {
		return fmt.Errorf("guard pipe: %w", err)
	}
	return nil
}

// openSandbox opens what a sandboxed step's bwrap is handed besides its
// options: on cgroup v1 the placement pipes and the guard, bwrap's info
// pipe, and the step's proof; paths gets their descriptors.
func (h *handshake) openSandbox(paths *Paths, files *childFiles, v1 bool) error {
	if v1 {
		if err := h.open(true); err != nil {
			return err
		}
		paths.InfoFD, paths.BlockFD = files.add(h.infoW), files.add(h.blockR)
		// bwrap goes on after EOF on --block-fd: a worker dying before
		// it placed the sandbox (or before bwrap's child set its
		// parent-death signal) would leave the step running outside its
		// cgroup. The guard runs the step only once the worker says so,
		// after placing it, and exits at EOF.
		if err := h.openGuard(); err != nil {
			return err
		}
		paths.GuardFD = files.add(h.guardR)
	}
	if h.infoR == nil {
		// bwrap reports the sandbox it made: part of the proof.
		if err := h.openInfo(); err != nil {
			return err
		}
		paths.InfoFD = files.add(h.infoW)
	}
	h.proof = &proof{}
	if err := h.proof.open(); err != nil {
		return err
	}
	paths.TokenFD, paths.StartFD = files.add(h.proof.tokenR), files.add(h.proof.startW)
	return nil
}

// openEgress opens the bridge binary and its ready pipe for an install
// step whose proxy is proxy; paths gets their descriptors.
func (h *handshake) openEgress(paths *Paths, files *childFiles, proxy *stepProxy) error {
	var err error
	if h.readyR, h.readyW, err = os.Pipe(); err != nil {
		return fmt.Errorf("egress ready pipe: %w", err)
	}
	if h.bridge, err = os.Open(proxy.bridge); err != nil {
		return fmt.Errorf("egress bridge binary: %w", err)
	}
	paths.Egress = &EgressPaths{SocketDir: proxy.dir, BridgeFD: files.add(h.bridge), ReadyFD: files.add(h.readyW)}
	return nil
}

// watchReady reads what the bridge says on the ready pipe, in the
// background; nil when the step has no bridge. The channel yields the
// bytes read up to EOF (the bridge closes its end before it starts the
// step, and nothing else holds it).
func (h *handshake) watchReady() <-chan []byte {
	if h.readyR == nil {
		return nil
	}
	return watchPipe(h.readyR, 64)
}

// bridgeReady reports whether the bridge said it listens.
func bridgeReady(ch <-chan []byte) bool { return string(drained(ch)) == "ready\n" }

// watchProof starts reading the step's proof (bwrap only).
func (h *handshake) watchProof() {
	if h.proof == nil {
		return
	}
	h.proof.started = watchPipe(h.proof.startR, proofMaxBytes)
	if h.infoR != nil && h.blockW == nil {
		h.proof.info = watchPipe(h.infoR, proofMaxBytes)
	}
}

func (h *handshake) open(info bool) error {
	var err error
	if info {
		if err := h.openInfo(); err != nil {
			return err
		}
	}
	if h.blockR, h.blockW, err = os.Pipe(); err != nil {
		h.closeAll()
		return fmt.Errorf("block pipe: %w", err)
	}
	return nil
}

// openInfo opens the pipe of bwrap's --info-fd.
func (h *handshake) openInfo() error {
	var err error
	if h.infoR, h.infoW, err = os.Pipe(); err != nil {
		return fmt.Errorf("info pipe: %w", err)
	}
	return nil
}

func (h *handshake) active() bool { return h.blockW != nil }

// closeChildEnds closes the descriptors only the child needs.
func (h *handshake) closeChildEnds() {
	child := []**os.File{&h.infoW, &h.blockR, &h.cgroupDir, &h.readyW, &h.seccomp, &h.guardR, &h.args, &h.bridge, &h.init}
	if h.proof != nil {
		child = append(child, &h.proof.tokenR, &h.proof.startW)
	}
	for _, f := range child {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

func (h *handshake) closeAll() {
	h.closeChildEnds()
	parent := []**os.File{&h.infoR, &h.blockW, &h.readyR, &h.guardW}
	if h.proof != nil {
		parent = append(parent, &h.proof.tokenW, &h.proof.startR)
	}
	for _, f := range parent {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// place moves the step into cg and lets it go on. With bwrap, that is the
// sandbox's init, whose pid bwrap reports on the info pipe; without, the
// shim (pid). It returns the pid it placed.
func (h *handshake) place(cg *stepCgroup, pid int) (int, error) {
	if h.infoR != nil {
		if err := h.infoR.SetReadDeadline(time.Now().Add(SetupTimeout)); err != nil {
			return 0, fmt.Errorf("info pipe deadline: %w", err)
		}
		var info struct {
			ChildPid int `json:"child-pid"`
		}
		// bwrap writes one small JSON object; a bounded read is enough.
		if err := json.NewDecoder(io.LimitReader(h.infoR, 64<<10)).Decode(&info); err != nil {
			return 0, fmt.Errorf("read bwrap info: %w", err)
		}
		if info.ChildPid <= 0 {
			return 0, errors.New("bwrap info has no child pid")
		}
		if h.proof != nil {
			h.proof.childPid = info.ChildPid
		}
		// Only the sandbox's init: everything that runs untrusted
		// code descends from it. bwrap itself stays outside, in the
		// step's process group; each move costs the kernel an RCU
		// grace period.
		pid = info.ChildPid
	}
	if err := cg.add(pid); err != nil {
		return 0, err
	}
	// bwrap's block pipe, then the guard's (bwrap mode, cgroup v1).
	for _, w := range []**os.File{&h.blockW, &h.guardW} {
		if *w == nil {
			continue
		}
		if _, err := (*w).Write([]byte{'\n'}); err != nil {
			return 0, fmt.Errorf("release sandbox: %w", err)
		}
		if err := (*w).Close(); err != nil {
			return 0, fmt.Errorf("release sandbox: %w", err)
		}
		*w = nil
	}
	return pid, nil
}
