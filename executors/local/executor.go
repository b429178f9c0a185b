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

// Run runs req.Plan as executors.Executor's lifecycle says.
func (e *Executor) Run(ctx context.Context, req executors.Request) (res executors.Result, err error) {
	clock := newPhaseClock()
	p, err := e.probe.get(ctx)
	if err != nil {
		return executors.Result{}, err
	}
	if !meets(p.tier, e.opts.MinTier) {
		return executors.Result{}, validation.Refuse(validation.CodeIsolationTierUnmet,
			"this host gives local isolation tier %s, below the required %s", p.tier, e.opts.MinTier)
	}
	denyDirs, denyFiles, err := splitDenyRead(e.opts.DenyRead)
	if err != nil {
		return executors.Result{}, err
	}

	res = executors.Result{
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
	// Registered first, so it runs last: the cleanup is timed too.
	defer func() {
		if err == nil {
			clock.mark("cleanup")
			res.Phases = clock.phases
		}
	}()

	runID, err := randomID()
	if err != nil {
		return executors.Result{}, err
	}
	// The run's own uid: released once every process of the run is gone
	// (the deferred cleanups below run first).
	// The egress control: an install step that asks for the registry
	// needs the bridge; when it cannot be found, the step's network cannot
	// be stated, and nothing runs.
	if r := e.admitEgress(req.Plan); r != nil {
		return executors.Result{}, r
	}
	// The package manager at the checkout's version, prepared before
	// anything starts: one that cannot be had is a refusal.
	tool, err := e.chooseTool(ctx, req.Plan, req.Dir)
	if err != nil {
		return executors.Result{}, err
	}
	defer tool.close()
	res.Platform.PackageManagerVersion = tool.version
	res.Notes = append(res.Notes, tool.notes...)
	clock.mark("package-manager")
	// An exhausted pool is an infrastructure error: the job is retried
	// once a run ends.
	tn, err := e.uids.take()
	var ref *validation.Refusal
	if errors.As(err, &ref) {
		return executors.Result{}, ref
	}
	if err != nil {
		return executors.Result{}, fmt.Errorf("sandbox uid: %w", err)
	}
	defer func() {
		if rerr := e.uids.release(tn); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	opts := e.opts
	opts.SandboxUID, opts.SandboxGID = tn.uid, tn.gid
	dirs, skipped, err := makeRunDirsOn(ctx, e.opts.WorkRoot, req.Dir, int(opts.SandboxUID), int(opts.SandboxGID), p.disk, e.opts.Disk)
	// Cleanup runs in every outcome, a panic included.
	defer func() {
		if rerr := dirs.remove(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if err != nil {
		return executors.Result{}, fmt.Errorf("prepare workspace: %w", err)
	}
	clock.mark("workspace")
	if len(skipped) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("not copied into the workspace (special files or hard links): %s", summarize(skipped, 10)))
	}
	if err := tool.writeShims(dirs.Base); err != nil {
		return executors.Result{}, fmt.Errorf("prepare workspace: %w", err)
	}
	if e.ca != nil {
		if err := writePublic(filepath.Join(dirs.Etc, caEtcName), e.ca); err != nil {
			return executors.Result{}, fmt.Errorf("prepare workspace: %w", err)
		}
	}
	for name, rc := range map[string]string{
		".npmrc":      userNpmrc(e.opts.Egress.Registries),
		".yarnrc.yml": userYarnrc(e.opts.Egress.Registries),
	} {
		if rc == "" {
			continue
		}
		if err := writeOwned(filepath.Join(dirs.Home, name), []byte(rc), int(opts.SandboxUID), int(opts.SandboxGID)); err != nil {
			return executors.Result{}, fmt.Errorf("prepare workspace: %w", err)
		}
	}
	sb := &sandbox{
		log:       e.log,
		opts:      opts,
		dirs:      dirs,
		direct:    p.tier == validation.TierNone,
		cg:        p.cg,
		secrets:   req.Secrets,
		name:      cgroupName("run-" + runID),
		denyDirs:  denyDirs,
		denyFiles: denyFiles,
		tool:      tool.dir,
		ca:        e.ca != nil,
		env:       tool.env(e.ca != nil),
		repoEnv:   req.Plan.Env,
		up:        e.up,
	}
	if err := sb.openCgroup(); err != nil {
		return executors.Result{}, err
	}
	defer func() {
		if cerr := sb.closeCgroup(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	clock.mark("config-and-cgroup")
	if sb.cg.limits && sb.cg.version != cgroupNone {
		l := e.opts.Limits
		res.Resources = executors.Resources{VCPU: l.CPUs, MemoryGiB: float64(l.MemoryBytes) / (1 << 30)}
	}

	node, perr := sb.runStep(ctx, stepRun{
		step:      validation.Step{Name: "platform-probe", Argv: []string{"node", "--version"}},
		timeout:   ProbeTimeout,
		maxOutput: ProbeMaxOutputBytes,
	})
	if perr != nil {
		return executors.Result{}, fmt.Errorf("platform probe: %w", perr)
	}
	clock.mark("platform-probe")
	if v := strings.TrimSpace(node.Output.Head); node.Status == validation.StatusPassed && isVersion(v) {
		res.Platform.Node = v
	} else {
		res.Notes = append(res.Notes, "node --version did not run in the sandbox; node version unknown")
	}

	if !e.opts.NoGitWorkTree && runsAnything(req.Plan) {
		note, gerr := sb.gitWorkTree(ctx, req.Labels["head_sha"], req.Labels)
		if gerr != nil {
			return executors.Result{}, gerr
		}
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
		clock.mark("git-work-tree")
	}

	res.Steps = make([]validation.StepResult, 0, len(req.Plan.Steps))
	stop := "" // why later steps are not run
	for _, st := range req.Plan.Steps {
		if st.Inconclusive != "" {
			res.Steps = append(res.Steps, notRun(e.opts, st, validation.StatusInconclusive, st.Inconclusive))
			continue
		}
		if stop != "" {
			res.Steps = append(res.Steps, notRun(e.opts, st, validation.StatusNotRun, stop))
			continue
		}
		if ctx.Err() != nil {
			stop = "the run was cancelled"
			res.Steps = append(res.Steps, notRun(e.opts, st, validation.StatusNotRun, stop))
			continue
		}
		if req.Progress != nil {
			req.Progress(st.Name, time.Now())
		}
		timeout := st.Timeout
		if timeout <= 0 {
			timeout = e.opts.StepTimeout
		}
		sr, serr := sb.runStep(ctx, stepRun{
			step:      st,
			timeout:   timeout,
			maxOutput: e.opts.MaxOutputBytes,
		})
		clock.mark("step:" + st.Name)
		e.log.LogAttrs(ctx, slog.LevelInfo, "local step ended",
			slog.String("executor", Name), slog.String("step", st.Name),
			slog.String("status", string(sr.Status)), slog.Int64("duration_ms", sr.DurationMs))
		if serr != nil {
			// Infrastructure: the run cannot be trusted, whatever the
			// step printed.
			return executors.Result{}, serr
		}
		if dirs.disk != nil {
			full, ferr := dirs.disk.full()
			if ferr != nil {
				return executors.Result{}, ferr
			}
			if full {
				sr.Reason = joinReason(sr.Reason, e.opts.Disk.ceilingWords())
			}
		}
		res.Steps = append(res.Steps, sr)
		if sr.Network == validation.NetworkHost {
			note := fmt.Sprintf("step %s shared the host network: tier none makes no network namespace", st.Name)
			if st.Network == validation.NetworkRegistry {
				// The plan's notes speak of the registry proxy as the
				// install step's only network: not at this tier.
				note += ", and no proxy stood between it and the network (the plan's notes of a registry proxy as its only network do not hold at tier none)"
			}
			res.Notes = append(res.Notes, note)
		}
		switch {
		case ctx.Err() != nil:
			stop = "the run was cancelled"
		case st.Name == validation.StepInstall && sr.Status != validation.StatusPassed:
			stop = "the install step did not pass"
		}
	}
	res.Finished = time.Now()
	if ctx.Err() != nil {
		return res, fmt.Errorf("local run: %w", ctx.Err())
	}
	return res, nil
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
