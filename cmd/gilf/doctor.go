package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/e2b"
	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/store"
)

// Limits of gilf doctor's checks.
const (
	// DoctorCheckTimeout bounds each check (the local isolation probe
	// starts a real sandbox).
	DoctorCheckTimeout = 60 * time.Second
	// DoctorHTTPTimeout bounds each request: GitHub's GET /app and the
	// reachability of a remote executor.
	DoctorHTTPTimeout = 5 * time.Second
	// DoctorMinFreeBytes and DoctorWarnFreeBytes are the free space
	// under GILF_DATA_DIR below which doctor fails and warns: checkouts,
	// toolchains, evidence and the local executor's run disks live there.
	DoctorMinFreeBytes  = 1 << 30
	DoctorWarnFreeBytes = 10 << 30
)

// checkLevel is how one check ended.
type checkLevel string

const (
	levelOK   checkLevel = "ok"
	levelWarn checkLevel = "warn"
	levelFail checkLevel = "FAIL"
)

// checkLine is one line of the report.
type checkLine struct {
	Level  checkLevel
	Name   string
	Detail string
}

// doctorReport is the report, in the order the checks ran.
type doctorReport struct{ lines []checkLine }

func (r *doctorReport) add(l checkLevel, name, format string, args ...any) {
	r.lines = append(r.lines, checkLine{Level: l, Name: name, Detail: fmt.Sprintf(format, args...)})
}

func (r *doctorReport) failed() int {
	n := 0
	for _, l := range r.lines {
		if l.Level == levelFail {
			n++
		}
	}
	return n
}

