package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/cfsandbox"
	"github.com/gilf-review/gilf/executors/crabbox"
	"github.com/gilf-review/gilf/executors/e2b"
	"github.com/gilf-review/gilf/executors/local"
	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/executors/selfhost"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// Serve lifecycle limits.
const (
	// ShutdownTimeout bounds how long intake waits for in-flight
	// deliveries after SIGTERM before closing their connections.
	ShutdownTimeout = 10 * time.Second
	// DBFileName is the SQLite file under GILF_DATA_DIR.
	DBFileName = "gilf.db"
	// WorkDirName holds the per-job checkouts under GILF_DATA_DIR.
	WorkDirName = "work"
)

const serveUsage = `usage: gilf serve

Run the webhook intake (POST /webhook), the review workers, /healthz,
/readyz and /metrics until SIGTERM or SIGINT (then /readyz answers 503 and
intake refuses deliveries while running jobs finish). Every setting comes
from the GILF_* environment (see docs/configuration.md); there are
no flags.

exit codes: 0 stopped by a signal after a clean shutdown; 2 configuration
or infrastructure error.
`

func runServe(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet("serve", serveUsage, env.Stderr, false)
	if exit, ok := parseNoArgs(fs, args, env.Stderr); !ok {
		return exit
	}
	cfg, sc, app, err := loadServeConfig(env.Getenv, env.Environ)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf serve: configuration:\n%v\n", err)
		return exitUsage
	}
	log := newLogger(env.Stderr, cfg.Log)
	if err := serve(ctx, env, cfg, sc, app, log); err != nil {
		log.Error("gilf serve stopped", logkey.Err, err)
		return exitUsage
	}
	return exitOK
}

// loadServeConfig reads and checks everything serve needs, reporting
// every problem at once. environ is the whole environment, for the GILF_*
// variables gilf does not read.
func loadServeConfig(getenv func(string) string, environ []string) (Config, ServeConfig, AppCredentials, error) {
	cfg, err := Load(getenv)
	errs := []error{err}
	sc, errs := loadServe(getenv, errs)
	sc.Dashboard, err = loadDashboard(getenv)
	errs = append(errs, err)
	app, err := sc.App(readKeyFile)
	errs = append(errs, err)
	errs = append(errs, checkServeSetup(cfg, sc, getenv, environ)...)
	return cfg, sc, app, errors.Join(errs...)
}

// readKeyFile reads a PEM key file, at most MaxPrivateKeyBytes+1 bytes
// (App reports a larger file).
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxPrivateKeyBytes+1))
}

// serve runs until ctx is done: then intake stops taking deliveries,
// running jobs finish or release their leases, and the store closes last
// (Main.Close).
func serve(ctx context.Context, env Env, cfg Config, sc ServeConfig, app AppCredentials, log *slog.Logger) (err error) {
	m, err := NewMain(ctx, env, cfg, sc, app, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	return m.Run(ctx)
}

// Main is one `gilf serve` process: what NewMain built from the
// configuration, Run runs until its context is done, and Close drains and
// releases in the reverse order of opening: intake refuses deliveries, the
// workers finish or release their leases, the HTTP server stops, then the
// evidence store and the store close, last.
type Main struct {
	cfg Config
	sc  ServeConfig
	log *slog.Logger

	db            *store.DB     // opened first, closed last
	closeEvidence func() error  // the evidence store, opened after the executors
	set           executors.Set // the executors this process has configuration for
	metrics       *serveMetrics
	owner         string // this process as a lease owner

	// Intake: the readiness gate before the webhook handler, the
	// server and the listener it serves (nil once Run took it).
	ready    *readiness
	server   *http.Server
	listener net.Listener

	// The workers: review jobs off the queue (woken through wake by this
	// intake and by other replicas'), and the background loops each
	// present only when configured.
	queue    *storeQueue
	wake     chan struct{}
	worker   *review.Worker
	commands *review.CommandWorker // GILF_COMMANDS
	sweeper  *sweeper              // GILF_REDELIVERY_SWEEP_MS
	pruner   *pruner               // GILF_JOB_RETENTION

	// Set by Run: the goroutines it started, how to stop them, and the
	// workers' end (the HTTP server stops only after it).
	group       *errgroup.Group
	stop        context.CancelFunc
	workersDone chan struct{}
}

// NewMain opens the store, the executors, the GitHub client and the
// evidence store, builds intake and the workers and listens on
// GILF_ADDR. On an error it closes what it had opened.
func NewMain(ctx context.Context, env Env, cfg Config, sc ServeConfig, app AppCredentials, log *slog.Logger) (_ *Main, err error) {
	m := &Main{cfg: cfg, sc: sc, log: log, wake: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.Close())
		}
	}()
	if err := m.openStore(ctx); err != nil {
		return nil, err
	}
	secrets := serveSecrets(env, sc, app)
	if m.set, err = buildExecutors(cfg, sc, env.Environ, secrets, log); err != nil {
		return nil, err
	}
	m.metrics = newServeMetrics(m.db)
	m.metrics.registerCache(installCache(m.set))
	gc, err := github.New(github.Config{
		AppID: app.AppID, PrivateKey: app.PrivateKey, BaseURL: sc.GitHub.APIURL,
		DownloadHosts: sc.GitHub.DownloadHosts, Logger: log, RateLimitRemaining: m.metrics.jobs.rateRemaining.set,
	})
	if err != nil {
		return nil, fmt.Errorf("github client: %w", err)
	}
	ev, closeEvidence, err := openEvidenceStore(ctx, cfg.Evidence, cfg.DataDir, log)
	if err != nil {
		return nil, err
	}
	m.closeEvidence = closeEvidence
	hook, err := m.buildIntake(ctx, app, gc)
	if err != nil {
		return nil, err
	}
	if err := m.buildWorkers(gc, ev, secrets); err != nil {
		return nil, err
	}
	if err := m.listen(ctx, hook, ev); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m.set))
	for _, e := range m.set {
		names = append(names, e.Name())
	}
	log.Info("listening", "addr", m.listener.Addr().String(), "worker", m.owner, "workers", sc.Workers,
		"executors", names, "data_dir", cfg.DataDir, "store", storeWhere(cfg))
	return m, nil
}

