package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gilf-review/gilf/executors/selfhost"
	"github.com/gilf-review/gilf/validation"
)

// knownEnv is every GILF_* variable gilf reads: the one list, kept equal
// to the names the load functions of config*.go read (a test greps them).
// A GILF_* variable of the environment that is not here is a typo or a
// setting of another version: gilf serve refuses to start with it, naming
// the closest known name.
func knownEnv() []string {
	return []string{
		// config.go
		"GILF_DATA_DIR", "GILF_LOG_LEVEL", "GILF_LOG_FORMAT",
		"GILF_VALIDATION_EXECUTOR", "GILF_VALIDATION_PROVIDER", "GILF_ALLOW_LOCAL_VALIDATION",
		"GILF_LOCAL_MIN_TIER", "GILF_VALIDATION_CODE_CHANGES_ONLY",
		"GILF_VALIDATION_STEP_TIMEOUT_MS", "GILF_VALIDATION_INSTALL_TIMEOUT_MS",
		"GILF_LOCAL_DISK_BYTES", "GILF_LOCAL_DISK_INODES", "GILF_LOCAL_UID_RANGE",
		// config_install.go
		envInstallNetwork, envInstallAllowHosts, envInstallIgnoreScripts,
		// config_install_cache.go
		envInstallTLSTerminate, envInstallTunnelHosts, envInstallCacheBytes, envInstallWarmBytes,
		envInstallCacheMetadataTTL, envInstallRegistryCredsFile,
		// config_sandbox.go
		envSandboxCAFile, envSandboxEnv, envToolchainDir, envToolchainRegistry,
		// config_stages.go
		"GILF_EVIDENCE_ARTIFACTS", "GILF_EVIDENCE_REQUIRE_ARTIFACTS",
		"GILF_EVIDENCE_S3_BUCKET", "GILF_EVIDENCE_S3_ENDPOINT", "GILF_EVIDENCE_S3_REGION",
		"GILF_EVIDENCE_S3_PREFIX", "GILF_EVIDENCE_S3_PATH_STYLE",
		"GILF_EVIDENCE_PUBLIC_BASE_URL", "GILF_EVIDENCE_PRESIGN_EXPIRY_MS",
		"GILF_VALIDATION_COST_RATES", "GILF_E2B_BUDGET_USD",
		// config_serve.go
		"GILF_ADDR", "GILF_GITHUB_APP_ID", "GILF_GITHUB_PRIVATE_KEY", "GILF_GITHUB_PRIVATE_KEY_PATH",
		"GILF_WEBHOOK_SECRET", "GILF_GITHUB_API_URL", "GILF_GITHUB_DOWNLOAD_HOSTS",
		"GILF_WORKERS", "GILF_JOB_LEASE_MS", "GILF_REVIEW_DRAFTS",
		"GILF_ALLOWED_ACCOUNTS", "GILF_ALLOWED_INSTALLATIONS",
		"GILF_BAD_SIGNATURE_LIMIT", "GILF_TRUSTED_PROXIES", "GILF_REDELIVERY_SWEEP_MS",
		"GILF_VALIDATION_SHADOW_EXECUTOR", "GILF_VALIDATION_SHADOW_TIMEOUT_MS",
		"GILF_SELF_HOST_COMMAND", selfhost.NetworkEnv, "GILF_SELF_HOST_TIMEOUT_MS",
		"GILF_SELF_HOST_VCPU", "GILF_SELF_HOST_MEMORY_GIB",
		"GILF_CRABBOX_BIN", "GILF_CRABBOX_COORDINATOR", "GILF_CRABBOX_TOKEN",
		"GILF_E2B_TEMPLATE", "GILF_E2B_TIMEOUT_MS", "GILF_E2B_API_URL", "GILF_E2B_ENVD_URL",
		"GILF_E2B_CPU", "GILF_E2B_MEMORY_MB", "GILF_E2B_ALLOW_OUT",
		"GILF_CF_SANDBOX_ENABLED", "GILF_CF_SANDBOX_URL", "GILF_CF_SANDBOX_TOKEN", "GILF_CF_SANDBOX_TIMEOUT_MS",
		// config_dashboard.go
		"GILF_DASHBOARD_TOKEN", "GILF_DASHBOARD_URL",
		// config_health.go
		"GILF_MIN_FREE_BYTES",
		// config_semantic.go
		"GILF_SEMANTIC_REVIEW_URL", "GILF_SEMANTIC_REVIEW_MODEL", "GILF_SEMANTIC_REVIEW_API_KEY",
		"GILF_SEMANTIC_REVIEW_TIMEOUT_MS", "GILF_SEMANTIC_REVIEW_MAX_INPUT_BYTES", "GILF_SKIP_CODEX_ON_VALIDATION_FAILURE",
		// config_commands.go
		"GILF_COMMANDS", "GILF_GITHUB_APP_SLUG", "GILF_COMMAND_RUNS_PER_HOUR",
		// config_jobs.go
		"GILF_JOB_MAX_ATTEMPTS", "GILF_JOB_RETRY_BASE_MS", "GILF_JOB_RETRY_MAX_MS", "GILF_RETENTION_DAYS",
		// the store: PostgreSQL when GILF_DATABASE_URL is set, else SQLite
		// under GILF_DATA_DIR (issue 14)
		"GILF_DATABASE_URL", "GILF_DATABASE_MAX_CONNS", "GILF_EVIDENCE_FS_SHARED",
		// config_origin.go
		"GILF_BASE_COMPARISON",
	}
}

// envPrefix is the prefix of gilf's own variables.
const envPrefix = "GILF_"

// unknownEnv reports every GILF_* variable of environ (NAME=value
// entries) that gilf does not read, each with the closest known name, in
// the order of environ.
func unknownEnv(environ []string) []error {
	known := knownEnv()
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || slices.Contains(known, name) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s is set but gilf reads no such variable; did you mean %s?", name, closestKnown(name)))
	}
	return errs
}

// closestKnown is the known name at the smallest edit distance from name
// (the first in knownEnv on a tie).
func closestKnown(name string) string {
	best, _ := validation.Closest(name, knownEnv())
	return best
}
