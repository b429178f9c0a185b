package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// ToolProvider prepares the package manager a plan pins, outside the
// sandbox (the toolchain cache). A *validation.Refusal says the version
// cannot be had; any other error is an infrastructure failure.
type ToolProvider interface {
	Prepare(ctx context.Context, req validation.ToolRequest) (validation.Tool, error)
}

// Where a plan's package manager is mounted in the sandbox.
const (
	// SandboxToolDir holds the prepared package manager, read-only; its
	// bin directory comes first on PATH.
	SandboxToolDir = "/opt/gilf/tool"
	// toolsDirName is the directory of WorkRoot holding the read-only
	// mirrors of prepared package managers that sandboxes bind: the
	// toolchain cache itself may sit where the sandbox uid cannot enter.
	toolsDirName = "tools"
	// maxToolManifestBytes bounds a package manager's package.json read
	// for its version.
	maxToolManifestBytes = 1 << 20
)

// toolMount is the package manager a run's steps use.
type toolMount struct {
	// dir is the host directory bound at SandboxToolDir ("" binds none:
	// the worker's own npm, or a package manager installed on the host).
	dir string
	// shims, when set, are scripts written into the run directory
	// instead (a Yarn release committed in the checkout).
	shims map[string]string
	// version is the exact version, for the record ("" when unknown).
	version string
	notes   []string
	// manager is the package manager mounted ("" for none).
	manager validation.PackageManager
	// src is the verified toolchain tree dir mirrors, for a package
	// manager the toolchain provided ("" otherwise).
	src string
	// release frees the mirror the run holds (nil for none).
	release func()
}

// close frees what the run held of its package manager.
func (m toolMount) close() {
	if m.release != nil {
		m.release()
	}
}

// env is what the package manager needs in its steps' environment: pnpm
// never replaces itself with the version packageManager names (gilf has
// provided exactly that one; a download would need the network), pnpm,
// bun and Yarn classic keep their store on the workspace's mount
// (pnpmSandboxStore, bunSandboxCache: they hard-link from it;
// yarnSandboxCache, where a warm disk puts it), and
// Yarn gets the CA setting its version reads (Yarn 2+ refuses to run
// with a setting it does not know, Yarn classic's cafile among them).
func (m toolMount) env(ca bool) map[string]string {
	env := map[string]string{}
	switch m.manager {
	case validation.PNPM:
		env["npm_config_manage_package_manager_versions"] = "false"
		env["npm_config_store_dir"] = SandboxWorkspace + "/" + pnpmSandboxStore
	case validation.Yarn:
		env["YARN_CACHE_FOLDER"] = SandboxWorkspace + "/" + yarnSandboxCache
		if ca {
			env["YARN_CAFILE"] = SandboxCAFile
		}
	case validation.Bun:
		env["BUN_INSTALL_CACHE_DIR"] = SandboxWorkspace + "/" + bunSandboxCache
	case validation.YarnBerry:
		env["YARN_ENABLE_TELEMETRY"] = "0"
		if ca {
			maps.Copy(env, berryCAEnv(m.version, SandboxCAFile))
		}
	}
	return env
}

// chooseTool decides which package manager binary the steps of plan (for
// the checkout at dir) run and prepares it; only an install step or a
// script that will run needs one. A refusal says it cannot be provided:
// nothing was started.
func (e *Executor) chooseTool(ctx context.Context, plan validation.Plan, dir string) (toolMount, error) {
	if !runsAnything(plan) {
		return toolMount{}, nil
	}
	tr := plan.Tool
	if tr.Manager == "" {
		tr.Manager = plan.PackageManager
	}
	if tr.Manager == "" {
		// A plan made by hand, naming no package manager: its steps
		// run what they name.
		return toolMount{}, nil
	}
	m, err := e.toolFor(ctx, dir, tr)
	m.manager = tr.Manager
	return m, err
}