// openStore makes the work directory, removes the checkouts a killed
// process left there, and opens the store.
func (m *Main) openStore(ctx context.Context) error {
	work := filepath.Join(m.cfg.DataDir, WorkDirName)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	sweepLeftovers(m.log, work, "job-")
	db, err := openStore(ctx, m.cfg, m.log, m.cfg.Jobs.StoreOptions(), false)
	if err != nil {
		return err
	}
	m.db = db
	return nil
}

// serveSecrets are the values withheld from sandboxes and redacted from
// output: the worker's environment secrets, .npmrc tokens, and the App's
// key when read from a file.
func serveSecrets(env Env, sc ServeConfig, app AppCredentials) []validation.Secret {
	secrets := append(WorkerSecrets(env.Environ), NpmrcSecrets(env.Getenv)...)
	if sc.GitHub.PrivateKeyPath != "" {
		// The key read from a file is a secret like those of the
		// environment: withheld from sandboxes and redacted from output.
		secrets = append(secrets, validation.Secret{Name: "GILF_GITHUB_PRIVATE_KEY_PATH contents", Value: app.KeyPEM})
	}
	return secrets
}

// buildIntake builds the queue the workers claim from and the webhook
// handler behind the readiness gate, which records deliveries and wakes
// an idle worker.
func (m *Main) buildIntake(ctx context.Context, app AppCredentials, gc *github.Client) (http.Handler, error) {
	storeID, err := m.db.StoreID(ctx)
	if err != nil {
		return nil, err
	}
	m.queue = newStoreQueue(m.db, m.log, m.metrics)
	m.queue.store = storeID
	m.queue.finish = githubPublisher{c: gc, posted: m.db}
	m.queue.details = m.sc.Dashboard.DetailsURL
	m.ready = newReadiness(m.db, m.cfg.DataDir, m.sc.MinFreeBytes, m.log)
	sc := m.sc
	hook, err := webhook.New(m.ready.intake(wakingInbox{db: m.db, wake: m.wake, metrics: m.metrics, store: storeID}), m.log,
		webhook.Config{Secret: app.WebhookSecret, AppID: app.AppID, Allow: sc.Allow,
			BadSignatureLimit: badSignatureLimit(sc.BadSignatureLimit), TrustedProxies: sc.TrustedProxies,
			Commands: m.cfg.Commands.Enabled, AppSlug: m.cfg.Commands.Slug,
			Rejected: m.metrics.more.reject})
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return hook, nil
}

