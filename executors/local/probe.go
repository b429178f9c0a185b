package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// probed is what the isolation probe established, cached for the
// Executor's life.
type probed struct {
	tier validation.Tier
	cg   cgroupHost
	// disk are the tools of the disk ceiling when one can be made; nil
	// when it is off or the host cannot make one.
	disk *diskTools
	// notes describe the tier for the record: limits in force, or why
	// a stronger tier was not reached.
	notes []string
}

// prober runs the isolation probe once. A probe that could not run (its
// context ended) is not cached and is tried again by the next caller.
type prober struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	result *probed
	refuse *validation.Refusal
}

func newProber(opts Options, log *slog.Logger) *prober {
	return &prober{opts: opts, log: log}
}

// Exit codes of the probe script, each naming the isolation check that
// failed.
const (
	probeExitUID      = 10
	probeExitHome     = 11
	probeExitRootRW   = 12
	probeExitNetwork  = 13
	probeExitHostProc = 14
	probeExitUserns   = 15
	probeExitSeccomp  = 16
	probeExitNetlink  = 17
)

// probeScript checks from inside, with the sandbox's own shell, what the
// read-only and no-network tiers promise. $1 is the expected uid.
//
// The seccomp filter is checked twice: the kernel reports a filter on the
// shell itself (Seccomp: 2), which needs nothing but sh; and a netlink
// socket, which an unprivileged process may open in its own network
// namespace unless gilf's filter denies it, cannot be opened. The second
// check tells gilf's filter from one the worker's own container runtime
// may have set; it needs ip (iproute2) or, failing that, node, and is
// skipped on a host with neither.
const probeScript = `[ "$(id -u)" = "$1" ] || exit 10
[ ! -e /root ] || exit 11
if ( : > /gilf-probe-write ) 2>/dev/null; then exit 12; fi
n=0
while read -r line; do case "$line" in *:*) n=$((n+1));; esac; done < /proc/net/dev
[ "$n" -eq 1 ] || exit 13
[ ! -e /sys/fs/cgroup ] || exit 14
if command -v unshare >/dev/null 2>&1 && unshare -U true 2>/dev/null; then exit 15; fi
mode=
while read -r k v; do [ "$k" = Seccomp: ] && mode=$v; done < /proc/self/status
[ "$mode" = 2 ] || exit 16
if command -v ip >/dev/null 2>&1; then
	if ip -o link >/dev/null 2>&1; then exit 17; fi
elif command -v node >/dev/null 2>&1; then
	if node -e 'require("os").networkInterfaces()' >/dev/null 2>&1; then exit 17; fi
fi
exit 0
`

func (p *prober) get(ctx context.Context) (*probed, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse != nil {
		return nil, p.refuse
	}
	if p.result != nil {
		return p.result, nil
	}
	res, refusal, err := p.run(ctx)
	if err != nil {
		p.log.LogAttrs(ctx, slog.LevelWarn, "local isolation probe could not run",
			slog.String(logkey.Executor, Name), slog.String(logkey.Err, err.Error()))
		// Not cached: the next Run probes again.
		return nil, validation.Refuse(validation.CodeIsolationTierUnknown,
			"the local isolation probe could not run")
	}
	if refusal != nil {
		p.refuse = refusal
		return nil, refusal
	}
	p.log.LogAttrs(ctx, slog.LevelInfo, "local isolation probed",
		slog.String(logkey.Executor, Name), slog.String("tier", string(res.tier)),
		slog.String("cgroup", res.cg.version.String()))
	p.result = res
	return res, nil
}

