package egress

import (
	"encoding/base64"
	"errors"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"
)

// tarballRef is a request for a package's tarball as npm registries name
// them: <prefix>/<name>/-/<basename>-<version>.tgz, the name scoped or
// not, the prefix a registry's own path (often empty).
type tarballRef struct {
	prefix  string
	name    string // "pkg" or "@scope/pkg"
	version string
}

// parseTarballPath reads a tarball request's (unescaped) path.
func parseTarballPath(p string) (tarballRef, bool) {
	i := strings.LastIndex(p, "/-/")
	if i < 0 {
		return tarballRef{}, false
	}
	dir, file := p[:i], p[i+len("/-/"):]
	if strings.Contains(file, "/") || !strings.HasSuffix(file, ".tgz") {
		return tarballRef{}, false
	}
	j := strings.LastIndexByte(dir, '/')
	if j < 0 {
		return tarballRef{}, false
	}
	prefix, name := dir[:j], dir[j+1:]
	if k := strings.LastIndexByte(prefix, '/'); k >= 0 && strings.HasPrefix(prefix[k+1:], "@") {
		prefix, name = prefix[:k], prefix[k+1:]+"/"+name
	}
	base := name[strings.LastIndexByte(name, '/')+1:]
	version, ok := strings.CutPrefix(strings.TrimSuffix(file, ".tgz"), base+"-")
	if !ok || version == "" || base == "" || base == "." || base == ".." || strings.HasPrefix(base, "@") {
		return tarballRef{}, false
	}
	return tarballRef{prefix: prefix, name: name, version: version}, true
}

// packumentPath is the path of the package's metadata document: the
// scope's slash escaped, as npm asks for it.
func (t tarballRef) packumentPath() string {
	return t.prefix + "/" + strings.Replace(url.PathEscape(t.name), "%2F", "%2f", 1)
}

// isPackumentPath reports whether an (unescaped) path names a package's
// metadata: one segment, or a scope and a name, no "-" segment.
func isPackumentPath(p string) bool {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	switch {
	case len(segs) == 1:
		return segs[0] != "" && !strings.HasPrefix(segs[0], "-") && !strings.HasPrefix(segs[0], "@")
	case len(segs) == 2:
		return strings.HasPrefix(segs[0], "@") && len(segs[0]) > 1 && segs[1] != "" && !strings.HasPrefix(segs[1], "-")
	}
	return false
}

// corgiAccept is the Accept field npm sends for the abbreviated
// metadata package managers install from.
const corgiAccept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"

// acceptClass names the metadata variant a client asks for: the
// abbreviated one, or the whole document.
func acceptClass(accept string) string {
	if strings.Contains(accept, "application/vnd.npm.install-v1+json") {
		return "corgi"
	}
	return "full"
}

// errNoIntegrity is a packument that publishes no sha512 integrity for
// the version asked for: the tarball passes through, never stored.
var errNoIntegrity = errors.New("no sha512 integrity published")

// publishedIntegrities reads a packument (at most MaxMetadataBytes) and
// returns the sha512 its registry publishes for each version that has
// one.
func publishedIntegrities(r io.Reader) (map[string][]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxMetadataBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > MaxMetadataBytes {
		return nil, errors.New("packument over MaxMetadataBytes")
	}
	return scanIntegrities(b)
}

// sha512Of returns the sha512 digest of an SRI integrity string
// ("sha512-<base64>", possibly among other hashes).
func sha512Of(integrity string) ([]byte, error) {
	if oneField(integrity) {
		// The form registries publish, taken without a look at each
		// character's Unicode class (a fifth of scanIntegrities).
		if sum, ok := sha512Field(integrity); ok {
			return sum, nil
		}
		return nil, errNoIntegrity
	}
	for f := range strings.FieldsSeq(integrity) {
		if sum, ok := sha512Field(f); ok {
			return sum, nil
		}
	}
	return nil, errNoIntegrity
}

// oneField reports whether s is one field as strings.FieldsSeq splits:
// not empty, printable ASCII without a space.
func oneField(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= utf8.RuneSelf {
			return false
		}
	}
	return s != ""
}

// sha512Field is the digest of one field of an integrity string, when
// it is a sha512 one.
func sha512Field(f string) ([]byte, bool) {
	b64, ok := strings.CutPrefix(f, "sha512-")
	if !ok {
		return nil, false
	}
	if i := strings.IndexByte(b64, '?'); i >= 0 {
		b64 = b64[:i]
	}
	sum, err := base64.StdEncoding.DecodeString(b64)
	return sum, err == nil && len(sum) == 64
}