func (r *doctorReport) write(w io.Writer) error {
	for _, l := range r.lines {
		if _, err := fmt.Fprintf(w, "%-4s  %-28s  %s\n", l.Level, l.Name, oneLine(l.Detail)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%d checks, %d failed\n", len(r.lines), r.failed())
	return err
}

// oneLine joins a multi-line detail (errors.Join's) with "; ".
func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

const doctorUsage = `usage: gilf doctor

Check the gilf serve configuration of this environment end to end and
print one line per check (ok, warn or FAIL with the reason): the settings,
the GitHub App (GET /app with its key, its permissions and events), the
webhook secret, every configured executor (the local isolation probe, the
self-host and crabbox programs, the remote executors' reachability), the
store (open, migrate, a write rolled back), the free disk space under
GILF_DATA_DIR, and the evidence store.

exit codes: 0 nothing failed (warnings allowed); 1 a check failed; 2 usage.
`

func runDoctor(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet("doctor", doctorUsage, env.Stderr, false)
	if exit, ok := parseNoArgs(fs, args, env.Stderr); !ok {
		return exit
	}
	r := doctor(ctx, env)
	if err := r.write(env.Stdout); err != nil {
		fmt.Fprintf(env.Stderr, "gilf doctor: %v\n", err)
		return exitUsage
	}
	if r.failed() > 0 {
		return exitFailed
	}
	return exitOK
}

// doctor runs every check. A check that cannot run because of an earlier
// problem says so and fails; the others still run.
func doctor(ctx context.Context, env Env) *doctorReport {
	r := &doctorReport{}
	cfg, err := Load(env.Getenv)
	sc, errs := loadServe(env.Getenv, []error{err})
	if err := errors.Join(errs...); err != nil {
		r.add(levelFail, "config", "%v", err)
	} else {
		r.add(levelOK, "config", "every setting is valid")
	}
	if errs := unknownEnv(env.Environ); len(errs) > 0 {
		r.add(levelFail, "environment", "%v", errors.Join(errs...))
	} else {
		r.add(levelOK, "environment", "no unknown GILF_* variable")
	}
	// Logs of the checks (the local probe's reasons) go to stderr.
	log := newLogger(env.Stderr, LogConfig{Level: slog.LevelWarn, Format: cfg.Log.Format})

	app, appErr := sc.App(readKeyFile)
	doctorGitHub(ctx, r, sc, app, appErr, log)
	switch err := checkWebhookSecret(sc.GitHub.WebhookSecret); {
	case !sc.GitHub.WebhookSecret.IsSet():
		r.add(levelFail, "webhook secret", "GILF_WEBHOOK_SECRET is not set: deliveries cannot be verified")
	case err != nil:
		r.add(levelFail, "webhook secret", "%v", err)
	default:
		r.add(levelOK, "webhook secret", "%d bytes", len(sc.GitHub.WebhookSecret.Reveal()))
	}
	doctorExecutors(ctx, r, cfg, sc, env, log)
	doctorStore(ctx, r, cfg, log)
	doctorDisk(r, cfg.DataDir)
	doctorEvidence(ctx, r, cfg, log)
	return r
}

// requiredPermissions are the App permissions gilf needs
// (docs/github-app.md): checks and pull requests to post, contents to read the
// tarball and .github/gilf.yml, metadata which every App has.
func requiredPermissions() map[string]string {
	return map[string]string{"checks": "write", "pull_requests": "write", "contents": "read", "metadata": "read"}
}

// permissionRank orders GitHub's permission levels.
func permissionRank(level string) int {
	switch level {
	case "read":
		return 1
	case "write":
		return 2
	case "admin":
		return 3
	}
	return 0
}

func doctorGitHub(ctx context.Context, r *doctorReport, sc ServeConfig, a AppCredentials, appErr error, log *slog.Logger) {
	const name = "github app"
	if a.AppID == 0 || a.PrivateKey == nil {
		r.add(levelFail, name, "cannot authenticate: %v", appErr)
		return
	}
	c, err := github.New(github.Config{
		AppID: a.AppID, PrivateKey: a.PrivateKey, BaseURL: sc.GitHub.APIURL, Logger: log,
		RequestTimeout: DoctorHTTPTimeout, Retry: github.Retry{Attempts: 1},
	})
	if err != nil {
		r.add(levelFail, name, "%v", err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, DoctorCheckTimeout)
	defer cancel()
	got, err := c.App(cctx)
	switch {
	case github.Unauthorized(err):
		r.add(levelFail, name, "GitHub refused the App JWT (401) at %s: the private key is not the key of App %d, or GILF_GITHUB_APP_ID is wrong", sc.GitHub.APIURL, a.AppID)
		return
	case github.NotFound(err):
		r.add(levelFail, name, "GET /app answered 404 at %s: is GILF_GITHUB_API_URL the REST API root?", sc.GitHub.APIURL)
		return
	case err != nil:
		r.add(levelFail, name, "GET /app at %s: %v", sc.GitHub.APIURL, err)
		return
	case got.ID != a.AppID:
		r.add(levelFail, name, "GET /app describes App %d, not GILF_GITHUB_APP_ID %d", got.ID, a.AppID)
		return
	}
	r.add(levelOK, name, "App %s (id %d) at %s", got.Slug, got.ID, sc.GitHub.APIURL)

	var missing, extra []string
	req := requiredPermissions()
	for _, p := range sortedKeys(req) {
		if permissionRank(got.Permissions[p]) < permissionRank(req[p]) {
			missing = append(missing, fmt.Sprintf("%s: %s (has %s)", p, req[p], orNone(got.Permissions[p])))
		}
	}
	for _, p := range sortedKeys(got.Permissions) {
		if w, ok := req[p]; !ok || permissionRank(got.Permissions[p]) > permissionRank(w) {
			extra = append(extra, p+": "+got.Permissions[p])
		}
	}
	switch {
	case len(missing) > 0:
		r.add(levelFail, "github permissions", "the App lacks %s", strings.Join(missing, ", "))
	case len(extra) > 0:
		r.add(levelWarn, "github permissions", "the App has more than gilf needs: %s", strings.Join(extra, ", "))
	default:
		r.add(levelOK, "github permissions", "checks: write, pull_requests: write, contents: read, metadata: read")
	}
	var lacks []string
	for _, e := range []string{"check_run", "check_suite"} {
		if !slices.Contains(got.Events, e) {
			lacks = append(lacks, e)
		}
	}
	switch {
	case !slices.Contains(got.Events, "pull_request"):
		r.add(levelFail, "github events", "the App is not subscribed to pull_request: no pull request would be reviewed")
	case len(lacks) > 0:
		r.add(levelWarn, "github events", "the App is not subscribed to %s: GitHub's Re-run button does nothing", strings.Join(lacks, ", "))
	case !slices.Contains(got.Events, "issue_comment"):
		r.add(levelWarn, "github events", "the App is not subscribed to issue_comment: commands in pull-request comments (/gilf rerun) never arrive")
	default:
		r.add(levelOK, "github events", "pull_request, check_run, check_suite, issue_comment")
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func doctorExecutors(ctx context.Context, r *doctorReport, cfg Config, sc ServeConfig, env Env, log *slog.Logger) {
	if err := checkDefaultExecutor(cfg.Validation, sc); err != nil {
		r.add(levelFail, "default executor", "%v", err)
	} else {
		c := cfg.Validation.Selection().Resolve()
		r.add(levelOK, "default executor", "%s (chosen by %s)", c.Name, c.Source)
	}
	if len(configuredExecutors(cfg.Validation, sc)) == 0 {
		return
	}
	secrets := append(WorkerSecrets(env.Environ), NpmrcSecrets(env.Getenv)...)
	set, err := buildExecutors(cfg, sc, env.Environ, secrets, log)
	if err != nil {
		r.add(levelFail, "executors", "%v", err)
		return
	}
	for _, e := range set {
		name := "executor " + e.Name()
		switch e.Name() {
		case executors.NameLocal:
			l, ok := e.(*local.Executor)
			if !ok {
				r.add(levelFail, name, "not the local executor gilf builds")
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, DoctorCheckTimeout)
			tier, err := l.Tier(cctx)
			cancel()
			if err != nil {
				r.add(levelFail, name, "isolation probe: %v", err)
				continue
			}
			r.add(levelOK, name, "isolation tier %s (at least %s required)", tier, cfg.Validation.LocalMinTier)
		case executors.NameSelfHost:
			prog := strings.Fields(sc.SelfHost.Command)[0]
			if err := checkProgram(prog, env.Getenv("PATH")); err != nil {
				r.add(levelFail, name, "GILF_SELF_HOST_COMMAND: %v", err)
				continue
			}
			r.add(levelOK, name, "%s is executable", prog)
		case executors.NameManagedCrabbox:
			if err := checkProgram(sc.Crabbox.Bin, env.Getenv("PATH")); err != nil {
				r.add(levelFail, name, "GILF_CRABBOX_BIN: %v", err)
				continue
			}
			reachable(ctx, r, name, sc.Crabbox.Coordinator)
		case executors.NameManagedE2B:
			u := sc.E2B.APIURL
			if u == "" {
				u = e2b.DefaultAPIURL
			}
			reachable(ctx, r, name, u)
		case executors.NameManagedCFSandbox:
			reachable(ctx, r, name, sc.CFSandbox.URL)
		default:
			r.add(levelWarn, name, "no check for this executor")
		}
	}
}

// reachable checks that a remote executor's base URL answers HTTP at
// all (any status: the root of an API may well be 401 or 404).
func reachable(ctx context.Context, r *doctorReport, name, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.add(levelFail, name, "%q is not an http(s) URL", raw)
		return
	}
	shown := u.Redacted()
	cctx, cancel := context.WithTimeout(ctx, DoctorHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, u.String(), nil)
	if err != nil {
		r.add(levelFail, name, "%s: %v", shown, err)
		return
	}
	resp, err := (&http.Client{Timeout: DoctorHTTPTimeout}).Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is shown once, redacted
		}
		r.add(levelFail, name, "%s is not reachable: %v", shown, err)
		return
	}
	if err := resp.Body.Close(); err != nil {
		r.add(levelWarn, name, "%s answered HTTP %d; closing the answer: %v", shown, resp.StatusCode, err)
		return
	}
	r.add(levelOK, name, "%s is reachable (HTTP %d)", shown, resp.StatusCode)
}

func doctorStore(ctx context.Context, r *doctorReport, cfg Config, log *slog.Logger) {
	const name = "store"
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		r.add(levelFail, name, "GILF_DATA_DIR: %v", err)
		return
	}
	path := storeWhere(cfg)
	cctx, cancel := context.WithTimeout(ctx, DoctorCheckTimeout)
	defer cancel()
	db, err := openStore(cctx, cfg, log, store.Options{}, false)
	if err != nil {
		r.add(levelFail, name, "%v", err)
		return
	}
	err = db.ProbeWrite(cctx)
	if cerr := db.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		r.add(levelFail, name, "%s: %v", path, err)
		return
	}
	r.add(levelOK, name, "%s is migrated and takes writes", path)
}

