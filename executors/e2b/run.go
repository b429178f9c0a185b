package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gilf-review/gilf/archive"
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

// errArchiveTooLarge stops packing once the archive passes its ceiling.
var errArchiveTooLarge = errors.New("archive too large")

type ceilingWriter struct {
	w     io.Writer
	n     int64
	limit int64
}

func (c *ceilingWriter) Write(b []byte) (int, error) {
	if c.n+int64(len(b)) > c.limit {
		return 0, errArchiveTooLarge
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// packArchive packs dir into a temp file under tempRoot and returns it
// rewound with its size. A repository over a pack limit or over maxBytes
// compressed is refused (archive_too_large): nothing was started.
func packArchive(ctx context.Context, dir, tempRoot string, maxBytes int64) (_ *os.File, _ int64, err error) {
	f, err := os.CreateTemp(tempRoot, "gilf-e2b-*.tar.gz")
	if err != nil {
		return nil, 0, fmt.Errorf("e2b: archive: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close(), os.Remove(f.Name()))
		}
	}()
	cw := &ceilingWriter{w: f, limit: maxBytes}
	if err := archive.Pack(ctx, dir, cw); err != nil {
		var ple *archive.PackLimitError
		switch {
		case errors.As(err, &ple):
			return nil, 0, validation.Refuse(validation.CodeArchiveTooLarge, "the repository exceeds the %s limit of %d for packing (at %q)", ple.Limit, ple.Max, ple.Path)
		case errors.Is(err, errArchiveTooLarge):
			return nil, 0, validation.Refuse(validation.CodeArchiveTooLarge, "the repository's archive exceeds the %d-byte upload limit of managed-e2b", maxBytes)
		}
		return nil, 0, fmt.Errorf("e2b: pack %s: %w", dir, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("e2b: archive: %w", err)
	}
	return f, cw.n, nil
}

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
	return parsePlatform(out.Head), nil
}

// parsePlatform reads the setup script's key=value lines.
func parsePlatform(s string) validation.Platform {
	var p validation.Platform
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v = cleanMessage(v)
		switch k {
		case "os":
			p.OS = strings.ToLower(v)
		case "arch":
			p.Arch = goArch(v)
		case "kernel":
			p.Kernel = v
		case "node":
			p.Node = v
		}
	}
	return p
}

// goArch names a machine as Go does, as the local executor reports it.
func goArch(m string) string {
	switch m {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i686":
		return "386"
	}
	return m
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