// run establishes the tier: sandbox uid usable, then cgroups, then a real
// sandbox checked from inside. err means the probe itself could not run.
func (p *prober) run(ctx context.Context) (*probed, *validation.Refusal, error) {
	if os.Geteuid() != 0 {
		return nil, validation.Refuse(validation.CodeSandboxUserUnavailable,
			"the worker runs as uid %d and cannot switch to the sandbox uid %d; run it as root (it keeps root only for cgroups)",
			os.Geteuid(), p.opts.SandboxUID), nil
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()

	res := p.probeCgroups(ctx)
	dirs, _, err := makeRunDirs(p.opts.WorkRoot, "", int(p.opts.SandboxUID), int(p.opts.SandboxGID))
	defer func() {
		if dirs.Root != "" {
			if rerr := os.RemoveAll(dirs.Root); rerr != nil {
				p.log.LogAttrs(ctx, slog.LevelWarn, "remove probe dir", slog.String(logkey.Err, rerr.Error()))
			}
		}
	}()
	if err != nil {
		return nil, nil, fmt.Errorf("probe workspace: %w", err)
	}
	id, err := randomID()
	if err != nil {
		return nil, nil, err
	}
	step := validation.Step{Name: "isolation-probe", Argv: []string{"/bin/sh", "-c", probeScript, "probe", strconv.FormatUint(uint64(p.opts.SandboxUID), 10)}}
	probeIn := func(cg cgroupHost) (r validation.StepResult, err error) {
		sb := &sandbox{opts: p.opts, log: p.log, dirs: dirs, cg: cg, name: cgroupName("probe-" + id)}
		// The probe's step is not an install step: it has no network.
		if err := sb.openCgroup(); err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, sb.closeCgroup(context.WithoutCancel(ctx))) }()
		return sb.runStep(ctx, stepRun{step: step, timeout: ProbeTimeout, maxOutput: ProbeMaxOutputBytes})
	}

	if _, err := os.Stat(p.opts.BwrapPath); err != nil {
		res.tier = validation.TierNone
		res.notes = append(res.notes, fmt.Sprintf("bubblewrap is not usable at %s: %v", p.opts.BwrapPath, err))
		return p.direct(ctx, res, dirs)
	}
	r, err := probeIn(res.cg)
	if err != nil && res.cg.version != cgroupNone {
		// The sandbox could not be set up inside a cgroup: try without,
		// to tell a cgroup problem from a bwrap problem.
		res.notes = append(res.notes, "no cgroup limits: a sandbox could not be placed in a cgroup: "+err.Error())
		res.cg = cgroupHost{}
		r, err = probeIn(res.cg)
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("isolation probe: %w", ctx.Err())
	}
	if isCredentialError(err) {
		return nil, validation.Refuse(validation.CodeSandboxUserUnavailable, "the worker cannot switch to the sandbox uid %d", p.opts.SandboxUID), nil
	}
	if err != nil || r.Status != validation.StatusPassed {
		res.tier = validation.TierNone
		res.notes = append(res.notes, "bubblewrap sandbox unusable: "+probeFailure(r, err))
		return p.direct(ctx, res, dirs)
	}
	res.notes = append(res.notes, seccompNote())
	p.grade(ctx, res)
	return res, nil, nil
}

// probeCgroups finds the cgroups the worker may use, removes those a
// worker that died left, and checks that limits can be set.
func (p *prober) probeCgroups(ctx context.Context) *probed {
	res := &probed{}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		res.notes = append(res.notes, "no cgroup limits: cannot read /proc/self/cgroup")
	} else {
		res.cg = detectCgroups(p.opts.CgroupRoot, self)
	}
	if res.cg.version == cgroupNone {
		return res
	}
	if n, err := res.cg.sweep(ctx); err != nil {
		p.log.LogAttrs(ctx, slog.LevelWarn, "sweep stale cgroups", slog.String(logkey.Executor, Name), slog.String(logkey.Err, err.Error()))
	} else if n > 0 {
		p.log.LogAttrs(ctx, slog.LevelWarn, "removed cgroups left by a worker that died",
			slog.String(logkey.Executor, Name), slog.Int(logkey.Count, n))
	}
	res.cg = p.checkCgroups(res.cg)
	return res
}

// grade sets the tier of a host whose bwrap sandbox passed the probe: read
// only with cgroup limits and the disk ceiling, else no network; its notes
// say which limits are in force and why others are not.
func (p *prober) grade(ctx context.Context, res *probed) {
	diskWhy := p.checkDisk(ctx, res)
	if res.cg.version != cgroupNone && res.cg.limits && diskWhy == "" {
		res.tier = validation.TierReadOnly
		l := p.opts.Limits
		res.notes = append(res.notes, fmt.Sprintf("cgroup %s limits in force per step: memory %d bytes, %d pids, %.2g CPUs",
			res.cg.version, l.MemoryBytes, l.Pids, l.CPUs))
	} else {
		if diskWhy != "" {
			res.notes = append(res.notes, "no disk ceiling: "+diskWhy)
		}
		res.tier = validation.TierNoNetwork
		if res.cg.why != "" {
			res.notes = append(res.notes, "no cgroup limits: "+res.cg.why)
		}
	}
	if res.disk != nil {
		res.notes = append(res.notes, fmt.Sprintf("disk ceiling in force per run: %d bytes, %d inodes (its own ext4 file system)", p.opts.Disk.Bytes, p.opts.Disk.Inodes))
	} else {
		res.notes = append(res.notes, NoDiskHostPathsNote)
	}
}

