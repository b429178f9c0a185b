package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
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
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() { fmt.Fprint(env.Stderr, serveUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "gilf serve: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	cfg, sc, app, err := loadServeConfig(env.Getenv, env.Environ)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf serve: configuration:\n%v\n", err)
		return exitUsage
	}
	log := newLogger(env.Stderr, cfg.Log)
	if err := serve(ctx, env, cfg, sc, app, log); err != nil {
		log.Error("gilf serve stopped", "err", err)
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
// running jobs finish or release their leases, and the store closes last.
func serve(ctx context.Context, env Env, cfg Config, sc ServeConfig, app AppCredentials, log *slog.Logger) (err error) {
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, WorkDirName), 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	sweepLeftovers(log, filepath.Join(cfg.DataDir, WorkDirName), "job-")
	db, err := openStore(ctx, cfg, log, cfg.Jobs.StoreOptions(), false)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	secrets := append(WorkerSecrets(env.Environ), NpmrcSecrets(env.Getenv)...)
	if sc.GitHub.PrivateKeyPath != "" {
		// The key read from a file is a secret like those of the
		// environment: withheld from sandboxes and redacted from output.
		secrets = append(secrets, validation.Secret{Name: "GILF_GITHUB_PRIVATE_KEY_PATH contents", Value: app.KeyPEM})
	}
	set, err := buildExecutors(cfg, sc, env.Environ, secrets, log)
	if err != nil {
		return err
	}
	metrics := newServeMetrics(db)
	metrics.registerCache(installCache(set))
	gc, err := github.New(github.Config{
		AppID: app.AppID, PrivateKey: app.PrivateKey, BaseURL: sc.GitHub.APIURL,
		DownloadHosts: sc.GitHub.DownloadHosts, Logger: log, RateLimitRemaining: metrics.jobs.rateRemaining.set,
	})
	if err != nil {
		return fmt.Errorf("github client: %w", err)
	}
	evStore, closeEvidence, err := openEvidenceStore(ctx, cfg.Evidence, cfg.DataDir, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeEvidence(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close evidence store: %w", cerr))
		}
	}()
	storeID, err := db.StoreID(ctx)
	if err != nil {
		return err
	}
	queue := newStoreQueue(db, log, metrics)
	queue.store = storeID
	queue.finish = githubPublisher{c: gc, posted: db}
	queue.details = sc.Dashboard.DetailsURL
	wake := make(chan struct{}, 1)
	ready := newReadiness(db, cfg.DataDir, sc.MinFreeBytes, log)
	hook, err := webhook.New(ready.intake(wakingInbox{db: db, wake: wake, metrics: metrics, store: storeID}), log,
		webhook.Config{Secret: app.WebhookSecret, AppID: app.AppID, Allow: sc.Allow,
			BadSignatureLimit: badSignatureLimit(sc.BadSignatureLimit), TrustedProxies: sc.TrustedProxies,
			Commands: cfg.Commands.Enabled, AppSlug: cfg.Commands.Slug,
			Rejected: metrics.more.reject})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	owner, err := workerOwner()
	if err != nil {
		return err
	}
	pipeline, err := newPipeline(cfg, sc, set, gc, db, evStore, secrets, metrics, log)
	if err != nil {
		return err
	}
	worker, err := review.NewWorker(review.Worker{
		Queue:       queue,
		Runner:      pipeline,
		Owner:       owner,
		Concurrency: sc.Workers,
		Lease:       sc.JobLease,
		Logger:      log,
		Wake:        wake,
	})
	if err != nil {
		return err
	}
	var dash http.Handler
	if sc.Dashboard.Enabled() {
		if dash, err = newDashboard(sc.Dashboard, sc.TrustedProxies, db, evStore, log); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           routes(metrics.more.timeWebhook(hook, time.Now), ready, metrics, log, dash),
		ReadHeaderTimeout: webhook.ReadHeaderTimeout,
		ReadTimeout:       webhook.ReadTimeout,
		WriteTimeout:      webhook.WriteTimeout,
		IdleTimeout:       webhook.IdleTimeout,
		MaxHeaderBytes:    webhook.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", sc.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sc.Addr, err)
	}
	names := make([]string, 0, len(set))
	for _, e := range set {
		names = append(names, e.Name())
	}
	log.Info("listening", "addr", ln.Addr().String(), "worker", owner, "workers", sc.Workers,
		"executors", names, "data_dir", cfg.DataDir, "store", storeWhere(cfg))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	workersDone := make(chan struct{})
	g.Go(func() error {
		// Draining: intake refuses deliveries and /readyz answers 503
		// while the workers finish; /healthz and /metrics keep
		// answering until the workers stopped.
		<-gctx.Done()
		ready.drain()
		log.Info("intake stopped")
		<-workersDone
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("stop http server: %w", errors.Join(err, srv.Close()))
		}
		log.Info("http server stopped")
		return nil
	})
	g.Go(func() error {
		defer close(workersDone)
		err := worker.Run(gctx)
		queue.Close() // shadow lanes still running are stopped and recorded
		log.Info("workers stopped")
		return err
	})
	if cfg.Commands.Enabled {
		cw, err := review.NewCommandWorker(review.CommandWorker{
			Queue: storeCommands{db: db, owner: owner}, Runs: storeCommands{db: db, owner: owner},
			GitHub: githubCommands{c: gc}, PRs: githubPRs{c: gc},
			Slug: cfg.Commands.Slug, RunsPerHour: cfg.Commands.RunsPerHour, Logger: log,
			Secrets: secrets, Internals: internalPaths(cfg.DataDir),
		})
		if err != nil {
			return err
		}
		g.Go(func() error { return cw.Run(gctx) })
	}
	// Another replica's intake queued a job: wake an idle worker here
	// (PostgreSQL's LISTEN/NOTIFY; a no-op on SQLite).
	g.Go(func() error { return db.Listen(gctx, wake) })
	if sc.RedeliverySweep > 0 {
		sw := newSweeper(gc, db, log, time.Now)
		sw.exclusive = db.Exclusive // one replica sweeps at a time
		g.Go(func() error { return sw.runEvery(gctx, sc.RedeliverySweep) })
	}
	if keep := cfg.Jobs.Retention(); keep > 0 {
		pr := newPruner(db, log, time.Now, keep)
		pr.exclusive = db.Exclusive
		g.Go(func() error { return pr.runEvery(gctx, PruneInterval) })
	}
	err = g.Wait()
	log.Info("intake and workers stopped; closing the store", "err", err)
	return err
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
		tools, err := buildToolchain(cfg.Validation.Sandbox, reg, log)
		if err != nil {
			errs = append(errs, err)
		}
		eg, err := buildEgress(cfg, rules, reg, log)
		if err != nil {
			errs = append(errs, err)
		}
		e, err := local.New(log, local.Options{
			Tools:   tools,
			MinTier: cfg.Validation.LocalMinTier,
			Egress:  eg,
			Disk:    cfg.Validation.LocalDisk,
			// The range's gids are the same numbers.
			SandboxUID: cfg.Validation.LocalUIDFirst, SandboxGID: cfg.Validation.LocalUIDFirst,
			UIDCount: cfg.Validation.LocalUIDCount,
			CAFile:   cfg.Validation.Sandbox.CAFile,
			Env:      cfg.Validation.Sandbox.sandboxEnv(),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("local executor: %w", err))
		} else {
			// What a killed worker left: run directories, their disks,
			// cgroups. Never a live run of another process.
			if n, serr := e.Sweep(context.Background()); serr != nil {
				log.Error("sweep local runs left by dead workers", "err", serr)
			} else if n > 0 {
				log.Warn("removed local runs left by dead workers", "count", n)
			}
			set = append(set, e)
		}
	}
	if sc.SelfHost.Command != "" {
		e, err := selfhost.New(selfhost.Options{
			Command: sc.SelfHost.Command, Network: sc.SelfHost.Network, Timeout: sc.SelfHost.Timeout,
			Env: environ, Secrets: secrets, Resources: sc.SelfHost.Resources,
		})
		if err != nil {
			errs = append(errs, err)
		} else {
			set = append(set, e)
		}
	}
	if sc.Crabbox.Configured() {
		e, err := crabbox.New(crabbox.Options{
			Bin: sc.Crabbox.Bin, Coordinator: sc.Crabbox.Coordinator, Token: sc.Crabbox.Token.Reveal(),
			Env: environ, Secrets: secrets,
		})
		if err != nil {
			errs = append(errs, err)
		} else {
			set = append(set, e)
		}
	}
	if sc.E2B.Configured() {
		e, err := e2b.New(e2b.Options{
			APIKey: sc.E2B.APIKey.Reveal(), Template: sc.E2B.Template, TimeoutMs: sc.E2B.Timeout.Milliseconds(),
			APIURL: sc.E2B.APIURL, EnvdURL: sc.E2B.EnvdURL, CPU: sc.E2B.CPU, MemoryMB: sc.E2B.MemoryMB,
			AllowOut: sc.E2B.AllowOut, RegistryHosts: remoteHosts(rules), Secrets: secrets, Logger: log.With("executor", executors.NameManagedE2B),
		})
		if err != nil {
			errs = append(errs, err)
		} else {
			set = append(set, e)
		}
	}
	if sc.CFSandbox.Configured() {
		e, err := cfsandbox.New(cfsandbox.Options{
			Enabled: true, URL: sc.CFSandbox.URL, Token: sc.CFSandbox.Token.Reveal(), Timeout: sc.CFSandbox.Timeout,
			Secrets: secrets, Logger: log.With("executor", executors.NameManagedCFSandbox),
		})
		if err != nil {
			errs = append(errs, err)
		} else {
			set = append(set, e)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("executors: %w", err)
	}
	return set, nil
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
