package cfsandbox

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/internal/remote"
	"github.com/gilf-review/gilf/validation"
)

// sandboxRun is one run's bridge calls (remote.Provider).
type sandboxRun struct {
	e   *Executor
	req executors.Request
	id  string
	run string // the run's directory in /workspace
	// deadline is when the run's time (Options.Timeout) ends: the bridge
	// has no sandbox lifetime, so gilf keeps its own.
	deadline time.Time
}

var _ remote.Provider = (*sandboxRun)(nil)

// Create asks the bridge for a sandbox.
func (r *sandboxRun) Create(ctx context.Context) (string, error) {
	return r.e.bridge.create(ctx)
}

// Destroy deletes the sandbox.
func (r *sandboxRun) Destroy(ctx context.Context, id string) error { return r.e.bridge.kill(ctx, id) }

// Open notes the sandbox and its egress.
func (r *sandboxRun) Open(_ context.Context, s *remote.Session, res *executors.Result) error {
	r.id, r.run = s.ID, "gilf-run-"+s.Run
	res.Notes = append(res.Notes,
		"Cloudflare sandbox "+s.ID+" through the sandbox bridge",
		"egress: the bridge sets no per-sandbox egress policy; the container's network is the deployment's",
		"step statuses were reported by the executor: each step's marker shell ran in the Cloudflare sandbox; gilf did not observe the exit statuses",
	)
	return nil
}

// Upload writes the archive to /workspace/<run>.tar.gz.
func (r *sandboxRun) Upload(ctx context.Context, arch io.Reader, size int64) error {
	return r.e.bridge.upload(ctx, r.id, Workspace+"/"+r.run+".tar.gz", arch, size)
}

// Setup runs setupScript as one exec in /workspace.
func (r *sandboxRun) Setup(ctx context.Context, budget time.Duration, out io.Writer) (remote.ProcEnd, error) {
	const op = "prepare the checkout"
	began := time.Now()
	end, err := r.e.bridge.exec(ctx, op, r.id, execRequest{
		Argv: []string{"sh", "-c", setupScript(r.run)}, TimeoutMs: budget.Milliseconds(), Cwd: Workspace,
	}, out, nil)
	if err != nil {
		return remote.ProcEnd{}, err
	}
	return toProcEnd(end, time.Since(began) >= budget, op)
}

// Steps runs each step as one exec in the checkout, within the run's
// time.
func (r *sandboxRun) Steps(sp *remote.StepPlan) remote.StepRunner {
	sp.Cwd = Workspace + "/" + r.run + "/" + archive.PackRoot
	sp.Deadline = r.deadline
	sp.Lifetime = fmt.Sprintf("the run's time (%v, %s)", r.e.opts.Timeout, EnvTimeout)
	return &bridgeRunner{c: r.e.bridge, id: r.id, cwd: sp.Cwd}
}

// Collect records that nobody enforced the steps' egress.
func (r *sandboxRun) Collect(res *executors.Result) {
	executors.RecordEgress(r.req.Plan, res.Steps, validation.EnforcedNone, nil)
}