// buildWorkers builds the review workers over the pipeline, and the
// command worker, redelivery sweeper and pruner when configured.
func (m *Main) buildWorkers(gc *github.Client, ev evidence.Store, secrets []validation.Secret) error {
	cfg, sc := m.cfg, m.sc
	owner, err := workerOwner()
	if err != nil {
		return err
	}
	m.owner = owner
	pipeline, err := newPipeline(cfg, sc, m.set, gc, m.db, ev, secrets, m.metrics, m.log)
	if err != nil {
		return err
	}
	m.worker, err = review.NewWorker(review.Worker{
		Queue:       m.queue,
		Runner:      pipeline,
		Owner:       owner,
		Concurrency: sc.Workers,
		Lease:       sc.JobLease,
		Logger:      m.log,
		Wake:        m.wake,
	})
	if err != nil {
		return err
	}
	if cfg.Commands.Enabled {
		m.commands, err = review.NewCommandWorker(review.CommandWorker{
			Queue: storeCommands{db: m.db, owner: owner}, Runs: storeCommands{db: m.db, owner: owner},
			GitHub: githubCommands{c: gc}, PRs: githubPRs{c: gc},
			Slug: cfg.Commands.Slug, RunsPerHour: cfg.Commands.RunsPerHour, Logger: m.log,
			Secrets: secrets, Internals: internalPaths(cfg.DataDir),
		})
		if err != nil {
			return err
		}
	}
	if sc.RedeliverySweep > 0 {
		m.sweeper = newSweeper(gc, m.db, m.log, time.Now)
		m.sweeper.exclusive = m.db.Exclusive // one replica sweeps at a time
	}
	if keep := cfg.Jobs.Retention(); keep > 0 {
		m.pruner = newPruner(m.db, m.log, time.Now, keep)
		m.pruner.exclusive = m.db.Exclusive
	}
	return nil
}

// listen builds the HTTP server (intake, health, metrics, the dashboard
// when configured) and listens on GILF_ADDR.
func (m *Main) listen(ctx context.Context, hook http.Handler, ev evidence.Store) error {
	var dash http.Handler
	if m.sc.Dashboard.Enabled() {
		var err error
		if dash, err = newDashboard(m.sc.Dashboard, m.sc.TrustedProxies, m.db, ev, m.log); err != nil {
			return err
		}
	}
	m.server = &http.Server{
		Handler:           routes(m.metrics.more.timeWebhook(hook, time.Now), m.ready, m.metrics, m.log, dash),
		ReadHeaderTimeout: webhook.ReadHeaderTimeout,
		ReadTimeout:       webhook.ReadTimeout,
		WriteTimeout:      webhook.WriteTimeout,
		IdleTimeout:       webhook.IdleTimeout,
		MaxHeaderBytes:    webhook.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", m.sc.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", m.sc.Addr, err)
	}
	m.listener = ln
	return nil
}

// Run serves and works until ctx is done or one of its goroutines failed;
// Close then drains them and reports their error. Run is called once.
func (m *Main) Run(ctx context.Context) error {
	ln := m.listener
	m.listener = nil // the server closes it from here on
	ctx, m.stop = context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(ctx)
	m.group = g
	g.Go(func() error {
		if err := m.server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	m.workersDone = make(chan struct{})
	g.Go(func() error {
		defer close(m.workersDone)
		err := m.worker.Run(gctx)
		m.queue.Close() // shadow lanes still running are stopped and recorded
		m.log.Info("workers stopped")
		return err
	})
	if m.commands != nil {
		g.Go(func() error { return m.commands.Run(gctx) })
	}
	// Another replica's intake queued a job: wake an idle worker here
	// (PostgreSQL's LISTEN/NOTIFY; a no-op on SQLite).
	g.Go(func() error { return m.db.Listen(gctx, m.wake) })
	if m.sweeper != nil {
		g.Go(func() error { return m.sweeper.runEvery(gctx, m.sc.RedeliverySweep) })
	}
	if m.pruner != nil {
		g.Go(func() error { return m.pruner.runEvery(gctx, PruneInterval) })
	}
	<-gctx.Done()
	return nil
}

// drain stops what Run started: intake refuses deliveries and /readyz
// answers 503 while the workers finish; /healthz and /metrics keep
// answering until the workers stopped; then the HTTP server shuts down
// within ShutdownTimeout. It returns the first error of Run's goroutines.
func (m *Main) drain() error {
	m.stop()
	m.ready.drain()
	m.log.Info("intake stopped")
	<-m.workersDone
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := m.server.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("stop http server: %w", errors.Join(err, m.server.Close())))
	} else {
		m.log.Info("http server stopped")
	}
	err := m.group.Wait()
	m.log.Info("intake and workers stopped; closing the store", logkey.Err, err)
	return errors.Join(append(errs, err)...)
}

