package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Executor runs each step of a plan in its own bubblewrap sandbox over one
// private, writable copy of the checkout, as an unprivileged uid, with
// cgroup limits where the host allows them. The host's wait status is the
// authority for every step. It is safe for concurrent use.
type Executor struct {
	opts  Options
	log   *slog.Logger
	probe *prober
	uids  *uidPool
	// ca is the sandbox's CA bundle: Options.CAFile's content, read
	// once by New, then the worker's egress CA when the proxy
	// terminates TLS.
	ca []byte
	// up is the one pool of registry connections every install step's
	// proxy shares.
	up *egress.Upstreams
	// images are the package managers' images this process checked
	// (toolimage.go).
	images checkedImages
	// warm makes the warm disks' images (warmdisk.go).
	warm warmDisks
}

// in reports whether id is one of the count ids from first.
func in(id, first, count uint32) bool { return id >= first && uint64(id) < uint64(first)+uint64(count) }

var _ executors.Executor = (*Executor)(nil)

// New returns an Executor with opts (zero fields take their defaults). It
// checks the options (the disk ceiling with mkfs -n, which writes nothing)
// but starts no sandbox: the isolation probe runs at the
// first Run or Tier call. A nil logger discards.
func New(log *slog.Logger, opts Options) (*Executor, error) {
	if log == nil {
		log = discardLogger()
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("local executor options: %w", err)
	}
	if in(uint32(os.Getuid()), opts.SandboxUID, opts.UIDCount) || in(uint32(os.Getgid()), opts.SandboxGID, opts.UIDCount) {
		return nil, fmt.Errorf("local executor options: the sandbox uids %d–%d and gids %d–%d must not hold the worker's own",
			opts.SandboxUID, opts.SandboxUID+opts.UIDCount-1, opts.SandboxGID, opts.SandboxGID+opts.UIDCount-1)
	}
	if err := ownWorkRoot(opts.WorkRoot); err != nil {
		return nil, fmt.Errorf("local executor options: %w", err)
	}
	if err := checkDiskFits(context.Background(), opts.MkfsPath, opts.WorkRoot, opts.Disk); err != nil {
		return nil, fmt.Errorf("local executor options: %w", err)
	}
	var ca []byte
	if opts.CAFile != "" {
		var err error
		if ca, err = ReadCAFile(opts.CAFile); err != nil {
			return nil, fmt.Errorf("local executor options: %w", err)
		}
	}
	if opts.Egress.CA != nil {
		ca = slices.Clip(ca)
		if len(ca) > 0 && ca[len(ca)-1] != '\n' {
			ca = append(ca, '\n')
		}
		ca = append(ca, opts.Egress.CA.PEM()...)
	}
	up, err := opts.Egress.newUpstreams()
	if err != nil {
		return nil, fmt.Errorf("local executor options: %w", err)
	}
	return &Executor{opts: opts, log: log, probe: newProber(opts, log), uids: newUIDPool(opts), ca: ca, up: up}, nil
}

// Name is "local".
func (e *Executor) Name() string { return Name }

// Options returns the options in force, defaults applied.
func (e *Executor) Options() Options { return e.opts }

// Tier probes (once; the answer is cached) and returns the isolation tier
// this host gives. A *validation.Refusal says the sandbox user is
// unavailable or the tier could not be established.
func (e *Executor) Tier(ctx context.Context) (validation.Tier, error) {
	p, err := e.probe.get(ctx)
	if err != nil {
		return "", err
	}
	return p.tier, nil
}

// Run runs req.Plan as executors.Executor's lifecycle says, in phases:
// prepare (the isolation probe, the package manager, the run's uid,
// workspace, configuration and cgroup), start (the platform probe and the
// git work tree: the sandbox shown to work), wait (the plan's steps, one
// after another), the warm disk of its lockfile (made once its install
// passed, warmdisk.go), collect (the result) and clean up (the cgroup, the
// workspace, the uid and the package manager released, in every
// outcome). The record's phases time them (see phaseClock).
func (e *Executor) Run(ctx context.Context, req executors.Request) (res executors.Result, err error) {
	r, err := e.admit(ctx, req)
	if err != nil {
		return executors.Result{}, err
	}
	// Registered first, so it runs last: the cleanup is timed too.
	defer func() {
		if err == nil {
			r.clock.mark("cleanup")
			res.Phases = r.clock.phases
		}
	}()
	defer func() { err = errors.Join(err, r.cleanup(ctx)) }()
	if err := r.prepare(ctx); err != nil {
		return executors.Result{}, err
	}
	if err := r.start(ctx); err != nil {
		return executors.Result{}, err
	}
	if err := r.wait(ctx); err != nil {
		return executors.Result{}, err
	}
	r.buildWarm(ctx)
	return r.collect(ctx)
}

