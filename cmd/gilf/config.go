package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/validation"
)

// This file is the one place gilf reads its environment. Load turns a
// lookup function into a Config, validating every setting at once; each
// area (validation, webhook, store, evidence, costs, …) has its own
// sub-struct and its own load function, in config_<area>.go, that Load
// calls. Nothing below Load calls os.Getenv.

// Defaults of the settings read here.
const (
	DefaultDataDir  = "./.gilf"
	DefaultLogLevel = "info"
	// DefaultLogFormat is text for people; deployments set json.
	DefaultLogFormat = "text"
	// MaxTimeout bounds every duration setting: a typo of a few zeros
	// should be an error, not a step that may run for a month.
	MaxTimeout = 24 * time.Hour
)

// Config is everything gilf reads from its environment.
type Config struct {
	Log        LogConfig
	DataDir    string // GILF_DATA_DIR: SQLite file, evidence, work dirs
	Validation ValidationConfig
	Evidence   EvidenceConfig
	Costs      CostsConfig
	Jobs       JobsConfig     // GILF_JOB_* retries, GILF_RETENTION_DAYS; config_jobs.go
	Semantic   SemanticConfig // GILF_SEMANTIC_REVIEW_*, GILF_SKIP_CODEX_ON_VALIDATION_FAILURE; config_semantic.go
	Database   DatabaseConfig // GILF_DATABASE_URL, GILF_DATABASE_MAX_CONNS, GILF_EVIDENCE_FS_SHARED; config_database.go
	Commands   CommandsConfig // GILF_COMMANDS, GILF_GITHUB_APP_SLUG, GILF_COMMAND_RUNS_PER_HOUR; config_commands.go
	Origin     OriginConfig   // GILF_BASE_COMPARISON; config_origin.go
}

// LogConfig is GILF_LOG_LEVEL and GILF_LOG_FORMAT.
type LogConfig struct {
	Level  slog.Level
	Format string // text or json
}

// ValidationConfig is how plans are built and which executor runs them.
type ValidationConfig struct {
	Executor    string // GILF_VALIDATION_EXECUTOR
	EnvProvider string // GILF_VALIDATION_PROVIDER
	// AllowLocal is GILF_ALLOW_LOCAL_VALIDATION=1.
	AllowLocal bool
	// LocalMinTier is GILF_LOCAL_MIN_TIER: read-only, no-network
	// (default) or none.
	LocalMinTier validation.Tier
	// CodeChangesOnly is false only when GILF_VALIDATION_CODE_CHANGES_ONLY
	// is exactly "false".
	CodeChangesOnly bool
	// StepTimeout is GILF_VALIDATION_STEP_TIMEOUT_MS, InstallTimeout
	// GILF_VALIDATION_INSTALL_TIMEOUT_MS (validation's defaults when unset).
	StepTimeout    time.Duration
	InstallTimeout time.Duration
	// Install is GILF_INSTALL_*: the install step's network and scripts.
	Install InstallConfig
	// LocalDisk is GILF_LOCAL_DISK_BYTES and GILF_LOCAL_DISK_INODES: the
	// local executor's disk ceiling per run (zero fields: its defaults).
	LocalDisk local.DiskLimit
	// LocalUIDFirst and LocalUIDCount are GILF_LOCAL_UID_RANGE
	// ("first-last"): the uids (and the gids of the same numbers) the
	// local executor gives its runs, one each. Zero: its defaults.
	LocalUIDFirst, LocalUIDCount uint32
	// Sandbox is GILF_SANDBOX_* and GILF_TOOLCHAIN_*: the sandbox's CA
	// bundle and extra environment, and the package managers gilf
	// provides.
	Sandbox SandboxConfig
}

// Selection is the executor selection of the environment; the pipeline
// fills Provider per job from the merged repository config.
func (v ValidationConfig) Selection() executors.Selection {
	return executors.Selection{Executor: v.Executor, EnvProvider: v.EnvProvider, AllowLocal: v.AllowLocal}
}

