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
)

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