// NoDiskHostPathsNote is what the record says of a run without a file
// system of its own: a bind mount shows, in /proc/self/mountinfo, its
// source's path inside the file system it is on (docs/sandbox-bypasses.md).
const NoDiskHostPathsNote = "without a disk ceiling the sandbox's workspace, HOME and TMPDIR, and a package manager from the toolchain, are directories of the worker's bound in: /proc/self/mountinfo inside shows their paths on the worker's file system"

// direct checks that tier none can at least run a process as the sandbox
// uid.
func (p *prober) direct(ctx context.Context, res *probed, dirs runDirs) (*probed, *validation.Refusal, error) {
	id, err := randomID()
	if err != nil {
		return nil, nil, err
	}
	sb := &sandbox{opts: p.opts, log: p.log, dirs: dirs, cg: res.cg, direct: true, name: cgroupName("probe-direct-" + id)}
	if err := sb.openCgroup(); err != nil {
		return nil, nil, fmt.Errorf("isolation probe: %w", err)
	}
	_, err = sb.runStep(ctx, stepRun{
		step:    validation.Step{Name: "isolation-probe", Argv: []string{"/bin/true"}},
		timeout: ProbeTimeout, maxOutput: ProbeMaxOutputBytes,
	})
	err = errors.Join(err, sb.closeCgroup(context.WithoutCancel(ctx)))
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("isolation probe: %w", ctx.Err())
	}
	if isCredentialError(err) {
		return nil, validation.Refuse(validation.CodeSandboxUserUnavailable, "the worker cannot switch to the sandbox uid %d", p.opts.SandboxUID), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("isolation probe: %w", err)
	}
	return res, nil, nil
}

// checkCgroups makes and removes a cgroup with the limits, so the tier
// says what was really possible.
func (p *prober) checkCgroups(h cgroupHost) cgroupHost {
	id, err := randomID()
	if err != nil {
		h.version, h.why = cgroupNone, err.Error()
		return h
	}
	cg, err := h.create(cgroupName("check-"+id), p.opts.Limits, false)
	if err == nil {
		if rerr := cg.remove(); rerr != nil {
			h.version, h.why = cgroupNone, rerr.Error()
		}
		return h
	}
	if h.limits {
		h.limits, h.why = false, "cannot set cgroup limits: "+err.Error()
		if cg, err2 := h.create(cgroupName("check-"+id), p.opts.Limits, false); err2 == nil {
			if rerr := cg.remove(); rerr == nil {
				return h
			}
		}
	}
	return cgroupHost{why: "cannot create cgroups: " + err.Error()}
}

func isCredentialError(err error) bool {
	return errors.Is(err, os.ErrPermission)
}

func probeFailure(r validation.StepResult, err error) string {
	if err != nil {
		return err.Error()
	}
	if r.ExitCode != nil {
		switch *r.ExitCode {
		case probeExitUID:
			return "the sandbox does not run as the sandbox uid"
		case probeExitHome:
			return "the host's /root is visible inside"
		case probeExitRootRW:
			return "the sandbox root is writable"
		case probeExitNetwork:
			return "the sandbox has a network interface besides lo"
		case probeExitHostProc:
			return "the host's cgroup tree is visible inside"
		case probeExitUserns:
			return "a new user namespace can be made inside"
		case probeExitSeccomp:
			return "no seccomp filter is in force inside"
		case probeExitNetlink:
			return "a netlink socket can be opened inside: gilf's seccomp filter is not in force"
		}
	}
	return fmt.Sprintf("probe ended %s: %s", r.Status, firstLine(r.Output.Head))
}