// PlanOptions are the plan settings of the environment.
func (v ValidationConfig) PlanOptions() validation.PlanOptions {
	return validation.PlanOptions{
		StepTimeout: v.StepTimeout, InstallTimeout: v.InstallTimeout,
		InstallNetwork: v.Install.Network, InstallIgnoreScripts: v.Install.IgnoreScripts,
	}
}

// Load reads the whole Config through getenv, reporting every invalid
// setting at once.
func Load(getenv func(string) string) (Config, error) {
	var errs []error
	c := Config{
		DataDir: envOr(getenv, "GILF_DATA_DIR", DefaultDataDir),
	}
	c.Log, errs = loadLog(getenv, errs)
	c.Validation, errs = loadValidation(getenv, errs)
	c.Validation.Sandbox, errs = loadSandbox(getenv, c.DataDir, errs)
	c.Evidence, errs = loadEvidence(getenv, errs)
	c.Costs, errs = loadCosts(getenv, errs)
	c.Jobs, errs = loadJobs(getenv, errs)
	c.Semantic, errs = loadSemantic(getenv, errs)
	c.Database, errs = loadDatabase(getenv, c.Evidence, errs)
	c.Commands, errs = loadCommands(getenv, errs)
	c.Origin, errs = loadOrigin(getenv, errs)
	return c, errors.Join(errs...)
}

func envOr(getenv func(string) string, name, def string) string {
	if v := strings.TrimSpace(getenv(name)); v != "" {
		return v
	}
	return def
}

func loadLog(getenv func(string) string, errs []error) (LogConfig, []error) {
	var l LogConfig
	level := envOr(getenv, "GILF_LOG_LEVEL", DefaultLogLevel)
	if err := l.Level.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("GILF_LOG_LEVEL=%q: want debug, info, warn or error", level))
	}
	l.Format = strings.ToLower(envOr(getenv, "GILF_LOG_FORMAT", DefaultLogFormat))
	if l.Format != "text" && l.Format != "json" {
		errs = append(errs, fmt.Errorf("GILF_LOG_FORMAT=%q: want text or json", l.Format))
	}
	return l, errs
}

func loadValidation(getenv func(string) string, errs []error) (ValidationConfig, []error) {
	v := ValidationConfig{
		Executor:        strings.TrimSpace(getenv("GILF_VALIDATION_EXECUTOR")),
		EnvProvider:     strings.TrimSpace(getenv("GILF_VALIDATION_PROVIDER")),
		CodeChangesOnly: getenv("GILF_VALIDATION_CODE_CHANGES_ONLY") != "false",
	}
	// An unknown executor name is not a startup error: SPEC §4.1 wants
	// the run refused (executor_unknown) and the refusal recorded.
	var err error
	if v.AllowLocal, err = flag01(getenv, "GILF_ALLOW_LOCAL_VALIDATION"); err != nil {
		errs = append(errs, err)
	}
	tier := envOr(getenv, "GILF_LOCAL_MIN_TIER", string(validation.TierNoNetwork))
	switch t := validation.Tier(tier); t {
	case validation.TierReadOnly, validation.TierNoNetwork, validation.TierNone:
		v.LocalMinTier = t
	default:
		errs = append(errs, fmt.Errorf("GILF_LOCAL_MIN_TIER=%q: want read-only, no-network or none", tier))
	}
	if v.StepTimeout, err = millis(getenv, "GILF_VALIDATION_STEP_TIMEOUT_MS"); err != nil {
		errs = append(errs, err)
	}
	if v.InstallTimeout, err = millis(getenv, "GILF_VALIDATION_INSTALL_TIMEOUT_MS"); err != nil {
		errs = append(errs, err)
	}
	v.Install, errs = loadInstall(getenv, errs)
	v.LocalDisk, errs = loadLocalDisk(getenv, errs)
	v.LocalUIDFirst, v.LocalUIDCount, errs = loadUIDRange(getenv, errs)
	return v, errs
}