func doctorDisk(r *doctorReport, dir string) {
	const name = "disk"
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		r.add(levelFail, name, "statfs %s: %v", dir, err)
		return
	}
	free := st.Bavail * uint64(st.Bsize)
	gib := float64(free) / (1 << 30)
	switch {
	case free < DoctorMinFreeBytes:
		r.add(levelFail, name, "%.1f GiB free under %s: want at least %d GiB", gib, dir, DoctorMinFreeBytes>>30)
	case free < DoctorWarnFreeBytes:
		r.add(levelWarn, name, "%.1f GiB free under %s: under %d GiB, a few checkouts and run disks fill it", gib, dir, DoctorWarnFreeBytes>>30)
	default:
		r.add(levelOK, name, "%.1f GiB free under %s", gib, dir)
	}
}

// evidenceProber is the evidence stores' Probe.
type evidenceProber interface {
	Probe(ctx context.Context) error
}

func doctorEvidence(ctx context.Context, r *doctorReport, cfg Config, log *slog.Logger) {
	const name = "evidence"
	if !cfg.Evidence.Options.Enabled {
		r.add(levelOK, name, "artifacts are off (GILF_EVIDENCE_ARTIFACTS): nothing is stored")
		return
	}
	cctx, cancel := context.WithTimeout(ctx, DoctorCheckTimeout)
	defer cancel()
	s, closeStore, err := openEvidenceStore(cctx, cfg.Evidence, cfg.DataDir, log)
	if err != nil {
		r.add(levelFail, name, "%v", err)
		return
	}
	where, proves := "directory "+filepath.Join(cfg.DataDir, "evidence"), "takes writes (a probe file written and removed)"
	if cfg.Evidence.S3Bucket != "" {
		where, proves = "bucket "+cfg.Evidence.S3Bucket, "answers with these credentials (HeadBucket; nothing written)"
	}
	p, ok := s.(evidenceProber)
	if !ok {
		err = errors.New("the store has no probe")
	} else {
		err = p.Probe(cctx)
	}
	if cerr := closeStore(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		r.add(levelFail, name, "%s: %v", where, err)
		return
	}
	r.add(levelOK, name, "%s %s", where, proves)
}
