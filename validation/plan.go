package validation

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Default step budgets. PlanOptions overrides them.
const (
	DefaultStepTimeout    = 10 * time.Minute
	DefaultInstallTimeout = 10 * time.Minute
)

// PlanOptions tune BuildPlan and PlanFromManifest. A zero or negative field
// takes its default.
type PlanOptions struct {
	// MaxManifestBytes caps package.json (DefaultMaxManifestBytes).
	MaxManifestBytes int64
	// MaxManifestDepth caps JSON nesting (DefaultMaxManifestDepth).
	MaxManifestDepth int
	// StepTimeout bounds each script step (DefaultStepTimeout).
	StepTimeout time.Duration
	// InstallTimeout bounds the install step (DefaultInstallTimeout).
	InstallTimeout time.Duration
	// InstallNetwork is the install step's network: NetworkRegistry (the
	// default, also for "") or NetworkNone, for repositories that vendor
	// their dependencies. Any other value is treated as NetworkNone: the
	// plan never widens what a caller asked for.
	InstallNetwork Network
	// InstallIgnoreScripts passes the package manager's flag that skips
	// lifecycle scripts (preinstall, install, postinstall, prepare, and
	// every dependency's) to the install step.
	InstallIgnoreScripts bool
}

func (o PlanOptions) withDefaults() PlanOptions {
	if o.MaxManifestBytes <= 0 {
		o.MaxManifestBytes = DefaultMaxManifestBytes
	}
	if o.MaxManifestDepth <= 0 {
		o.MaxManifestDepth = DefaultMaxManifestDepth
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	if o.InstallTimeout <= 0 {
		o.InstallTimeout = DefaultInstallTimeout
	}
	switch o.InstallNetwork {
	case "", NetworkRegistry:
		o.InstallNetwork = NetworkRegistry
	default:
		o.InstallNetwork = NetworkNone
	}
	return o
}

// PlanFromManifest builds the plan from the bytes of a root package.json and
// the names of the files beside it (lockfiles, .yarnrc.yml; other names are
// ignored). It is pure: BuildPlan reads the checkout and calls it.
//
// The plan either has a Gap (and no steps) or at least one step. Steps are
// install (only when some selected script is not inconclusive) followed by
// the non-empty test, typecheck, lint and build scripts, in that order.
func PlanFromManifest(data []byte, lockfiles []string, opts PlanOptions) Plan {
	opts = opts.withDefaults()
	if int64(len(data)) > opts.MaxManifestBytes {
		return gapPlan(DetectPackageManager("", lockfiles), GapManifestTooLarge,
			fmt.Sprintf("package.json is %d bytes, over the %d-byte limit", len(data), opts.MaxManifestBytes))
	}
	m, gap := parseManifest(data, opts.MaxManifestDepth)
	if gap != nil {
		return gapPlan(DetectPackageManager("", lockfiles), gap.Reason, gap.Msg)
	}
	det := DetectPackageManager(m.packageManager, lockfiles)
	notes := append(m.notes.list(), det.Notes...)

	if m.scriptsKind != "" && m.scriptsKind != "object" {
		p := gapPlan(det, GapScriptsInvalid,
			fmt.Sprintf("package.json \"scripts\" is %s, not an object: npm runs no scripts from it", article(m.scriptsKind)))
		p.Notes = notes
		return p
	}

	var steps []Step
	runnable := false
	for _, name := range ScriptNames {
		body, ok := m.scripts[name]
		if !ok {
			continue
		}
		if strings.Trim(body, " \t\n") == "" {
			notes = append(notes, fmt.Sprintf("scripts.%s is empty: npm runs it as a no-op that exits 0, so it is not selected", name))
			continue
		}
		s := Step{
			Name:         name,
			Argv:         RunArgv(det.Manager, name),
			Script:       body,
			Network:      NetworkNone,
			Timeout:      opts.StepTimeout,
			Inconclusive: InconclusiveReason(body),
		}
		if s.Inconclusive == "" {
			runnable = true
			notes = append(notes, hookNotes(det.Manager, name, m.scripts)...)
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		p := gapPlan(det, GapNoScripts, "package.json has no non-empty test, typecheck, lint or build script")
		p.Notes = notes
		return p
	}
	if runnable {
		install := Step{
			Name:    StepInstall,
			Argv:    InstallArgv(det.Manager, det.Lockfile != ""),
			Network: opts.InstallNetwork,
			Timeout: opts.InstallTimeout,
		}
		if opts.InstallIgnoreScripts {
			install.Argv = append(install.Argv, IgnoreScriptsArgs(det.Manager)...)
			notes = append(notes, "lifecycle scripts are skipped during the install step ("+strings.Join(IgnoreScriptsArgs(det.Manager), " ")+")")
		} else {
			notes = append(notes, installHookNotes(det.Manager, m.scripts, opts.InstallNetwork)...)
		}
		if opts.InstallNetwork == NetworkNone {
			notes = append(notes, "the install step runs with no network: dependencies must be vendored in the checkout")
		}
		steps = append([]Step{install}, steps...)
		if det.Lockfile == "" {
			notes = append(notes, fmt.Sprintf("no %s lockfile: the install is not frozen and may resolve different versions", det.Manager))
		}
	}
	return Plan{
		PackageManager:       det.Manager,
		PackageManagerSource: det.Source,
		Lockfile:             det.Lockfile,
		Steps:                steps,
		Notes:                notes,
	}
}

func gapPlan(det Detection, reason GapReason, msg string) Plan {
	return Plan{
		PackageManager:       det.Manager,
		PackageManagerSource: det.Source,
		Lockfile:             det.Lockfile,
		Gap:                  &Gap{Reason: reason, Msg: publicMessage(msg)},
		Notes:                det.Notes,
	}
}

// hookNotes names the pre/post lifecycle scripts that run around a selected
// script inside the same step.
func hookNotes(pm PackageManager, name string, scripts map[string]string) []string {
	var notes []string
	for _, hook := range [...]struct{ prefix, when string }{{"pre", "before"}, {"post", "after"}} {
		h := hook.prefix + name
		if strings.Trim(scripts[h], " \t\n") == "" {
			continue
		}
		switch pm {
		case NPM, Yarn:
			notes = append(notes, fmt.Sprintf("lifecycle hook scripts.%s runs %s %s, inside the same step", h, hook.when, name))
		case PNPM:
			notes = append(notes, fmt.Sprintf("lifecycle hook scripts.%s runs %s %s inside the same step when pnpm's enable-pre-post-scripts is on", h, hook.when, name))
		case YarnBerry:
			notes = append(notes, fmt.Sprintf("lifecycle hook scripts.%s is present; Yarn 2+ does not run it %s %s", h, hook.when, name))
		default:
			notes = append(notes, fmt.Sprintf("lifecycle hook scripts.%s may run %s %s, inside the same step", h, hook.when, name))
		}
	}
	return notes
}

// installLifecycle are the root scripts a local install runs (npm docs,
// "Life Cycle Operation Order", npm install).
func installLifecycle() []string {
	return []string{"preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare", "postprepare"}
}

// installHookNotes names the root lifecycle scripts the install step runs.
func installHookNotes(pm PackageManager, scripts map[string]string, network Network) []string {
	with := "with the registry proxy as its only network"
	if network == NetworkNone {
		with = "with no network"
	}
	var notes []string
	for _, h := range installLifecycle() {
		if strings.Trim(scripts[h], " \t\n") == "" {
			continue
		}
		verb := "runs"
		if pm != NPM {
			verb = "may run"
		}
		notes = append(notes, fmt.Sprintf("lifecycle hook scripts.%s %s during the install step, %s", h, verb, with))
	}
	return notes
}

// BuildPlan builds the plan for the checkout in dir (the single top
// directory of the head tarball). It reads only dir/package.json, through
// os.Root, never following a symlink and never opening anything but a
// regular file, and checks which lockfiles sit beside it. Every problem is
// a Gap in the plan; messages never name paths of the worker.
func BuildPlan(dir string, opts PlanOptions) Plan {
	opts = opts.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return gapPlan(DetectPackageManager("", nil), GapManifestUnreadable,
			"the checkout could not be opened: "+errnoText(err))
	}
	defer root.Close() // read-only: a close error loses nothing

	files, fileNotes := presentFiles(root)
	data, gap := readManifest(root, opts.MaxManifestBytes)
	var p Plan
	if gap != nil {
		p = gapPlan(DetectPackageManager("", files), gap.Reason, gap.Msg)
	} else {
		p = PlanFromManifest(data, files, opts)
	}
	if len(fileNotes) > 0 {
		p.Notes = append(fileNotes, p.Notes...)
	}
	return p
}
