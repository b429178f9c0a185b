package validation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// LooksSecret reports whether an environment variable name looks secret:
// tokens, keys, passwords and auth settings (npm's
// npm_config_//host/:_authToken, _auth, _password among them). A worker
// variable with such a name is redacted from every output and withheld
// from every sandbox; a step variable with such a name is refused.
func LooksSecret(name string) bool {
	if npmAuthKey(name) {
		return true
	}
	n := strings.ToUpper(name)
	for _, s := range []string{"_TOKEN", "_KEY", "_SECRET", "_PAT", "_CREDENTIALS", "_DSN", "_AUTH"} {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	for _, s := range []string{"PASSWORD", "PASSWD", "SECRET", "PRIVATE_KEY", "AUTHTOKEN", "AUTH_TOKEN"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	// *_AUTH*, but not a git author's name.
	if i := strings.Index(n, "_AUTH"); i >= 0 && !strings.HasPrefix(n[i:], "_AUTHOR") {
		return true
	}
	return strings.HasPrefix(n, "AWS_") || strings.HasPrefix(n, "AUTH_")
}

// npmAuthKeys are npm's credential settings: a variable that sets one
// (npm_config__authToken, NPM_CONFIG_//registry.npmjs.org/:_authToken,
// npm_config_//host/:_auth, :_password), in any case, is a secret.
func npmAuthKeys() []string { return []string{"_authtoken", "_auth", "_password"} }

// npmAuthKey reports whether name sets an npm credential: its last part,
// after the registry's ":" or npm_config_'s "_" prefix, is one of
// npmAuthKeys.
func npmAuthKey(name string) bool {
	n := strings.ToLower(name)
	if i := strings.LastIndexByte(n, ':'); i >= 0 {
		n = n[i+1:]
	} else if rest, ok := strings.CutPrefix(n, "npm_config_"); ok {
		n = rest
	} else {
		return false
	}
	return slices.Contains(npmAuthKeys(), n)
}

// reservedEnv are the names executors set themselves: the sandbox's home,
// path and CI flag, its way to the registry and its CA.
var reservedEnv = []string{
	"HOME", "TMPDIR", "CI", "PATH", "PWD", "USER", "LOGNAME", "SHELL",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	"NPM_CONFIG_PROXY", "NPM_CONFIG_HTTPS_PROXY", "NPM_CONFIG_NOPROXY", "NPM_CONFIG_REGISTRY",
	"NPM_CONFIG_CAFILE", "NPM_CONFIG_USERCONFIG", "NPM_CONFIG_GLOBALCONFIG",
	"YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", "YARN_CAFILE", "YARN_CA_FILE_PATH",
	"YARN_HTTPS_CA_FILE_PATH", "YARN_NPM_REGISTRY_SERVER", "YARN_RC_FILENAME",
	"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "GIT_SSL_CAINFO",
	"LD_PRELOAD", "LD_LIBRARY_PATH",
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MaxEnvNameBytes bounds a step variable's name.
const MaxEnvNameBytes = 128

// CheckStepEnv says why NAME=value may not be set for a plan's steps, or
// "" when it may: the name must be a shell name, not look secret, not be
// one an executor sets itself (nor GILF_*), and the value holds no NUL
// and at most maxValue bytes (maxValue <= 0: no limit).
func CheckStepEnv(name, value string, maxValue int) string {
	upper := strings.ToUpper(name)
	switch {
	case len(name) > MaxEnvNameBytes:
		return fmt.Sprintf("the name is over %d bytes", MaxEnvNameBytes)
	case !envNameRe.MatchString(name):
		return fmt.Sprintf("%q is not a variable name (letters, digits and _, not starting with a digit)", name)
	case LooksSecret(name):
		return fmt.Sprintf("%s looks like a secret: secrets never enter a sandbox", name)
	case slices.Contains(reservedEnv, upper) || strings.HasPrefix(upper, "GILF_"):
		return fmt.Sprintf("%s is set by gilf itself", name)
	case strings.ContainsRune(value, 0):
		return fmt.Sprintf("%s holds a NUL byte", name)
	case maxValue > 0 && len(value) > maxValue:
		return fmt.Sprintf("%s's value is %d bytes, over the %d-byte limit", name, len(value), maxValue)
	}
	return ""
}