// flag01 reads an opt-in flag: unset or 0 is off, 1 is on, anything else
// is an error (an operator who wrote "true" should learn it did nothing).
func flag01(getenv func(string) string, name string) (bool, error) {
	switch v := strings.TrimSpace(getenv(name)); v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want 1 to enable or 0 to disable", name, v)
	}
}

// millis reads a duration in milliseconds; unset is zero (the default of
// whoever uses it).
func millis(getenv func(string) string, name string) (time.Duration, error) {
	s := strings.TrimSpace(getenv(name))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of milliseconds", name, s)
	}
	if d := time.Duration(n) * time.Millisecond; n <= int64(MaxTimeout/time.Millisecond) {
		return d, nil
	}
	return 0, fmt.Errorf("%s=%q: over the %s maximum", name, s, MaxTimeout)
}

// Secret is a setting that must never be printed or logged: String,
// GoString, LogValue and MarshalJSON all print [redacted]. Reveal returns
// the value for the one place that uses it.
type Secret struct{ v string }

// NewSecret wraps a value.
func NewSecret(v string) Secret { return Secret{v: v} }

const redacted = "[redacted]"

func (s Secret) String() string                { return redacted }
func (s Secret) GoString() string              { return redacted }
func (s Secret) LogValue() slog.Value          { return slog.StringValue(redacted) }
func (s Secret) MarshalJSON() ([]byte, error)  { return []byte(`"` + redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(redacted), nil }
func (s Secret) Reveal() string                { return s.v }
func (s Secret) IsSet() bool                   { return s.v != "" }
func (s Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, redacted) }

// secretName is validation.LooksSecret: the one rule for names that look
// secret.
func secretName(name string) bool { return validation.LooksSecret(name) }

// urlPassword returns the password of a URL value with credentials in
// it (DATABASE_URL=postgres://user:pass@host/db), or "".
func urlPassword(v string) (string, bool) {
	if !strings.Contains(v, "://") || !strings.Contains(v, "@") {
		return "", false
	}
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil || u.User == nil {
		return "", false
	}
	if p, ok := u.User.Password(); ok && p != "" {
		return p, true
	}
	// A token alone as the user part (https://TOKEN@host).
	if name := u.User.Username(); len(name) >= validation.MinSecretLength {
		return name, true
	}
	return "", false
}