// run is one Run through its phases.
type run struct {
	e     *Executor
	req   executors.Request
	p     *probed
	clock *phaseClock
	res   executors.Result
	// denyDirs and denyFiles split Options.DenyRead.
	denyDirs, denyFiles []string
	// Held by the run, released by cleanup: the package manager, the
	// run's uid, its directories, its sandbox (with the cgroup).
	tool toolMount
	tn   *tenant
	dirs runDirs
	sb   *sandbox
	// warm is the run's warm disk (warmdisk.go).
	warm warmPlan
}

// admit probes the isolation (once per Executor) and checks that it meets
// Options.MinTier: the "isolation" phase, before anything is held.
func (e *Executor) admit(ctx context.Context, req executors.Request) (*run, error) {
	clock := newPhaseClock()
	p, err := e.probe.get(ctx)
	if err != nil {
		return nil, err
	}
	if !meets(p.tier, e.opts.MinTier) {
		return nil, validation.Refuse(validation.CodeIsolationTierUnmet,
			"this host gives local isolation tier %s, below the required %s", p.tier, e.opts.MinTier)
	}
	denyDirs, denyFiles, err := splitDenyRead(e.opts.DenyRead)
	if err != nil {
		return nil, err
	}
	res := executors.Result{
		Executor: Name,
		Tier:     p.tier,
		Platform: hostPlatform(),
		Started:  time.Now(),
	}
	for _, s := range req.Secrets {
		res.SecretsWithheld = append(res.SecretsWithheld, s.Name)
	}
	res.Notes = append(res.Notes, p.notes...)
	clock.mark("isolation")
	return &run{e: e, req: req, p: p, clock: clock, res: res, denyDirs: denyDirs, denyFiles: denyFiles}, nil
}

// prepare holds what the run needs before anything runs: the egress
// control's admission, the package manager ("package-manager"), a uid of
// the pool and the workspace ("workspace"), the run's configuration files
// and cgroup ("config-and-cgroup"). What it holds, cleanup releases.
func (r *run) prepare(ctx context.Context) error {
	runID, err := randomID()
	if err != nil {
		return err
	}
	// An install step that asks for the registry needs the bridge; when
	// it cannot be found, the step's network cannot be stated, and
	// nothing runs.
	if ref := r.e.admitEgress(r.req.Plan); ref != nil {
		return ref
	}
	// The package manager at the checkout's version, prepared before
	// anything starts: one that cannot be had is a refusal.
	tool, err := r.e.chooseTool(ctx, r.req.Plan, r.req.Dir)
	if err != nil {
		return err
	}
	r.tool = tool
	r.res.Platform.PackageManagerVersion = r.tool.version
	r.res.Notes = append(r.res.Notes, r.tool.notes...)
	r.clock.mark("package-manager")
	if err := r.takeWorkspace(ctx); err != nil {
		return err
	}
	r.placeTool(ctx)
	r.clock.mark("workspace")
	if err := r.writeConfig(); err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	if err := r.openSandbox(runID); err != nil {
		return err
	}
	r.clock.mark("config-and-cgroup")
	return nil
}

// takeWorkspace takes the run's own uid (released once every process of
// the run is gone) and makes its directories, the checkout copied in.
func (r *run) takeWorkspace(ctx context.Context) error {
	// An exhausted pool is an infrastructure error: the job is retried
	// once a run ends.
	r.warm = r.e.warmFor(r.req.Plan, r.tool, r.req.Dir)
	tn, err := r.e.uids.take(r.warm.owner)
	var ref *validation.Refusal
	if errors.As(err, &ref) {
		return ref
	}
	if err != nil {
		return fmt.Errorf("sandbox uid: %w", err)
	}
	r.tn = tn
	opts := r.e.opts
	dirs, skipped, err := makeRunDirsOn(ctx, opts.WorkRoot, r.req.Dir, int(tn.uid), int(tn.gid), r.p.disk, opts.Disk, r.warm.image)
	// Removed by cleanup in every outcome, what was made of it too.
	r.dirs = dirs
	if err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	if len(skipped) > 0 {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("not copied into the workspace (special files or hard links): %s", summarize(skipped, 10)))
	}
	return nil
}

// placeTool mounts the package manager's image in the run directory when
// the run has a file system of its own (toolimage.go): its steps then bind
// nothing of the worker's. Without one, they bind the mirror; so they do
// when the image cannot be made or mounted (an mkfs.ext4 without -d, say),
// and the record says what that shows.
func (r *run) placeTool(ctx context.Context) {
	if r.tool.src == "" || r.dirs.disk == nil || r.p.disk == nil {
		return
	}
	img, err := r.e.toolImage(ctx, *r.p.disk, r.tool.src, r.tool.dir)
	dir := ""
	if err == nil {
		dir, err = mountTool(ctx, *r.p.disk, img, r.dirs.Root)
		img.Close()
	}
	if err != nil {
		r.e.log.Warn("package manager image unusable; its mirror is bound instead", logkey.Manager, string(r.tool.manager), logkey.Err, err.Error())
		r.res.Notes = append(r.res.Notes, ToolMirrorBoundNote(r.tool.manager))
		return
	}
	r.dirs.Tool, r.tool.dir = dir, dir
}