// toolFor is chooseTool's choice for a plan that names a manager: the
// committed Yarn release, else the toolchain's (npm is always the
// worker's own), else the worker's own installation, whose absence is
// gilf's, never the pull request's.
func (e *Executor) toolFor(ctx context.Context, dir string, tr validation.ToolRequest) (toolMount, error) {
	bin := validation.ToolBinary(tr.Manager)
	switch {
	case tr.Release != "":
		return releaseTool(dir, tr)
	case e.opts.Tools != nil && tr.Manager != validation.NPM:
		t, err := e.opts.Tools.Prepare(ctx, tr)
		var ref *validation.Refusal
		if errors.As(err, &ref) {
			return toolMount{}, ref
		}
		if err != nil {
			return toolMount{}, fmt.Errorf("prepare %s: %w", tr.Manager, err)
		}
		mirror, release, err := e.mirrorTool(t)
		if err != nil {
			return toolMount{}, fmt.Errorf("prepare %s: %w", tr.Manager, err)
		}
		note := fmt.Sprintf("%s %s provided by gilf (%s; %s)", bin, t.Version, describeSource(tr), t.Integrity)
		return toolMount{dir: mirror, src: t.Dir, version: t.Version, notes: []string{note}, release: release}, nil
	}
	v, ok := hostToolVersion(bin, e.opts.Env["PATH"])
	if !ok {
		return toolMount{}, validation.Refuse(validation.CodePackageManagerNotInstalled,
			"%s is not installed on this worker and no toolchain cache is configured to provide %s", bin, wanted(tr))
	}
	m := toolMount{version: v}
	if want := tr.Version; want != "" && v != "" && !sameRelease(want, v) {
		m.notes = append(m.notes, fmt.Sprintf("the checkout asks for %s (%s); the worker's own %s %s ran", wanted(tr), tr.Source, bin, v))
	}
	return m, nil
}

// runsAnything reports whether any step of plan will run.
func runsAnything(plan validation.Plan) bool {
	for _, s := range plan.Steps {
		if s.Inconclusive == "" {
			return true
		}
	}
	return false
}

// wanted names a request as pm@version.
func wanted(tr validation.ToolRequest) string {
	if tr.Version == "" {
		return validation.ToolBinary(tr.Manager) + " (newest)"
	}
	return validation.ToolBinary(tr.Manager) + "@" + tr.Version
}

func describeSource(tr validation.ToolRequest) string {
	if tr.Source == "" {
		return "the default version"
	}
	return "from the " + tr.Source
}

var exactVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

func isExact(v string) bool { return exactVersion.MatchString(v) }

// sameRelease reports whether version v satisfies want, an exact version
// or a major.
func sameRelease(want, v string) bool {
	if isExact(want) {
		return want == v
	}
	major, _, _ := strings.Cut(v, ".")
	return major == want
}

// releaseFile is where a committed Yarn release is run from.
func releaseTool(checkout string, tr validation.ToolRequest) (toolMount, error) {
	rel := filepath.Clean(tr.Release)
	if filepath.IsAbs(rel) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return toolMount{}, validation.Refuse(validation.CodePackageManagerUnavailable,
			"the committed Yarn release %q is not a path inside the checkout", tr.Release)
	}
	st, err := os.Lstat(filepath.Join(checkout, rel))
	if err != nil || !st.Mode().IsRegular() {
		return toolMount{}, validation.Refuse(validation.CodePackageManagerUnavailable,
			"the committed Yarn release %q (yarnPath in .yarnrc.yml) is not a regular file of the checkout", tr.Release)
	}
	script := "#!/bin/sh\nexec node " + shellQuote(SandboxWorkspace+"/"+filepath.ToSlash(rel)) + " \"$@\"\n"
	version := tr.Version
	if !isExact(version) {
		version = ""
	}
	note := fmt.Sprintf("yarn runs the release committed at %s", strconv.Quote(rel))
	if version != "" {
		note += " (" + version + ")"
	}
	return toolMount{shims: map[string]string{"yarn": script, "yarnpkg": script}, version: version, notes: []string{note}}, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeShims writes m's scripts into the run directory as the bin of the
// tool mount, readable and runnable by the sandbox uid, writable by none.
func (m *toolMount) writeShims(runRoot string) error {
	if m.shims == nil {
		return nil
	}
	dir := filepath.Join(runRoot, "tool")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return fmt.Errorf("tool shims: %w", err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "bin")} {
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("tool shims: %w", err)
		}
	}
	for name, body := range m.shims {
		p := filepath.Join(dir, "bin", name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			return fmt.Errorf("tool shim %s: %w", name, err)
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return fmt.Errorf("tool shim %s: %w", name, err)
		}
	}
	m.dir = dir
	return nil
}

