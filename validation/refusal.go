package validation

import "fmt"

// Code is a stable refusal code. Codes are appended to the list below and
// never renamed: operators alert and dashboards group on them.
type Code string

// The one list of refusal codes. A control that could not observe its
// subject refuses with a code ending in "_unknown"; one that observed a
// wrong subject refuses with its own code.
const (
	// Executor selection (SPEC §4.1).
	CodeExecutorUnknown       Code = "executor_unknown"
	CodeExecutorUnconfigured  Code = "executor_unconfigured"
	CodeExecutorUnavailable   Code = "executor_unavailable"
	CodeLocalNotAllowed       Code = "local_not_allowed"
	CodeIsolationTierUnmet    Code = "isolation_tier_unmet"
	CodeIsolationTierUnknown  Code = "isolation_tier_unknown"
	CodeSandboxUserUnknown    Code = "sandbox_user_unknown"
	CodeCommandRootEscape     Code = "command_root_escape"
	CodeCommandRootUnknown    Code = "command_root_unknown"
	CodeCommandRedacted       Code = "command_redacted"
	CodeScriptTooLong         Code = "script_too_long"
	CodeEgressUnknown         Code = "egress_unknown"
	CodeArtifactCeiling       Code = "artifact_ceiling"
	CodeBudgetExceeded        Code = "budget_exceeded"
	CodeInstallationMissing   Code = "installation_missing"
	CodeHeadRepositoryMissing Code = "head_repository_missing"
	// The local executor cannot run its sandbox as a dedicated
	// unprivileged uid (the worker is not root and cannot switch uid).
	CodeSandboxUserUnavailable Code = "sandbox_user_unavailable"
	// The repository's archive exceeds what a remote executor can upload
	// (a pack limit, or the provider's upload ceiling): nothing was
	// started, and a retry would not fit either.
	CodeArchiveTooLarge Code = "archive_too_large"
	// CodeSecretLeak: text about to be posted or stored held the value
	// of a worker secret; it was redacted before it left (the scan
	// reports names and offsets, never values).
	CodeSecretLeak Code = "secret_leak"
	// CodePackageManagerUnavailable: the package manager at the version
	// the checkout pins cannot be had (no such version on the registry,
	// its bytes do not match the pinned hash, no build for this
	// platform): gilf cannot run the plan, which is never the pull
	// request's failure.
	CodePackageManagerUnavailable Code = "package_manager_unavailable"
	// CodePackageManagerNotInstalled: the plan's package manager is not
	// installed on the worker and no toolchain cache is configured to
	// provide it — the operator's to fix.
	CodePackageManagerNotInstalled Code = "package_manager_not_installed"
	// CodeRepoConfigInvalid: the repository's .github/gilf.yml (from the
	// base branch) is invalid; nothing runs on defaults it did not mean.
	CodeRepoConfigInvalid Code = "repo_config_invalid"
)

// OperatorCode reports the refusals that mean the worker is not set up to
// validate at all (an executor not configured or not runnable here, a
// sandbox it cannot make, a package manager it lacks): the operator's to
// fix, never the pull request's failure. Such a run ends as gilf's own
// error, not as a refusal the author must act on.
func OperatorCode(c Code) bool {
	switch c {
	case CodeExecutorUnconfigured, CodeExecutorUnavailable, CodeSandboxUserUnavailable,
		CodeIsolationTierUnmet, CodeIsolationTierUnknown, CodePackageManagerNotInstalled:
		return true
	}
	return false
}

// Controls of SPEC §7, as ControlDecision names them.
const (
	ControlRedaction   = "redaction"
	ControlCommandRoot = "command-root"
	ControlSecretLeak  = "secret-leak"
	ControlExecutor    = "executor"
)

// ControlDecision is one control's decision on a run, passed or not.
type ControlDecision struct {
	Control string `json:"control"`
	Passed  bool   `json:"passed"`
	// Code is the refusal code when it did not pass.
	Code   Code   `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Decision is the decision of a control that refused with r, or passed
// when r is nil.
func Decision(control string, r *Refusal) ControlDecision {
	if r == nil {
		return ControlDecision{Control: control, Passed: true}
	}
	return ControlDecision{Control: control, Code: r.Code, Detail: r.Msg}
}

// Refusal is a control saying no before anything ran. It is an error so an
// executor can return it from Run; callers tell it apart with errors.As.
// Msg is public: it is shown on the pull request.
type Refusal struct {
	Code Code   `json:"code"`
	Msg  string `json:"message"`
}

func (r *Refusal) Error() string { return fmt.Sprintf("refused (%s): %s", r.Code, r.Msg) }

// Refuse builds a Refusal with a formatted public message.
func Refuse(code Code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// AdmitCommands is the redaction control (SPEC §7): a command that holds
// the value of a worker secret would be changed by redaction before it is
// shown, so what the record says ran would not be what ran. Such a plan is
// never executed: the refusal names the step and the secret, never the
// value. Inconclusive steps, which never run, are not looked at.
func AdmitCommands(plan Plan, secrets []Secret) *Refusal {
	for _, st := range plan.Steps {
		if st.Inconclusive != "" {
			continue
		}
		var b []byte
		for _, a := range st.Argv {
			b = append(append(b, a...), 0)
		}
		if hits := ScanSecrets(b, secrets); len(hits) > 0 {
			return Refuse(CodeCommandRedacted, "step %s: its command holds the value of %s; a command redaction would change is never run", st.Name, hits[0].Name)
		}
	}
	return nil
}

// WithinRoot reports whether dir is root or below it, for clean absolute
// paths. A directory that only shares a prefix with the root
// (/srv/repo-evil and /srv/repo) is not within it.
func WithinRoot(root, dir string) bool {
	if root == "" || dir == "" || root[0] != '/' || dir[0] != '/' {
		return false
	}
	if root == "/" || dir == root {
		return true
	}
	return len(dir) > len(root) && dir[:len(root)] == root && dir[len(root)] == '/'
}
