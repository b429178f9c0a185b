package validation

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// corepackHashHexLen is the hex length of each digest corepack accepts in
// a packageManager field ("pnpm@10.14.0+sha512.<hex>").
var corepackHashHexLen = map[string]int{"sha1": 40, "sha224": 56, "sha256": 64, "sha512": 128}

// fieldTool reads the version and corepack hash of a packageManager field
// whose name detection accepted. An exact semver version is kept as is, a
// major alone ("pnpm@9") as that major; anything else is a note, and the
// lockfile rules then decide the version. A hash is kept only with an
// exact version and only when it is a known algorithm and hex of its
// length.
func fieldTool(pm PackageManager, field string) (ToolRequest, []string) {
	var notes []string
	_, rest, _ := strings.Cut(strings.TrimPrefix(field, "^"), "@")
	version, hash, hasHash := strings.Cut(rest, "+")
	t := ToolRequest{Manager: pm}
	switch {
	case exactVersion(version):
		t.Version, t.Source = version, SourcePackageManagerField
	case isMajor(version):
		t.Version, t.Source = version, SourcePackageManagerField
	case version == "" && (pm == Yarn || pm == YarnBerry):
		// parsePackageManagerField has already said it has no version.
	case version == "":
		notes = append(notes, fmt.Sprintf("packageManager %s names no version: the lockfile decides which %s is used", quoteKey(field), pm))
	default:
		notes = append(notes, fmt.Sprintf("packageManager %s is not an exact version or a major: the lockfile decides which %s is used", quoteKey(field), pm))
	}
	if hasHash {
		switch {
		case !exactVersion(version):
			notes = append(notes, fmt.Sprintf("packageManager %s has a hash but no exact version: the hash is not used", quoteKey(field)))
		case !validCorepackHash(hash):
			notes = append(notes, fmt.Sprintf("packageManager %s has a hash that is not sha1, sha224, sha256 or sha512 in hex: it is not used", quoteKey(field)))
		default:
			t.Hash = hash
		}
	}
	return t, notes
}

// exactVersion reports whether s is a full semver version as corepack
// takes it: "10.14.0", "4.0.0-rc.53"; no "v", no range.
func exactVersion(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	p, ok := parsePartial(s)
	return ok && p.parts == 3 && !strings.Contains(s, "+")
}

// isMajor reports whether s is a major version alone ("9").
func isMajor(s string) bool {
	_, ok := semverNumber(s)
	return ok && len(s) <= 6
}

