// The Worker in front of the gilf container. It forwards requests and hands
// the container its settings: everything the original engine forwarded
// (executor, CF sandbox, E2B key and sizing, shadow, cost rates) and, going
// beyond it, every other setting the container reads (GitHub App, the
// PostgreSQL store, evidence, self-host, crabbox, code-changes-only, local
// opt-in, budgets).
import { Container, getContainer } from "@cloudflare/containers";
import { keepAwake } from "./activity.js";

export const FORWARDED = [
  "GILF_ADDR", "GILF_DATA_DIR", "GILF_WORKERS", "GILF_LOG_LEVEL", "GILF_LOG_FORMAT",
  "GILF_DATABASE_URL", "GILF_DATABASE_MAX_CONNS",
  "GILF_WEBHOOK_SECRET", "GILF_GITHUB_APP_ID", "GILF_GITHUB_PRIVATE_KEY", "GILF_GITHUB_PRIVATE_KEY_PATH",
  "GILF_GITHUB_API_URL", "GILF_GITHUB_DOWNLOAD_HOSTS", "GILF_JOB_LEASE_MS", "GILF_REVIEW_DRAFTS",
  "GILF_ALLOWED_ACCOUNTS", "GILF_ALLOWED_INSTALLATIONS", "GILF_REDELIVERY_SWEEP_MS",
  "GILF_BAD_SIGNATURE_LIMIT", "GILF_TRUSTED_PROXIES", "GILF_MIN_FREE_BYTES",
  "GILF_DASHBOARD_TOKEN", "GILF_DASHBOARD_URL",
  "GILF_JOB_MAX_ATTEMPTS", "GILF_JOB_RETRY_BASE_MS", "GILF_JOB_RETRY_MAX_MS", "GILF_RETENTION_DAYS",
  "GILF_VALIDATION_STEP_TIMEOUT_MS", "GILF_VALIDATION_INSTALL_TIMEOUT_MS",
  "GILF_VALIDATION_EXECUTOR", "GILF_VALIDATION_PROVIDER", "GILF_VALIDATION_CODE_CHANGES_ONLY",
  "GILF_VALIDATION_SHADOW_EXECUTOR", "GILF_VALIDATION_SHADOW_TIMEOUT_MS",
  "GILF_VALIDATION_COST_RATES", "GILF_E2B_BUDGET_USD", "GILF_BASE_COMPARISON",
  "GILF_SKIP_CODEX_ON_VALIDATION_FAILURE", "GILF_SEMANTIC_REVIEW_URL", "GILF_SEMANTIC_REVIEW_MODEL",
  "GILF_SEMANTIC_REVIEW_API_KEY", "GILF_SEMANTIC_REVIEW_TIMEOUT_MS", "GILF_SEMANTIC_REVIEW_MAX_INPUT_BYTES", "GILF_ALLOW_LOCAL_VALIDATION", "GILF_LOCAL_MIN_TIER",
  "GILF_COMMANDS", "GILF_GITHUB_APP_SLUG", "GILF_COMMAND_RUNS_PER_HOUR",
  "GILF_INSTALL_NETWORK", "GILF_INSTALL_ALLOW_HOSTS", "GILF_INSTALL_IGNORE_SCRIPTS",
  "GILF_INSTALL_TLS_TERMINATE", "GILF_INSTALL_TUNNEL_HOSTS", "GILF_INSTALL_CACHE_BYTES", "GILF_INSTALL_WARM_BYTES",
  "GILF_INSTALL_CACHE_METADATA_TTL_MS", "GILF_INSTALL_REGISTRY_CREDENTIALS",
  "GILF_LOCAL_DISK_BYTES", "GILF_LOCAL_DISK_INODES", "GILF_LOCAL_UID_RANGE",
  "GILF_SANDBOX_CA_FILE", "GILF_SANDBOX_ENV", "GILF_TOOLCHAIN_DIR", "GILF_TOOLCHAIN_REGISTRY",
  "GILF_CF_SANDBOX_ENABLED", "GILF_CF_SANDBOX_URL", "GILF_CF_SANDBOX_TOKEN", "GILF_CF_SANDBOX_TIMEOUT_MS",
  "E2B_API_KEY", "GILF_E2B_TEMPLATE", "GILF_E2B_TIMEOUT_MS", "GILF_E2B_CPU", "GILF_E2B_MEMORY_MB",
  "GILF_E2B_API_URL", "GILF_E2B_ENVD_URL", "GILF_E2B_ALLOW_OUT",
  "GILF_SELF_HOST_COMMAND", "GILF_SELF_HOST_NETWORK", "GILF_SELF_HOST_TIMEOUT_MS",
  "GILF_SELF_HOST_VCPU", "GILF_SELF_HOST_MEMORY_GIB",
  "GILF_CRABBOX_BIN", "GILF_CRABBOX_COORDINATOR", "GILF_CRABBOX_TOKEN",
  "GILF_EVIDENCE_ARTIFACTS", "GILF_EVIDENCE_REQUIRE_ARTIFACTS", "GILF_EVIDENCE_PUBLIC_BASE_URL",
  "GILF_EVIDENCE_S3_BUCKET", "GILF_EVIDENCE_S3_ENDPOINT", "GILF_EVIDENCE_S3_REGION",
  "GILF_EVIDENCE_S3_PREFIX", "GILF_EVIDENCE_S3_PATH_STYLE", "GILF_EVIDENCE_PRESIGN_EXPIRY_MS",
  "GILF_EVIDENCE_FS_SHARED",
  "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
];

// containerEnv builds the container's environment from the Worker's vars
// and secrets, with the defaults the original engine applied.
export function containerEnv(env) {
  const out = {};
  for (const name of FORWARDED) {
    if (typeof env[name] === "string" && env[name] !== "") out[name] = env[name];
  }
  out.GILF_VALIDATION_EXECUTOR ??= "managed-cf-sandbox";
  out.GILF_CF_SANDBOX_ENABLED ??= "1";
  out.GILF_ADDR ??= ":8080";
  return out;
}

export class Gilf extends Container {
  defaultPort = 8080;
  // The container sleeps once no request came for this long, and its disk
  // goes with it (see README: durable only with GILF_DATABASE_URL, the
  // PostgreSQL store). One window is longer than the
  // longest validation (GILF_CF_SANDBOX_TIMEOUT_MS, 45 min by default, plus
  // a shadow lane's GILF_VALIDATION_SHADOW_TIMEOUT_MS, 10 min), and at its
  // end onActivityExpired asks the container itself: a job running (or
  // queued) renews the window, so sleep never stops a running validation.
  sleepAfter = "1h";
  constructor(ctx, env) {
    super(ctx, env);
    this.envVars = containerEnv(env);
  }
  async onActivityExpired() {
    const { keep, why } = await keepAwake(() => this.containerFetch("http://gilf/metrics", this.defaultPort));
    if (keep) {
      console.log(`gilf container kept awake: ${why}`);
      this.renewActivityTimeout();
      return;
    }
    console.log(`gilf container going to sleep: ${why}`);
    await super.onActivityExpired();
  }
}

export default {
  async fetch(request, env) {
    // One container instance (max_instances 1). Its store is PostgreSQL when
    // GILF_DATABASE_URL is set, else the embedded SQLite on its own disk.
    return getContainer(env.GILF, "gilf").fetch(request);
  },
};