// ToolMirrorBoundNote is what the record says when a package manager from
// the toolchain is bound from its mirror on a run that has a file system of
// its own.
func ToolMirrorBoundNote(pm validation.PackageManager) string {
	return fmt.Sprintf("%s is bound from the worker's mirror (its image could not be mounted): /proc/self/mountinfo inside shows that mirror's path on the worker's file system", validation.ToolBinary(pm))
}

// writeConfig writes the package manager's shims, the CA bundle and the
// sandbox user's registry settings into the run's directories.
func (r *run) writeConfig() error {
	if err := r.tool.writeShims(r.dirs.Base); err != nil {
		return err
	}
	if r.e.ca != nil {
		if err := writePublic(filepath.Join(r.dirs.Etc, caEtcName), r.e.ca); err != nil {
			return err
		}
	}
	for name, rc := range map[string]string{
		".npmrc":      userNpmrc(r.e.opts.Egress.Registries),
		".yarnrc.yml": userYarnrc(r.e.opts.Egress.Registries),
	} {
		if rc == "" {
			continue
		}
		if err := writeOwned(filepath.Join(r.dirs.Home, name), []byte(rc), int(r.tn.uid), int(r.tn.gid)); err != nil {
			return err
		}
	}
	return nil
}

// openSandbox makes what the run's steps share, with the run's cgroup.
func (r *run) openSandbox(runID string) error {
	e := r.e
	opts := e.opts
	opts.SandboxUID, opts.SandboxGID = r.tn.uid, r.tn.gid
	sb := &sandbox{
		log:       e.log,
		opts:      opts,
		dirs:      r.dirs,
		direct:    r.p.tier == validation.TierNone,
		cg:        r.p.cg,
		secrets:   r.req.Secrets,
		name:      cgroupName("run-" + runID),
		denyDirs:  r.denyDirs,
		denyFiles: r.denyFiles,
		tool:      r.tool.dir,
		manager:   r.tool.manager,
		ca:        e.ca != nil,
		env:       r.tool.env(e.ca != nil),
		repoEnv:   r.req.Plan.Env,
		up:        e.up,
	}
	if err := sb.openCgroup(); err != nil {
		return err
	}
	r.sb = sb
	if sb.cg.limits && sb.cg.version != cgroupNone {
		l := e.opts.Limits
		r.res.Resources = executors.Resources{VCPU: l.CPUs, MemoryGiB: float64(l.MemoryBytes) / (1 << 30)}
	}
	return nil
}

// start shows the sandbox works before the plan's steps run in it: node's
// version from inside ("platform-probe"), and the checkout made a git work
// tree when a step will run ("git-work-tree").
func (r *run) start(ctx context.Context) error {
	node, err := r.sb.runStep(ctx, stepRun{
		step:      validation.Step{Name: "platform-probe", Argv: []string{"node", "--version"}},
		timeout:   ProbeTimeout,
		maxOutput: ProbeMaxOutputBytes,
	})
	if err != nil {
		return fmt.Errorf("platform probe: %w", err)
	}
	r.clock.mark("platform-probe")
	if v := strings.TrimSpace(node.Output.Head); node.Status == validation.StatusPassed && isVersion(v) {
		r.res.Platform.Node = v
	} else {
		r.res.Notes = append(r.res.Notes, "node --version did not run in the sandbox; node version unknown")
	}
	if r.e.opts.NoGitWorkTree || !runsAnything(r.req.Plan) {
		return nil
	}
	note, err := r.sb.gitWorkTree(ctx, r.req.Labels["head_sha"], r.req.Labels)
	if err != nil {
		return err
	}
	if note != "" {
		r.res.Notes = append(r.res.Notes, note)
	}
	r.clock.mark("git-work-tree")
	return nil
}

// wait runs the plan's steps one after another ("step:<name>" each); once
// the install step fails or the run is cancelled, the rest are not run.
// An error is an infrastructure failure: the run cannot be trusted,
// whatever the steps printed.
func (r *run) wait(ctx context.Context) error {
	r.res.Steps = make([]validation.StepResult, 0, len(r.req.Plan.Steps))
	stop := "" // why later steps are not run
	for _, st := range r.req.Plan.Steps {
		if st.Inconclusive != "" {
			r.res.Steps = append(r.res.Steps, notRun(r.e.opts, st, validation.StatusInconclusive, st.Inconclusive))
			continue
		}
		if stop == "" && ctx.Err() != nil {
			stop = "the run was cancelled"
		}
		if stop != "" {
			r.res.Steps = append(r.res.Steps, notRun(r.e.opts, st, validation.StatusNotRun, stop))
			continue
		}
		sr, err := r.runStep(ctx, st)
		if err != nil {
			return err
		}
		switch {
		case ctx.Err() != nil:
			stop = "the run was cancelled"
		case st.Name == validation.StepInstall && sr.Status != validation.StatusPassed:
			stop = "the install step did not pass"
		}
	}
	return nil
}

