package validation

import (
	"fmt"
	"slices"
	"strings"
)

// Files at the checkout root that decide the package manager.
const (
	LockfileBun         = "bun.lock"
	LockfileBunBinary   = "bun.lockb"
	LockfilePNPM        = "pnpm-lock.yaml"
	LockfileYarn        = "yarn.lock"
	LockfileNPM         = "package-lock.json"
	LockfileShrinkwrap  = "npm-shrinkwrap.json"
	YarnBerryConfigFile = ".yarnrc.yml"
)

// Values of Plan.PackageManagerSource besides a lockfile name (also used
// by ToolRequest.Source).
const (
	SourcePackageManagerField = "packageManager field"
	SourceDefault             = "default"
	// SourceYarnBerryLockfile: yarn.lock beside .yarnrc.yml means Yarn 2+.
	SourceYarnBerryLockfile = LockfileYarn + " + " + YarnBerryConfigFile
	// SourceYarnPath: a Yarn release committed in the checkout and named
	// by yarnPath in .yarnrc.yml.
	SourceYarnPath = "yarnPath in " + YarnBerryConfigFile
)

// LockfileNames are the lockfiles gilf looks for, in detection precedence.
func LockfileNames() []string {
	return []string{LockfileBun, LockfileBunBinary, LockfilePNPM, LockfileYarn, LockfileNPM, LockfileShrinkwrap}
}

// managerLockfiles are the lockfiles a manager reads, the one it prefers
// first (npm uses npm-shrinkwrap.json over package-lock.json; bun reads the
// text bun.lock over the binary bun.lockb).
func managerLockfiles(pm PackageManager) []string {
	switch pm {
	case Bun:
		return []string{LockfileBun, LockfileBunBinary}
	case PNPM:
		return []string{LockfilePNPM}
	case Yarn, YarnBerry:
		return []string{LockfileYarn}
	default:
		return []string{LockfileShrinkwrap, LockfileNPM}
	}
}

// lockfileManager is the manager a lockfile alone points to.
func lockfileManager(name string) PackageManager {
	switch name {
	case LockfileBun, LockfileBunBinary:
		return Bun
	case LockfilePNPM:
		return PNPM
	case LockfileYarn:
		return Yarn
	default:
		return NPM
	}
}

// Detection is the package manager chosen for a checkout and why.
type Detection struct {
	Manager PackageManager
	// Source is SourcePackageManagerField, the deciding lockfile's name,
	// SourceYarnBerryLockfile, SourceYarnPath, or SourceDefault.
	Source string
	// Lockfile is the chosen manager's lockfile when one is present; the
	// install is then frozen.
	Lockfile string
	Notes    []string
}

// DetectPackageManager chooses the package manager (SPEC §3.2): the
// package.json "packageManager" field first (pass "" when it is absent or
// not a string), then lockfiles in the order of LockfileNames, else npm.
// files are the names present at the checkout root; names other than the
// lockfiles and .yarnrc.yml are ignored. yarn.lock means Yarn classic
// unless .yarnrc.yml is present (Yarn 2+). It reads no file: the facts
// PlanFromCheckout has (a berry yarn.lock, a yarnPath) can refine Yarn
// further; see detect.
func DetectPackageManager(packageManagerField string, files []string) Detection {
	d, _ := detect(packageManagerField, files, CheckoutFacts{})
	return d
}

// detect chooses the package manager and the version the checkout pins
// (its ToolRequest). For Yarn the precedence is:
//
//  1. the packageManager field: yarn@1.x is classic, yarn@2+ is berry; a
//     field without a version is berry when yarn.lock is a berry lockfile
//     or .yarnrc.yml is present, else classic;
//  2. else yarn.lock: a berry lockfile (a top-level __metadata block)
//     means berry even without .yarnrc.yml; any other yarn.lock (a v1
//     lockfile, or one not read) is classic unless .yarnrc.yml is
//     present, then berry;
//  3. then yarnPath in .yarnrc.yml, when valid, overrides either: the
//     committed release runs (Yarn classic 1.22 and Yarn 2+ both hand
//     over to it), so it is berry unless its file name says 1.x.
func detect(field string, files []string, facts CheckoutFacts) (Detection, ToolRequest) {
	has := func(name string) bool { return slices.Contains(files, name) }
	var d Detection
	var t ToolRequest

	if field != "" {
		pm, ok, note := parsePackageManagerField(field, has(YarnBerryConfigFile), facts.YarnLock == YarnLockBerry)
		if note != "" {
			d.Notes = append(d.Notes, note)
		}
		if ok {
			d.Manager, d.Source = pm, SourcePackageManagerField
			var notes []string
			t, notes = fieldTool(pm, field)
			d.Notes = append(d.Notes, notes...)
		}
	}
	if d.Manager == "" {
		for _, name := range LockfileNames() {
			if has(name) {
				d.Manager, d.Source = lockfileManager(name), name
				break
			}
		}
	}
	if d.Manager == Yarn && d.Source == LockfileYarn {
		switch {
		case has(YarnBerryConfigFile):
			d.Manager, d.Source = YarnBerry, SourceYarnBerryLockfile
		case facts.YarnLock == YarnLockBerry:
			d.Manager = YarnBerry
		}
	}
	if (d.Manager == Yarn || d.Manager == YarnBerry) && facts.YarnPath != "" {
		release, note := cleanYarnPath(facts.YarnPath)
		if note != "" {
			d.Notes = append(d.Notes, note)
		} else {
			version, pm := yarnReleaseVersion(release)
			t.Release = release
			if pm != d.Manager {
				d.Manager, d.Source = pm, SourceYarnPath
			}
			if version != "" && !exactVersion(t.Version) {
				t.Version, t.Source = version, SourceYarnPath
			}
		}
	}
	if d.Manager == "" {
		d.Manager, d.Source = NPM, SourceDefault
	}

	own := managerLockfiles(d.Manager)
	for _, name := range own {
		if has(name) {
			d.Lockfile = name
			break
		}
	}
	for _, name := range LockfileNames() {
		if has(name) && !slices.Contains(own, name) {
			d.Notes = append(d.Notes, fmt.Sprintf("%s is present but the package manager is %s: it is not used", name, d.Manager))
		}
	}

	t.Manager = d.Manager
	if t.Version == "" {
		var note string
		t.Version, t.Source, note = lockfileToolVersion(d, files, facts)
		if note != "" {
			d.Notes = append(d.Notes, note)
		}
	}
	return d, t
}