// WorkerSecrets lists the worker's secrets in the environment (NAME=value
// entries, as os.Environ gives them): variables whose names look secret
// and whose values are neither empty nor the path of a file
// (validation.PathToFile), and every variable whose value is a URL
// with credentials (the whole value, and its password alone), sorted by
// name.
func WorkerSecrets(environ []string) []validation.Secret {
	var out []validation.Secret
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || value == "" {
			continue
		}
		pw, inURL := urlPassword(value)
		switch {
		case validation.PathToFile(value):
			// A path (a CA bundle's) says where, not what: no secret.
			continue
		case secretName(name) || name == DatabaseURLEnv:
			// The database URL is withheld whole: a password may sit in
			// its query (?password=), and its hosts are the worker's.
			out = append(out, validation.Secret{Name: name, Value: value})
		case inURL:
			out = append(out, validation.Secret{Name: name, Value: value})
		default:
			continue
		}
		if inURL && pw != value {
			out = append(out, validation.Secret{Name: name + " (its URL's credentials)", Value: pw})
		}
	}
	slices.SortFunc(out, func(a, b validation.Secret) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// MaxNpmrcBytes bounds what is read of one npmrc file.
const MaxNpmrcBytes = 1 << 20

// NpmrcSecrets are the credentials in the worker's npm configuration files
// (the user's ~/.npmrc, NPM_CONFIG_USERCONFIG, and the global npmrc under
// npm's prefixes): the values of _authToken, _auth, _password and
// certfile/keyfile-less auth keys, never ${VAR} references (the variable
// itself is a worker secret already). Unreadable files are skipped.
func NpmrcSecrets(getenv func(string) string) []validation.Secret {
	var files []string
	if p := strings.TrimSpace(getenv("NPM_CONFIG_USERCONFIG")); p != "" {
		files = append(files, p)
	} else if h := strings.TrimSpace(getenv("HOME")); h != "" {
		files = append(files, filepath.Join(h, ".npmrc"))
	}
	files = append(files, "/usr/etc/npmrc", "/usr/local/etc/npmrc", "/etc/npmrc")
	var out []validation.Secret
	for _, f := range files {
		b, err := readBounded(f, MaxNpmrcBytes)
		if err != nil {
			continue // absent or unreadable: nothing of it can leak
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
			lk := strings.ToLower(k)
			if v == "" || strings.HasPrefix(v, "${") || !(strings.HasSuffix(lk, "_authtoken") || strings.HasSuffix(lk, "_auth") || strings.HasSuffix(lk, "_password")) {
				continue
			}
			out = append(out, validation.Secret{Name: "npmrc " + k, Value: v})
			if strings.HasSuffix(lk, "_password") {
				// npm stores _password base64-encoded; the redactor
				// knows base64 forms of the value, not the decoded one.
				if d, err := base64.StdEncoding.DecodeString(v); err == nil && len(d) > 0 {
					out = append(out, validation.Secret{Name: "npmrc " + k + " (decoded)", Value: string(d)})
				}
			}
		}
	}
	return out
}

func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // read-only: a close error loses nothing
	return io.ReadAll(io.LimitReader(f, max))
}

// processEnv is the process environment, read here and nowhere else.
func processEnv() (getenv func(string) string, environ []string) {
	return os.Getenv, os.Environ()
}

// loadLocalDisk reads the local executor's disk ceiling: each a number in
// its range, unset for the default.
func loadLocalDisk(getenv func(string) string, errs []error) (local.DiskLimit, []error) {
	var l local.DiskLimit
	read := func(name string, lo, hi int64) int64 {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Errorf("%s=%q: want a number from %d to %d", name, v, lo, hi))
			return 0
		}
		return n
	}
	l.Bytes = read("GILF_LOCAL_DISK_BYTES", local.MinDiskBytes, local.MaxDiskBytes)
	l.Inodes = read("GILF_LOCAL_DISK_INODES", local.MinDiskInodes, local.MaxDiskInodes)
	return l, errs
}

// loadUIDRange reads GILF_LOCAL_UID_RANGE, "first-last" inclusive: never
// root, at most local.MaxUIDCount ids, below 2^32-1.
func loadUIDRange(getenv func(string) string, errs []error) (first, count uint32, _ []error) {
	v := strings.TrimSpace(getenv("GILF_LOCAL_UID_RANGE"))
	if v == "" {
		return 0, 0, errs
	}
	a, b, ok := strings.Cut(v, "-")
	lo, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	hi, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	switch {
	case !ok || err1 != nil || err2 != nil:
		errs = append(errs, fmt.Errorf("GILF_LOCAL_UID_RANGE=%q: want first-last, e.g. 64000-64999", v))
	case lo == 0 || hi < lo || hi >= 1<<32-1:
		errs = append(errs, fmt.Errorf("GILF_LOCAL_UID_RANGE=%q: want 1 <= first <= last < 4294967295 (root is never a sandbox uid)", v))
	case hi-lo+1 > local.MaxUIDCount:
		errs = append(errs, fmt.Errorf("GILF_LOCAL_UID_RANGE=%q: at most %d uids", v, local.MaxUIDCount))
	default:
		return uint32(lo), uint32(hi - lo + 1), errs
	}
	return 0, 0, errs
}
