package cmdrun

import (
	"slices"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// DefaultPath is the PATH a command gets when the worker's environment
// has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// InheritEnv picks from the worker's environment ("NAME=value") the
// variables named in allowed, leaving out any whose value holds one of
// secrets, and defaults PATH to defaultPath. The caller adds its own
// variables and makes the list with EnvList.
func InheritEnv(worker, allowed []string, secrets []validation.Secret, defaultPath string) map[string]string {
	vals := map[string]string{}
	for _, kv := range worker {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(allowed, name) || holdsSecret(value, secrets) {
			continue
		}
		vals[name] = value
	}
	if vals["PATH"] == "" {
		vals["PATH"] = defaultPath
	}
	return vals
}

// EnvList is vals as "NAME=value" entries, sorted, so it is stable.
func EnvList(vals map[string]string) []string {
	env := make([]string, 0, len(vals))
	for name, value := range vals {
		env = append(env, name+"="+value)
	}
	slices.Sort(env)
	return env
}

func holdsSecret(value string, secrets []validation.Secret) bool {
	for _, s := range secrets {
		if len(s.Value) >= validation.MinSecretLength && strings.Contains(value, s.Value) {
			return true
		}
	}
	return false
}