// parsePackageManagerField reads a corepack "packageManager" value such as
// "pnpm@10.33.4+sha512.…" or "yarn@4.14.1+sha224.…". A leading "^" is
// tolerated (as package-manager-detector does). ok is false for a name gilf
// does not run; the note then says detection falls back to lockfiles.
// yarnrcYML and berryLock decide Yarn's flavour when the field has no
// version.
func parsePackageManagerField(field string, yarnrcYML, berryLock bool) (pm PackageManager, ok bool, note string) {
	name, version, _ := strings.Cut(strings.TrimPrefix(field, "^"), "@")
	version, _, _ = strings.Cut(version, "+") // drop a corepack hash
	switch name {
	case "npm":
		return NPM, true, ""
	case "pnpm":
		return PNPM, true, ""
	case "bun":
		return Bun, true, ""
	case "yarn":
		major, ok := leadingNumber(version)
		switch {
		case ok && major <= 1:
			return Yarn, true, ""
		case ok:
			return YarnBerry, true, ""
		case berryLock:
			return YarnBerry, true, fmt.Sprintf("packageManager %s has no version number; yarn.lock is a Yarn 2+ lockfile, so Yarn 2+ is used", quoteKey(field))
		case yarnrcYML:
			return YarnBerry, true, fmt.Sprintf("packageManager %s has no version number; .yarnrc.yml is present, so Yarn 2+ is used", quoteKey(field))
		default:
			return Yarn, true, fmt.Sprintf("packageManager %s has no version number and there is no .yarnrc.yml, so Yarn classic is used", quoteKey(field))
		}
	}
	return "", false, fmt.Sprintf("packageManager %s is not a package manager gilf runs (npm, pnpm, yarn, bun): lockfiles decide", quoteKey(field))
}

// leadingNumber parses the decimal digits at the start of s.
func leadingNumber(s string) (int, bool) {
	n, digits := 0, 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' || digits >= 9 {
			break
		}
		n = n*10 + int(c-'0')
		digits++
	}
	return n, digits > 0
}

// pmBinary is the command that runs pm.
func pmBinary(pm PackageManager) string {
	if pm == YarnBerry {
		return "yarn"
	}
	return string(pm)
}

// InstallArgv is the install command for pm: frozen (the lockfile must
// already match package.json) when a lockfile is present, a plain install
// otherwise (`npm ci` refuses to run without a lockfile).
func InstallArgv(pm PackageManager, frozen bool) []string {
	switch pm {
	case Yarn:
		if frozen {
			return []string{"yarn", "install", "--frozen-lockfile"}
		}
		return []string{"yarn", "install"}
	case YarnBerry:
		if frozen {
			return []string{"yarn", "install", "--immutable"}
		}
		return []string{"yarn", "install"}
	case PNPM, Bun:
		if frozen {
			return []string{string(pm), "install", "--frozen-lockfile"}
		}
		return []string{string(pm), "install"}
	default:
		if frozen {
			return []string{"npm", "ci", "--no-audit", "--no-fund"}
		}
		return []string{"npm", "install", "--no-audit", "--no-fund"}
	}
}

// IgnoreScriptsArgs are the install arguments with which pm runs no
// lifecycle script (the root's and every dependency's). Yarn 2+ has no
// such flag; its skip-build mode skips the build scripts of dependencies,
// and the root's postinstall too.
func IgnoreScriptsArgs(pm PackageManager) []string {
	if pm == YarnBerry {
		return []string{"--mode=skip-build"}
	}
	return []string{"--ignore-scripts"}
}

// toolIgnoreScriptsArgs is IgnoreScriptsArgs for the requested version:
// Yarn 2 has no --mode option (it came with Yarn 3); its flag is
// --skip-builds.
func toolIgnoreScriptsArgs(t ToolRequest) []string {
	if t.Manager == YarnBerry && (t.Version == "2" || strings.HasPrefix(t.Version, "2.")) {
		return []string{"--skip-builds"}
	}
	return IgnoreScriptsArgs(t.Manager)
}

// RunArgv is the command that runs one package.json script with pm. name
// is always one of ScriptNames: script names are never taken from the
// manifest.
func RunArgv(pm PackageManager, name string) []string {
	return []string{pmBinary(pm), "run", name}
}