func validCorepackHash(h string) bool {
	algo, hex, ok := strings.Cut(h, ".")
	n, known := corepackHashHexLen[algo]
	if !ok || !known || len(hex) != n {
		return false
	}
	for _, c := range []byte(hex) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// cleanYarnPath checks a yarnPath: a relative path that stays inside the
// checkout once cleaned, without NUL, control characters or
// backslashes, at most MaxYarnPathBytes, and without the ${VAR}
// interpolation Yarn would apply. It returns the cleaned path, or a note
// when the value is ignored.
func cleanYarnPath(p string) (string, string) {
	bad := func(why string) (string, string) {
		return "", fmt.Sprintf("%s yarnPath %s %s: it is ignored", YarnBerryConfigFile, quoteKey(p), why)
	}
	switch {
	case len(p) > MaxYarnPathBytes:
		return bad(fmt.Sprintf("is longer than %d bytes", MaxYarnPathBytes))
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' || r == '\uFFFD' }):
		return bad("has a control character, a backslash or invalid UTF-8")
	case strings.Contains(p, "${"):
		return bad("uses an environment variable")
	case path.IsAbs(p) || strings.HasPrefix(p, "~"):
		return bad("is not a relative path")
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return bad("leaves the checkout")
	}
	return c, ""
}

// yarnReleaseVersion reads the version in a committed release's file name
// ("yarn-4.4.1.cjs", "yarn-1.22.19.js") and which Yarn runs it: classic
// for 1.x, berry for 2+ and for a name without a version ("yarn-berry.cjs"
// is how Yarn 2 named it).
func yarnReleaseVersion(release string) (string, PackageManager) {
	base := path.Base(release)
	name, ok := strings.CutPrefix(base, "yarn-")
	if !ok {
		return "", YarnBerry
	}
	for _, ext := range [...]string{".cjs", ".js"} {
		if v, ok := strings.CutSuffix(name, ext); ok && exactVersion(v) {
			if major, _ := leadingNumber(v); major <= 1 {
				return v, Yarn
			}
			return v, YarnBerry
		}
	}
	return "", YarnBerry
}

// lockfileToolVersion is the version the lockfile kind implies when the
// packageManager field gave none: it returns Version, Source and a note
// when the version is unknown.
func lockfileToolVersion(d Detection, files []string, facts CheckoutFacts) (version, source, note string) {
	switch d.Manager {
	case PNPM:
		if d.Lockfile == "" {
			return "", SourceDefault, ""
		}
		if major, ok := pnpmMajor(facts.PNPMLockfileVersion); ok {
			return major, LockfilePNPM + " lockfileVersion " + facts.PNPMLockfileVersion, ""
		}
		what := "has no lockfileVersion gilf read"
		if facts.PNPMLockfileVersion != "" {
			what = "has lockfileVersion " + strconv.Quote(facts.PNPMLockfileVersion) + ", which gilf does not know"
		}
		return "", SourceDefault, LockfilePNPM + " " + what + ": the newest pnpm is used"
	case Yarn:
		if d.Lockfile == "" {
			return "1", SourceDefault, ""
		}
		if facts.YarnLock == YarnLockV1 {
			return "1", LockfileYarn + " v1", ""
		}
		return "1", LockfileYarn, ""
	case YarnBerry:
		if d.Lockfile == "" {
			return "", SourceDefault, ""
		}
		switch facts.YarnLock {
		case YarnLockBerry:
			if v, ok := berryYarnVersion(facts.YarnLockMetadataVersion); ok {
				return v, fmt.Sprintf("%s __metadata version %d", LockfileYarn, facts.YarnLockMetadataVersion), ""
			}
			if facts.YarnLockMetadataVersion == 0 {
				return "", SourceDefault, LockfileYarn + " has no __metadata version gilf read: the newest Yarn is used"
			}
			return "", SourceDefault, fmt.Sprintf("%s has __metadata version %d, which gilf does not know: the newest Yarn is used", LockfileYarn, facts.YarnLockMetadataVersion)
		case YarnLockV1:
			return "", SourceDefault, LockfileYarn + " is a Yarn classic (v1) lockfile but Yarn 2+ is used: the newest Yarn migrates it, and a frozen install then fails"
		}
		return "", SourceDefault, LockfileYarn + "'s format was not read: the newest Yarn is used"
	case Bun:
		if d.Lockfile != "" {
			return "1", d.Lockfile, ""
		}
	}
	return "", SourceDefault, ""
}

// pnpmMajor maps a pnpm-lock.yaml lockfileVersion to the pnpm major that
// writes it. pnpm 9 and 10 both write '9.0'; pnpm 9 is the first of them
// and the safer choice: pnpm 10 no longer runs dependencies' build
// scripts by default (onlyBuiltDependencies), so a checkout locked with
// 9.0 but expecting them would fail under 10. '6.x' is pnpm 8, '5.4'
// pnpm 7, '5.3' pnpm 6, any other 5.x pnpm 5.
func pnpmMajor(v string) (string, bool) {
	major, minor, _ := strings.Cut(v, ".")
	switch {
	case major == "9":
		return "9", true
	case major == "6":
		return "8", true
	case major == "5" && minor == "4":
		return "7", true
	case major == "5" && minor == "3":
		return "6", true
	case major == "5":
		return "5", true
	}
	return "", false
}

// berryYarnVersion maps the __metadata version of a berry yarn.lock to the
// newest Yarn that still writes it. A newer Yarn rewrites an older header
// on install, which a frozen install (--immutable) refuses with YN0028, so
// the newest release of the major is not always safe. Measured with the
// @yarnpkg/cli-dist releases on the npm registry (an install of one
// package into an empty yarn.lock, 2026-12):
//
//	4   2.4.2, 3.0.2                → "2" (every 2.x writes 4)
//	5   3.1.1                       → "3.1.1"
//	6   3.2.0, 3.8.7                → "3" (3.2 to 3.8 write 6)
//	7   4.0.0 release candidates    → unknown
//	8   4.0.0, 4.13.0               → "4.13.0"
//	9   4.14.0, 4.14.1              → "4.14.1"
//	10  4.15.0 to 4.18.1            → "4" (the newest, until it moves on)
//
// Yarn 4.18.1 on a version 8 lockfile fails `yarn install --immutable`
// with YN0028 (checked the same way).
func berryYarnVersion(metadata int) (string, bool) {
	switch metadata {
	case 4:
		return "2", true
	case 5:
		return "3.1.1", true
	case 6:
		return "3", true
	case 8:
		return "4.13.0", true
	case 9:
		return "4.14.1", true
	case 10:
		return "4", true
	}
	return "", false
}