// runStep runs one of the plan's steps and adds its result, with what
// the run's disk ceiling and tier say of it.
func (r *run) runStep(ctx context.Context, st validation.Step) (validation.StepResult, error) {
	if r.req.Progress != nil {
		r.req.Progress(st.Name, time.Now())
	}
	timeout := st.Timeout
	if timeout <= 0 {
		timeout = r.e.opts.StepTimeout
	}
	sr, err := r.sb.runStep(ctx, stepRun{step: st, timeout: timeout, maxOutput: r.e.opts.MaxOutputBytes})
	r.clock.mark("step:" + st.Name)
	r.e.log.LogAttrs(ctx, slog.LevelInfo, "local step ended",
		slog.String(logkey.Executor, Name), slog.String(logkey.Step, st.Name),
		slog.String(logkey.Status, string(sr.Status)), slog.Int64(logkey.DurationMS, sr.DurationMs))
	if err != nil {
		return sr, err
	}
	if r.dirs.disk != nil {
		full, err := r.dirs.disk.full()
		if err != nil {
			return sr, err
		}
		if full {
			sr.Reason = joinReason(sr.Reason, r.e.opts.Disk.ceilingWords())
		}
	}
	r.res.Steps = append(r.res.Steps, sr)
	if sr.Network == validation.NetworkHost {
		note := fmt.Sprintf("step %s shared the host network: tier none makes no network namespace", st.Name)
		if st.Network == validation.NetworkRegistry {
			// The plan's notes speak of the registry proxy as the
			// install step's only network: not at this tier.
			note += ", and no proxy stood between it and the network (the plan's notes of a registry proxy as its only network do not hold at tier none)"
		}
		r.res.Notes = append(r.res.Notes, note)
	}
	return sr, nil
}

// collect finishes the result; a cancelled run returns it with the
// cancellation.
func (r *run) collect(ctx context.Context) (executors.Result, error) {
	r.res.Finished = time.Now()
	if ctx.Err() != nil {
		return r.res, fmt.Errorf("local run: %w", ctx.Err())
	}
	return r.res, nil
}

// cleanup releases what prepare held, in reverse, in every outcome (a
// panic included): the run's cgroup (whatever is left in it killed), its
// directories, its uid (once every process of the run is gone), the
// package manager.
func (r *run) cleanup(ctx context.Context) (err error) {
	if r.sb != nil {
		err = r.sb.closeCgroup(context.WithoutCancel(ctx))
	}
	if rerr := r.dirs.remove(); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if r.tn != nil {
		if rerr := r.e.uids.release(r.tn); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	r.tool.close()
	return err
}

// notRun is the result of a step that did not run.
func notRun(opts Options, st validation.Step, status validation.Status, reason string) validation.StepResult {
	timeout := st.Timeout
	if timeout <= 0 {
		timeout = opts.StepTimeout
	}
	return validation.StepResult{
		Name:      st.Name,
		Argv:      st.Argv,
		Cwd:       SandboxWorkspace,
		TimeoutMs: timeout.Milliseconds(),
		Network:   stepNetwork(st),
		Status:    status,
		Reason:    reason,
	}
}

// splitDenyRead sorts DenyRead into directories and other files; entries
// missing on the host have nothing to hide and are dropped.
func splitDenyRead(paths []string) (dirs, files []string, err error) {
	for _, p := range paths {
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, nil, fmt.Errorf("deny-read path %s: %w", p, err)
		case st.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	return dirs, files, nil
}

// hostPlatform describes the worker; the node version comes from inside
// the sandbox.
func hostPlatform() validation.Platform {
	p := validation.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		p.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return p
}

// isVersion accepts what node --version prints (v20.11.1) and nothing
// else: the output comes from a sandbox and is not trusted.
func isVersion(s string) bool {
	if len(s) < 2 || len(s) > 32 || s[0] != 'v' {
		return false
	}
	for _, r := range s[1:] {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

func randomID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// summarize lists at most n names, quoted: they come from the checkout.
func summarize(s []string, n int) string {
	q := make([]string, 0, min(len(s), n))
	for _, name := range s[:min(len(s), n)] {
		q = append(q, strconv.Quote(name))
	}
	if len(s) <= n {
		return strings.Join(q, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(q, ", "), len(s)-n)
}
