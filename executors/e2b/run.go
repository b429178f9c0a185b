package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/validation"
)

// archiveName is the archive's name in the run directory.
const archiveName = "repo.tar.gz"

// setupScript prints the platform, then extracts the archive, whose one
// top directory is archive.PackRoot (checked by TestSetupScript), in the
// run directory. It runs before any code of the repository does.
const setupScript = `set -eu
printf 'os=%s\n' "$(uname -s)"
printf 'arch=%s\n' "$(uname -m)"
printf 'kernel=%s\n' "$(uname -r)"
printf 'node=%s\n' "$(node --version 2>/dev/null || true)"
tar -xzf ` + archiveName + `
rm -f ` + archiveName + `
test -d repo
`

// sandboxRun is one run's wire calls: the E2B API for the sandbox and
// its egress, envd for files and processes (remote.Provider).
type sandboxRun struct {
	e        *Executor
	req      executors.Request
	egress   egressPlan
	lifetime time.Duration
	capped   bool // the lifetime was cut to the cap

	createdAt time.Time
	info      sandboxInfo
	envd      *envdClient
	runDir    string
	network   *netState
}

var _ remote.Provider = (*sandboxRun)(nil)

// Create asks the API for a sandbox with the run's lifetime and its
// initial egress.
func (r *sandboxRun) Create(ctx context.Context) (string, error) {
	body := createRequest{
		TemplateID: r.e.template(r.req.Run),
		Timeout:    int64(r.lifetime / time.Second),
		Secure:     true,
		Metadata:   metadata(r.req.Labels),
	}
	body.AllowInternetAccess, body.Network = r.egress.initial.allowInternet, r.egress.initial.config()
	r.createdAt = time.Now()
	info, err := r.e.api.create(ctx, body)
	if err != nil {
		return "", err
	}
	r.info = info
	return info.SandboxID, nil
}

// Destroy kills the sandbox; one already gone is not an error.
func (r *sandboxRun) Destroy(ctx context.Context, id string) error {
	_, err := r.e.api.kill(ctx, id)
	return err
}

// Open makes the envd client, redacts its access token, and notes the
// sandbox, its egress and its size.
func (r *sandboxRun) Open(ctx context.Context, s *remote.Session, res *executors.Result) error {
	e, info := r.e, r.info
	if info.EnvdAccessToken != "" {
		s.Secrets = append(s.Secrets, validation.Secret{Name: "envdAccessToken", Value: info.EnvdAccessToken})
	}
	domain := e.opts.Domain
	if info.Domain != nil && *info.Domain != "" {
		domain = *info.Domain
	}
	r.envd = &envdClient{
		base:      envdBaseURL(e.opts.EnvdURL, s.ID, domain),
		sandboxID: s.ID,
		token:     info.EnvdAccessToken,
		user:      e.opts.User,
		http:      e.http,
	}
	r.runDir = e.opts.WorkDir + "/run-" + s.Run
	r.network = &netState{api: e.api, id: s.ID, egress: r.egress, current: r.egress.initial, callTimeout: e.opts.CallTimeout}
	res.Notes = append(res.Notes,
		fmt.Sprintf("E2B sandbox %s from template %s (envd %s)", s.ID, e.template(r.req.Run), remote.CleanMessage(info.EnvdVersion)),
		r.egress.note(),
		"step statuses were reported by the executor: each step's marker shell ran in the E2B sandbox; gilf did not observe the exit statuses",
	)
	if r.capped {
		res.Notes = append(res.Notes, fmt.Sprintf("sandbox lifetime %v, capped by %s", r.lifetime, EnvTimeout))
	}
	res.Resources, res.Notes = e.resources(ctx, s.ID, res.Notes)
	return nil
}

// Upload writes the archive into the run directory.
func (r *sandboxRun) Upload(ctx context.Context, arch io.Reader, size int64) error {
	return r.envd.upload(ctx, r.runDir+"/"+archiveName, arch, size)
}

// Setup runs setupScript as one envd process in the run directory.
func (r *sandboxRun) Setup(ctx context.Context, budget time.Duration, out io.Writer) (remote.ProcEnd, error) {
	return r.envd.start(ctx, "prepare the checkout", processConfig{
		Cmd: "/bin/sh", Args: []string{"-c", setupScript}, Envs: map[string]string{"LC_ALL": "C"}, Cwd: r.runDir,
	}, budget, out, nil)
}

// Steps runs each step as one envd process in the checkout, its egress
// set before it, within the sandbox's lifetime.
func (r *sandboxRun) Steps(sp *remote.StepPlan) remote.StepRunner {
	sp.Cwd = r.runDir + "/" + archive.PackRoot
	sp.Deadline = r.createdAt.Add(r.lifetime - r.e.opts.LifetimeMargin)
	sp.Lifetime = fmt.Sprintf("the sandbox lifetime (%v, %s)", r.lifetime, EnvTimeout)
	sp.BeforeStep = r.network.prepare
	return &processRunner{envd: r.envd, cwd: sp.Cwd}
}

// Collect records the egress E2B enforced and the egress changes.
func (r *sandboxRun) Collect(res *executors.Result) {
	executors.RecordEgress(r.req.Plan, res.Steps, validation.EnforcedByProvider, r.egress.registry.allowOut)
	res.Notes = append(res.Notes, r.network.notes...)
}

// processRunner runs each step's shell as one envd process.
type processRunner struct {
	envd   *envdClient
	cwd    string
	pid    uint32
	hasPid bool
}

func (r *processRunner) RunStep(ctx context.Context, script []byte, budget time.Duration, out io.Writer, started func()) (remote.ProcEnd, error) {
	r.hasPid = false
	return r.envd.start(ctx, "run step", processConfig{
		Cmd: "/bin/sh", Args: []string{"-c", string(script)}, Envs: map[string]string{"CI": "true"}, Cwd: r.cwd,
	}, budget, out, func(pid uint32) {
		r.pid, r.hasPid = pid, true
		started()
	})
}

func (r *processRunner) StopStep(ctx context.Context) error {
	if !r.hasPid {
		return errors.New("envd never reported the process's pid")
	}
	return r.envd.signal(ctx, r.pid)
}
