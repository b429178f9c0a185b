package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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

// setup uploads the archive into runDir and extracts it there. Any
// failure is an infrastructure error.
func (e *Executor) setup(ctx context.Context, envd *envdClient, arch io.Reader, size int64, runDir string, secrets []validation.Secret) (validation.Platform, error) {
	var p validation.Platform
	uctx, cancel := context.WithTimeout(ctx, e.opts.UploadTimeout)
	defer cancel()
	if err := envd.upload(uctx, runDir+"/"+archiveName, arch, size); err != nil {
		return p, err
	}
	capture := validation.NewCapture(SetupOutputBytes)
	red := validation.NewRedactor(capture, secrets)
	sctx, scancel := context.WithTimeout(ctx, e.opts.SetupTimeout+e.opts.StepGrace)
	defer scancel()
	end, err := envd.start(sctx, "prepare the checkout", processConfig{
		Cmd: "/bin/sh", Args: []string{"-c", setupScript}, Envs: map[string]string{"LC_ALL": "C"}, Cwd: runDir,
	}, e.opts.SetupTimeout, red, nil)
	if ferr := red.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("e2b: prepare the checkout: %w", ferr)
	}
	if err != nil {
		return p, err
	}
	out := capture.Output()
	if !end.Exited || end.Code != 0 {
		return p, fmt.Errorf("e2b: prepare the checkout: the setup process ended (%s): %q", end.Status, out.Head+out.Tail)
	}
	return remote.ParsePlatform(out.Head), nil
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
