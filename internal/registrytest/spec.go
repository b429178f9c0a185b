package registrytest

import (
	"fmt"
	"strconv"
	"strings"
)

// spec is one name@version line of packages.txt.
type spec struct{ name, version string }

func (s spec) String() string { return s.name + "@" + s.version }

// base is the name without its scope: "name" for both name and @scope/name.
func (s spec) base() string { return s.name[strings.LastIndex(s.name, "/")+1:] }

// packFile is the file npm pack writes: scope-name-VERSION.tgz for a
// scoped package, name-VERSION.tgz otherwise.
func (s spec) packFile() string {
	return strings.ReplaceAll(strings.TrimPrefix(s.name, "@"), "/", "-") + "-" + s.version + ".tgz"
}

// tarballFile is the file name of the tarball in the registry: name-VERSION.tgz,
// without the scope, as npm publishes it.
func (s spec) tarballFile() string { return s.base() + "-" + s.version + ".tgz" }

// pathName is the name as it appears in a registry URL path: the slash of a
// scoped name escaped, as npm sends it.
func (s spec) pathName() string { return strings.ReplaceAll(s.name, "/", "%2f") }

// parseSpecs reads packages.txt: one name@version a line, # comments and
// blank lines ignored. It needs at least one line (the root) and no
// duplicates.
func parseSpecs(text string) ([]spec, error) {
	var specs []spec
	seen := map[spec]bool{}
	for i, line := range strings.Split(text, "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		at := strings.LastIndexByte(line, '@')
		if at <= 0 || at == len(line)-1 {
			return nil, fmt.Errorf("packages.txt line %d: %q is not name@version", i+1, line)
		}
		s := spec{name: line[:at], version: line[at+1:]}
		if strings.HasPrefix(s.name, "@") != strings.Contains(s.name, "/") || strings.Count(s.name, "/") > 1 {
			return nil, fmt.Errorf("packages.txt line %d: %q is not a package name", i+1, s.name)
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("packages.txt line %d: %q has blanks", i+1, line)
		}
		if seen[s] {
			return nil, fmt.Errorf("packages.txt line %d: %s listed twice", i+1, s)
		}
		seen[s] = true
		specs = append(specs, s)
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("packages.txt lists no package")
	}
	return specs, nil
}

// compareVersions orders two semver versions: negative when a < b. It
// compares major.minor.patch numerically, then puts a prerelease before its
// release, then compares prereleases as strings: enough to publish
// versions in order so that "latest" ends on the highest.
func compareVersions(a, b string) int {
	ar, ap, _ := strings.Cut(strings.SplitN(a, "+", 2)[0], "-")
	br, bp, _ := strings.Cut(strings.SplitN(b, "+", 2)[0], "-")
	an, bn := strings.Split(ar, "."), strings.Split(br, ".")
	for i := 0; i < len(an) || i < len(bn); i++ {
		x, y := versionPart(an, i), versionPart(bn, i)
		if x != y {
			return x - y
		}
	}
	switch {
	case ap == bp:
		return 0
	case ap == "":
		return 1
	case bp == "":
		return -1
	}
	return strings.Compare(ap, bp)
}

// versionPart is the i-th numeric part of a version, 0 when missing or not
// a number.
func versionPart(parts []string, i int) int {
	if i >= len(parts) {
		return 0
	}
	n, err := strconv.Atoi(parts[i])
	if err != nil {
		return 0
	}
	return n
}
