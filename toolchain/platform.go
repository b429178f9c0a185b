package toolchain

import (
	"bufio"
	"slices"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// The npm packages each package manager comes from. npm is not among
// them: it is the worker's own node's npm.
const (
	pnpmPackage      = "pnpm"
	yarnPackage      = "yarn"
	yarnBerryPackage = "@yarnpkg/cli-dist"
	// Bun's builds: x64 needs AVX2, baseline does not.
	bunX64Package      = "@oven/bun-linux-x64"
	bunBaselinePackage = "@oven/bun-linux-x64-baseline"
	bunARM64Package    = "@oven/bun-linux-aarch64"
)

// bunPackage is the npm package of bun's build for goos/goarch, given
// the text of /proc/cpuinfo (only read on amd64), or "" when bun has no
// build gilf runs there.
func bunPackage(goos, goarch, cpuinfo string) string {
	if goos != "linux" {
		return ""
	}
	switch goarch {
	case "amd64":
		if slices.Contains(cpuFlags(cpuinfo), "avx2") {
			return bunX64Package
		}
		return bunBaselinePackage
	case "arm64":
		return bunARM64Package
	}
	return ""
}

// cpuFlags returns the flags of the first processor in /proc/cpuinfo
// ("flags : fpu vme … avx2 …"); nil when there is no flags line.
func cpuFlags(cpuinfo string) []string {
	sc := bufio.NewScanner(strings.NewReader(cpuinfo))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "flags" {
			return strings.Fields(value)
		}
	}
	return nil
}

// tool is what gilf knows of a package manager before any download.
type tool struct {
	manager validation.PackageManager
	pkg     string // npm package name
	command string // the command named after it, whose file is its main file
}

// baseName is the package name without its scope.
func baseName(pkg string) string { return pkg[strings.LastIndexByte(pkg, '/')+1:] }

// pathName is the package name as a registry URL path carries it: the
// slash of a scoped name escaped.
func pathName(pkg string) string { return strings.Replace(pkg, "/", "%2f", 1) }
