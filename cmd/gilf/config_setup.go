package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gilf-review/gilf/executors"
)

// MinWebhookSecretBytes is the shortest GILF_WEBHOOK_SECRET gilf serve
// accepts: a shorter one can be guessed, and then anyone can post
// deliveries that verify.
const MinWebhookSecretBytes = 16

// configuredExecutors names the executors serve has settings for, in
// the order buildExecutors builds them (the same conditions).
func configuredExecutors(v ValidationConfig, sc ServeConfig) []string {
	var names []string
	if v.AllowLocal {
		names = append(names, executors.NameLocal)
	}
	if sc.SelfHost.Command != "" {
		names = append(names, executors.NameSelfHost)
	}
	if sc.Crabbox.Configured() {
		names = append(names, executors.NameManagedCrabbox)
	}
	if sc.E2B.Configured() {
		names = append(names, executors.NameManagedE2B)
	}
	if sc.CFSandbox.Configured() {
		names = append(names, executors.NameManagedCFSandbox)
	}
	return names
}

// checkServeSetup reports the set-ups serve would start with and then
// refuse or misverify every pull request: no executor, a default executor
// that is not configured, a self-host command that is not an executable
// file, a webhook secret shorter than MinWebhookSecretBytes, and GILF_*
// variables gilf does not read. getenv gives PATH to find a bare self-host
// program.
func checkServeSetup(cfg Config, sc ServeConfig, getenv func(string) string, environ []string) []error {
	var errs []error
	if err := checkDefaultExecutor(cfg.Validation, sc); err != nil {
		errs = append(errs, err)
	}
	if sc.SelfHost.Command != "" {
		if err := checkProgram(strings.Fields(sc.SelfHost.Command)[0], getenv("PATH")); err != nil {
			errs = append(errs, fmt.Errorf("GILF_SELF_HOST_COMMAND=%q: %w", sc.SelfHost.Command, err))
		}
	}
	if err := checkWebhookSecret(sc.GitHub.WebhookSecret); err != nil {
		errs = append(errs, err)
	}
	if err := checkShadowExecutor(cfg.Validation, sc); err != nil {
		errs = append(errs, err)
	}
	if err := checkUIDRange(cfg.Validation, sc); err != nil {
		errs = append(errs, err)
	}
	return append(errs, unknownEnv(environ)...)
}

// checkShadowExecutor reports a shadow lane whose executor is unknown or
// not configured: every shadow run would be refused, and its telemetry
// would say nothing.
func checkShadowExecutor(v ValidationConfig, sc ServeConfig) error {
	if sc.Shadow.Executor == "" {
		return nil
	}
	name, ok := executors.Canonical(sc.Shadow.Executor)
	names := configuredExecutors(v, sc)
	switch {
	case !ok:
		return fmt.Errorf("GILF_VALIDATION_SHADOW_EXECUTOR=%q names no executor; configured here: %s", sc.Shadow.Executor, strings.Join(names, ", "))
	case !slices.Contains(names, name):
		return fmt.Errorf("GILF_VALIDATION_SHADOW_EXECUTOR=%q: %s is not configured, so every shadow run would be refused; configured here: %s", sc.Shadow.Executor, name, strings.Join(names, ", "))
	}
	return nil
}

// checkWebhookSecret reports a secret that is set but shorter than
// MinWebhookSecretBytes (an unset one is ServeConfig.App's to report).
func checkWebhookSecret(s Secret) error {
	if n := len(s.Reveal()); n > 0 && n < MinWebhookSecretBytes {
		return fmt.Errorf("GILF_WEBHOOK_SECRET is %d bytes: want at least %d (use the App's random secret, e.g. `openssl rand -hex 32`)", n, MinWebhookSecretBytes)
	}
	return nil
}

// checkDefaultExecutor reports a worker with no executor, or whose
// executor for a repository without a validation.provider (what
// executors.Selection resolves to with no repository config) is not
// configured: every such pull request would be refused.
func checkDefaultExecutor(v ValidationConfig, sc ServeConfig) error {
	names := configuredExecutors(v, sc)
	c := v.Selection().Resolve()
	if len(names) == 0 {
		var all []string
		for _, n := range executorOrder {
			all = append(all, executorSettings[n])
		}
		msg := "no executor is configured, so every pull request would be refused: set " + strings.Join(all[:len(all)-1], ", ") + ", or " + all[len(all)-1]
		if how, ok := executorSettings[c.Name]; ok && c.Requested != "" {
			msg = fmt.Sprintf("%s=%q chooses %s, which is not configured: set %s (%s)", c.Source, c.Requested, c.Name, how, msg)
		}
		return errors.New(msg)
	}
	configured := strings.Join(names, ", ")
	switch {
	case c.Name == "":
		return fmt.Errorf("%s=%q names no executor; configured here: %s", c.Source, c.Requested, configured)
	case !slices.Contains(names, c.Name) && c.Name == executors.NameLocal:
		return fmt.Errorf("the default executor local (chosen by %s) runs only with GILF_ALLOW_LOCAL_VALIDATION=1; configured here: %s", c.Source, configured)
	case !slices.Contains(names, c.Name):
		return fmt.Errorf("the default executor %s (chosen by %s) is not configured, so every pull request without its own validation.provider would be refused: set GILF_VALIDATION_EXECUTOR or GILF_VALIDATION_PROVIDER to one configured here (%s), or configure %s: set %s", c.Name, c.Source, configured, c.Name, executorSettings[c.Name])
	}
	return nil
}

// executorSettings says, per executor, what configures it;
// executorOrder is configuredExecutors' order.
var (
	executorOrder    = []string{executors.NameLocal, executors.NameSelfHost, executors.NameManagedCrabbox, executors.NameManagedE2B, executors.NameManagedCFSandbox}
	executorSettings = map[string]string{
		executors.NameLocal:            "GILF_ALLOW_LOCAL_VALIDATION=1",
		executors.NameSelfHost:         "GILF_SELF_HOST_COMMAND",
		executors.NameManagedCrabbox:   "GILF_CRABBOX_BIN and GILF_CRABBOX_COORDINATOR",
		executors.NameManagedE2B:       "E2B_API_KEY",
		executors.NameManagedCFSandbox: "GILF_CF_SANDBOX_ENABLED=1 with its URL and token",
	}
)

// checkProgram reports a program that is not an executable regular
// file: a path (relative to the working directory) when it holds a
// slash, else a name looked up in path (a PATH value).
func checkProgram(prog, path string) error {
	if strings.Contains(prog, "/") {
		return executableFile(prog)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if executableFile(filepath.Join(dir, prog)) == nil {
			return nil
		}
	}
	return fmt.Errorf("%s is not an executable file in any directory of PATH", prog)
}

// executableFile reports a path that is missing, not a regular file, or
// has no execute bit.
func executableFile(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", p)
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", p)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable (mode %v)", p, fi.Mode().Perm())
	}
	return nil
}