// mirrorTool returns the read-only copy of t under WorkRoot that
// sandboxes bind, held for the run (release frees it). A mirror found
// there (another gilf process may have made it) is used only once it is
// checked against t, the verified toolchain; one that does not match is
// removed and made again. A new one is made from hard links where the
// cache is on the same file system, else a copy, complete before it is
// renamed into place, and making it sweeps the mirrors past
// MaxToolMirrors used longest ago.
func (e *Executor) mirrorTool(t validation.Tool) (dst string, release func(), err error) {
	if !isExact(t.Version) || !validManager(t.Manager) {
		return "", nil, fmt.Errorf("toolchain returned %s@%q, not an exact version", t.Manager, t.Version)
	}
	root := filepath.Join(e.opts.WorkRoot, toolsDirName)
	parent := filepath.Join(root, string(t.Manager))
	dst = filepath.Join(parent, t.Version)
	for _, d := range []string{root, parent} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return "", nil, fmt.Errorf("tool mirror: %w", err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return "", nil, fmt.Errorf("tool mirror: %w", err)
		}
	}
	// Held, no sweep removes it.
	release, err = holdMirror(dst)
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	if _, serr := os.Stat(dst); serr == nil {
		if verr := verifyMirror(t.Dir, dst); verr == nil {
			return dst, release, nil
		} else {
			e.log.Warn("tool mirror does not match the verified toolchain; making it again",
				logkey.Manager, string(t.Manager), logkey.Version, t.Version, logkey.Err, verr.Error())
		}
		aside, aerr := os.MkdirTemp(parent, ".bad-")
		if aerr != nil {
			return "", nil, fmt.Errorf("tool mirror: %w", aerr)
		}
		if rerr := os.Rename(dst, filepath.Join(aside, "m")); rerr != nil {
			return "", nil, errors.Join(fmt.Errorf("tool mirror: %w", rerr), os.RemoveAll(aside))
		}
		if rerr := os.RemoveAll(aside); rerr != nil {
			return "", nil, fmt.Errorf("tool mirror: %w", rerr)
		}
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return "", nil, fmt.Errorf("tool mirror: %w", err)
	}
	if err := mirrorTree(t.Dir, tmp); err != nil {
		return "", nil, errors.Join(fmt.Errorf("tool mirror of %s %s: %w", t.Manager, t.Version, err), os.RemoveAll(tmp))
	}
	if err := os.Rename(tmp, dst); err != nil {
		// Another run made it first: theirs is used once checked.
		rerr := os.RemoveAll(tmp)
		if verr := verifyMirror(t.Dir, dst); verr != nil {
			return "", nil, errors.Join(fmt.Errorf("tool mirror: %w", err), verr, rerr)
		}
		if rerr != nil {
			return "", nil, rerr
		}
	}
	if removed, serr := sweepMirrors(root, dst); serr != nil {
		e.log.Warn("sweep tool mirrors", logkey.Err, serr.Error())
	} else if len(removed) > 0 {
		e.log.Info("removed tool mirrors used longest ago", logkey.Count, len(removed), "max", MaxToolMirrors)
	}
	return dst, release, nil
}

func validManager(pm validation.PackageManager) bool {
	switch pm {
	case validation.NPM, validation.PNPM, validation.Yarn, validation.YarnBerry, validation.Bun:
		return true
	}
	return false
}

// mirrorTree copies the tree src into the existing directory dst:
// directories 0755, files readable by all (runnable ones 0755), symlinks
// as links. Anything else is refused.
func mirrorTree(src, dst string) error {
	if err := os.Chmod(dst, 0o755); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := os.Mkdir(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, 0o755)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case mode.IsRegular():
			perm := os.FileMode(0o644)
			if mode.Perm()&0o111 != 0 {
				perm = 0o755
			}
			if mode.Perm() == perm && os.Link(p, target) == nil {
				return nil
			}
			return copyFile(p, target, perm, -1, -1)
		default:
			return fmt.Errorf("%s is not a file, directory or symlink", rel)
		}
	})
}

// hostToolVersion finds bin in the colon-separated dirs of path on the
// host (the sandbox binds the same system directories) and reads the
// version of the package it belongs to: the nearest package.json above
// the resolved binary whose name is the tool's.
func hostToolVersion(bin, path string) (string, bool) {
	p, err := lookPath(bin, path)
	if err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", true
	}
	names := map[string]bool{bin: true}
	if bin == "yarn" {
		names["@yarnpkg/cli-dist"] = true
	}
	for dir := filepath.Dir(real); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		b, err := readCapped(filepath.Join(dir, "package.json"), maxToolManifestBytes)
		if err != nil {
			continue
		}
		var m struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &m) == nil && names[m.Name] && isExact(m.Version) {
			return m.Version, true
		}
	}
	return "", true
}

// readCapped reads at most max bytes of the regular file p, never
// through a link (nor blocking on a FIFO put in its place).
func readCapped(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(p))
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", filepath.Base(p), max)
	}
	return b, nil
}