// Close drains what Run started, then releases what NewMain opened, in
// reverse order: the listener if Run never took it, the evidence store,
// the store last.
func (m *Main) Close() error {
	var errs []error
	if m.group != nil {
		errs = append(errs, m.drain())
		m.group = nil
	}
	if m.listener != nil {
		errs = append(errs, m.listener.Close())
		m.listener = nil
	}
	if m.closeEvidence != nil {
		if err := m.closeEvidence(); err != nil {
			errs = append(errs, fmt.Errorf("close evidence store: %w", err))
		}
		m.closeEvidence = nil
	}
	if m.db != nil {
		errs = append(errs, m.db.Close())
		m.db = nil
	}
	return errors.Join(errs...)
}

// workerOwner names this process as a lease owner: host, pid and a
// random suffix, so a restarted process with a reused pid is another
// owner.
func workerOwner() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("worker id: %w", err)
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b)), nil
}

// buildExecutors is the explicit list of executors this process has
// configuration for: local only when GILF_ALLOW_LOCAL_VALIDATION=1, each
// remote one only when its settings are present. An executor left out is
// refused by Select (executor_unconfigured), never replaced.
func buildExecutors(cfg Config, sc ServeConfig, environ []string, secrets []validation.Secret, log *slog.Logger) (executors.Set, error) {
	var set executors.Set
	var errs []error
	// The install step's allow-list: the registries the worker's package
	// managers name, and GILF_INSTALL_ALLOW_HOSTS. Asked only when an
	// executor that enforces it is configured.
	var reg WorkerRegistries
	var rules []egress.Rule
	if cfg.Validation.AllowLocal || sc.E2B.Configured() {
		reg = probeRegistries(context.Background(), execRunner(environ))
		rules = installRules(reg, cfg.Validation.Install)
		logRegistries(log, rules, reg)
	}
	if cfg.Validation.AllowLocal {
		e, err := buildLocal(cfg, reg, rules, log)
		if err != nil {
			errs = append(errs, err)
		} else {
			set = append(set, e)
		}
	}
	remote, err := buildRemotes(sc, environ, secrets, rules, log)
	set = append(set, remote...)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, fmt.Errorf("executors: %w", err)
	}
	return set, nil
}

// buildLocal builds the local executor, its toolchain and its egress,
// and removes what a killed worker left: run directories, their disks,
// cgroups, never a live run of another process.
func buildLocal(cfg Config, reg WorkerRegistries, rules []egress.Rule, log *slog.Logger) (*local.Executor, error) {
	var errs []error
	tools, err := buildToolchain(cfg.Validation.Sandbox, reg, log)
	if err != nil {
		errs = append(errs, err)
	}
	eg, err := buildEgress(cfg, rules, reg, log)
	if err != nil {
		errs = append(errs, err)
	}
	warm, err := warmDisks(cfg)
	if err != nil {
		errs = append(errs, err)
	}
	e, err := local.New(log, local.Options{
		Tools:   tools,
		MinTier: cfg.Validation.LocalMinTier,
		Egress:  eg,
		Warm:    warm,
		Disk:    cfg.Validation.LocalDisk,
		// The range's gids are the same numbers.
		SandboxUID: cfg.Validation.LocalUIDFirst, SandboxGID: cfg.Validation.LocalUIDFirst,
		UIDCount: cfg.Validation.LocalUIDCount,
		CAFile:   cfg.Validation.Sandbox.CAFile,
		Env:      cfg.Validation.Sandbox.sandboxEnv(),
	})
	if err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("local executor: %w", err))...)
	}
	if n, serr := e.Sweep(context.Background()); serr != nil {
		log.Error("sweep local runs left by dead workers", logkey.Err, serr)
	} else if n > 0 {
		log.Warn("removed local runs left by dead workers", logkey.Count, n)
	}
	return e, errors.Join(errs...)
}

