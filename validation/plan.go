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
// ignored), with no facts read from those files: PlanFromCheckout with a
// zero CheckoutFacts.
func PlanFromManifest(data []byte, lockfiles []string, opts PlanOptions) Plan {
	return PlanFromCheckout(data, lockfiles, CheckoutFacts{}, opts)
}

// PlanFromCheckout builds the plan from the bytes of a root package.json,
// the names of the files beside it, and the facts read from the small
// files among them. It is pure: BuildPlan reads the checkout and calls it.
//
// The plan either has a Gap (and no steps) or at least one step. Steps are
// install (only when some selected script is not inconclusive) followed by
// the non-empty test, typecheck, lint and build scripts, in that order.
// Every plan, a gap too, carries the ToolRequest (Plan.Tool) and the node
// requirement (Plan.Node: .nvmrc, else .node-version, else engines.node).
func PlanFromCheckout(data []byte, lockfiles []string, facts CheckoutFacts, opts PlanOptions) Plan {
	opts = opts.withDefaults()
	if int64(len(data)) > opts.MaxManifestBytes {
		return gapPlan(detected("", lockfiles, facts), GapManifestTooLarge,
			fmt.Sprintf("package.json is %d bytes, over the %d-byte limit", len(data), opts.MaxManifestBytes))
	}
	m, gap := parseManifest(data, opts.MaxManifestDepth)
	if gap != nil {
		return gapPlan(detected("", lockfiles, facts), gap.Reason, gap.Msg)
	}
	det := detected(m.packageManager, lockfiles, facts)
	if det.node == nil {
		det.node = newNodeRequirement(m.enginesNode, SourceEnginesNode)
	}
	notes := append(m.notes.list(), det.Notes...)

	if m.scriptsKind != "" && m.scriptsKind != "object" {
		p := gapPlan(det, GapScriptsInvalid,
			fmt.Sprintf("package.json \"scripts\" is %s, not an object: npm runs no scripts from it", article(m.scriptsKind)))
		p.Notes = notes
		return p
	}

	steps, runnable, scriptNotes := scriptSteps(det, m.scripts, opts)
	notes = append(notes, scriptNotes...)
	if len(steps) == 0 {
		p := gapPlan(det, GapNoScripts, "package.json has no non-empty test, typecheck, lint or build script")
		p.Notes = notes
		return p
	}
	if runnable {
		install, installNotes := installStep(det, m.scripts, opts)
		steps = append([]Step{install}, steps...)
		notes = append(notes, installNotes...)
	}
	p := det.plan()
	p.Steps, p.Notes = steps, notes
	return p
}

// scriptSteps are the steps of the selected scripts, in ScriptNames
// order, with the notes they call for; runnable is true when one of them
// is not inconclusive (so an install step goes first).
func scriptSteps(det detection, scripts map[string]string, opts PlanOptions) (steps []Step, runnable bool, notes []string) {
	for _, name := range ScriptNames {
		body, ok := scripts[name]
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
			notes = append(notes, hookNotes(det.Manager, name, scripts)...)
		}
		steps = append(steps, s)
	}
	return steps, runnable, notes
}

// installStep is the install step that goes before runnable scripts,
// with the notes on its lifecycle scripts, network and lockfile.
func installStep(det detection, scripts map[string]string, opts PlanOptions) (Step, []string) {
	install := Step{
		Name:    StepInstall,
		Argv:    InstallArgv(det.Manager, det.Lockfile != ""),
		Network: opts.InstallNetwork,
		Timeout: opts.InstallTimeout,
	}
	var notes []string
	if opts.InstallIgnoreScripts {
		skip := toolIgnoreScriptsArgs(det.tool)
		install.Argv = append(install.Argv, skip...)
		notes = append(notes, "lifecycle scripts are skipped during the install step ("+strings.Join(skip, " ")+")")
	} else {
		notes = append(notes, installHookNotes(det.Manager, scripts, opts.InstallNetwork)...)
	}
	if opts.InstallNetwork == NetworkNone {
		notes = append(notes, "the install step runs with no network: dependencies must be vendored in the checkout")
	}
	if det.Lockfile == "" {
		notes = append(notes, fmt.Sprintf("no %s lockfile: the install is not frozen and may resolve different versions", det.Manager))
	}
	return install, notes
}

// detection is a Detection with what a plan carries beside it.
type detection struct {
	Detection
	tool ToolRequest
	node *NodeRequirement
}

// detected runs detect and takes the node requirement of the version
// files; engines.node is added by the caller once the manifest is read.
func detected(field string, files []string, facts CheckoutFacts) detection {
	d, t := detect(field, files, facts)
	var node *NodeRequirement
	if facts.NodeVersionFile != nil {
		node = newNodeRequirement(facts.NodeVersionFile.Range, facts.NodeVersionFile.Source)
	}
	return detection{Detection: d, tool: t, node: node}
}

// plan is a plan of what det found, with neither steps nor a gap yet.
func (det detection) plan() Plan {
	return Plan{
		PackageManager:       det.Manager,
		PackageManagerSource: det.Source,
		Lockfile:             det.Lockfile,
		Tool:                 det.tool,
		Node:                 det.node,
	}
}

func gapPlan(det detection, reason GapReason, msg string) Plan {
	p := det.plan()
	p.Gap, p.Notes = &Gap{Reason: reason, Msg: publicMessage(msg)}, det.Notes
	return p
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
// directory of the head tarball). It reads dir/package.json and the facts
// of CheckoutFacts (the first MaxLockfileHeadBytes of pnpm-lock.yaml and
// yarn.lock, .yarnrc.yml up to MaxYarnrcBytes, .nvmrc and .node-version
// up to MaxNodeVersionFileBytes), all through os.Root, never following a
// symlink and never opening anything but a regular file, and checks which
// lockfiles sit beside them. Every problem is a Gap or a note in the plan;
// messages never name paths of the worker.
func BuildPlan(dir string, opts PlanOptions) Plan {
	opts = opts.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return gapPlan(detected("", nil, CheckoutFacts{}), GapManifestUnreadable,
			"the checkout could not be opened: "+errnoText(err))
	}
	defer root.Close() // read-only: a close error loses nothing

	files, fileNotes := presentFiles(root)
	facts, factNotes := readCheckoutFacts(root, files)
	fileNotes = append(fileNotes, factNotes...)
	data, gap := readManifest(root, opts.MaxManifestBytes)
	var p Plan
	if gap != nil {
		p = gapPlan(detected("", files, facts), gap.Reason, gap.Msg)
	} else {
		p = PlanFromCheckout(data, files, facts, opts)
	}
	if len(fileNotes) > 0 {
		p.Notes = append(fileNotes, p.Notes...)
	}
	return p
}