// buildRemotes builds each remote executor whose settings are present,
// reporting every one that fails.
func buildRemotes(sc ServeConfig, environ []string, secrets []validation.Secret, rules []egress.Rule, log *slog.Logger) (executors.Set, error) {
	var set executors.Set
	var errs []error
	add := func(e executors.Executor, err error) {
		if err != nil {
			errs = append(errs, err)
		} else {
			set = append(set, e)
		}
	}
	if sc.SelfHost.Command != "" {
		add(selfhost.New(selfhost.Options{
			Command: sc.SelfHost.Command, Network: sc.SelfHost.Network, Timeout: sc.SelfHost.Timeout,
			Env: environ, Secrets: secrets, Resources: sc.SelfHost.Resources,
		}))
	}
	if sc.Crabbox.Configured() {
		add(crabbox.New(crabbox.Options{
			Bin: sc.Crabbox.Bin, Coordinator: sc.Crabbox.Coordinator, Token: sc.Crabbox.Token.Reveal(),
			Env: environ, Secrets: secrets,
		}))
	}
	if sc.E2B.Configured() {
		add(e2b.New(e2b.Options{
			APIKey: sc.E2B.APIKey.Reveal(), Template: sc.E2B.Template, TimeoutMs: sc.E2B.Timeout.Milliseconds(),
			APIURL: sc.E2B.APIURL, EnvdURL: sc.E2B.EnvdURL, CPU: sc.E2B.CPU, MemoryMB: sc.E2B.MemoryMB,
			AllowOut: sc.E2B.AllowOut, RegistryHosts: remoteHosts(rules), Secrets: secrets, Logger: log.With(logkey.Executor, executors.NameManagedE2B),
		}))
	}
	if sc.CFSandbox.Configured() {
		add(cfsandbox.New(cfsandbox.Options{
			Enabled: true, URL: sc.CFSandbox.URL, Token: sc.CFSandbox.Token.Reveal(), Timeout: sc.CFSandbox.Timeout,
			Secrets: secrets, Logger: log.With(logkey.Executor, executors.NameManagedCFSandbox),
		}))
	}
	return set, errors.Join(errs...)
}

// internalPaths are the worker's paths withheld from what is posted: the
// data directory, as an absolute path (a relative one would match words).
func internalPaths(dataDir string) []string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil
	}
	return []string{abs}
}

// newPipeline wires the review pipeline: GitHub through the client, the
// executor set, the shadow lane when configured (the managed-e2b shadow
// behind the monthly budget guard), and the cost and evidence stages.
func newPipeline(cfg Config, sc ServeConfig, set executors.Set, gc *github.Client, db *store.DB,
	ev evidence.Store, secrets []validation.Secret, metrics *serveMetrics, log *slog.Logger) (*review.Pipeline, error) {
	worker := review.ValidationConfig{Provider: cfg.Validation.EnvProvider}
	if !cfg.Validation.CodeChangesOnly {
		off := false
		worker.CodeChangesOnly = &off
	}
	stages, err := review.NewStages(review.Stages{Evidence: cfg.Evidence.Options, EvidenceStore: ev, Cards: cfg.Costs.Cards, Logger: log, Secrets: secrets})
	if err != nil {
		return nil, err
	}
	p := review.Pipeline{
		PRs:                             githubPRs{c: gc},
		Checkouts:                       githubPRs{c: gc},
		Publisher:                       githubPublisher{c: gc, posted: db},
		Conversation:                    githubConversation{c: gc, botLogin: botLogin(cfg.Commands.Slug)},
		History:                         githubConversation{c: gc, botLogin: botLogin(cfg.Commands.Slug)},
		Executors:                       set,
		Selection:                       cfg.Validation.Selection(),
		Worker:                          worker,
		PlanOptions:                     cfg.Validation.PlanOptions(),
		Secrets:                         secrets,
		WorkDir:                         filepath.Join(cfg.DataDir, WorkDirName),
		Drafts:                          sc.ReviewDrafts,
		Hooks:                           stages,
		Logger:                          log,
		Internals:                       internalPaths(cfg.DataDir),
		DetailsURL:                      func(j review.Job) string { return sc.Dashboard.DetailsURL(j.ID) },
		SkipSemanticOnValidationFailure: cfg.Semantic.SkipOnValidationFailure,
		OperatorErrors: func(c validation.Code) {
			metrics.operator.WithLabelValues(string(c)).Inc()
		},
		BaseResults:      baseResults{db: db},
		NoBaseComparison: !cfg.Origin.BaseComparison,
	}
	// Checked when the configuration was loaded.
	if r, err := cfg.Semantic.reviewer(); err == nil && r != nil {
		p.Reviewer = r
		log.Info("semantic review on", "model", cfg.Semantic.Model)
	}
	if sc.Shadow.Executor != "" {
		guard := costs.BudgetGuard{CeilingUSD: cfg.Costs.E2BBudgetUSD, Reader: db, Logger: log}
		p.Lanes = review.ShadowLanes{Shadow: &executors.Shadow{
			Selection: sc.Shadow.Executor, Set: set, Timeout: sc.Shadow.Timeout, Logger: log,
			Gate: func(ctx context.Context, name string) (bool, string) {
				d := guard.Shadow(ctx, name)
				return !d.Withheld, d.Reason
			},
		}}
	}
	return review.NewPipeline(p)
}

// badSignatureLimit maps GILF_BAD_SIGNATURE_LIMIT (0 is off) onto
// webhook.Config's (0 is the default, negative is off).
func badSignatureLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
