// Command intakeload measures webhook intake on loopback: gilf's real
// handler (HMAC, decode, durable group commit) on the SQLite store and, with
// -postgres, on a private PostgreSQL server, against a bare net/http
// handler that only reads the body and answers 202, in the same run, at
// each concurrency level. Every request is a signed ~25 KB pull_request
// delivery with a unique delivery id and head sha, for each traffic shape
// in turn (-prs, default 1,500: all deliveries new heads of one pull
// request — they take turns, each superseding the last — or spread over
// 500). After each gilf level it checks that every 2xx answer has its row
// in the store. Before every run the engines catch up, unmeasured, on what
// the runs before left them (settler, -settle). Every run also reports,
// from /proc/stat, the machine's CPU time per answer and its steal and
// iowait shares (machine.go), so that a run on a disturbed machine shows
// as one, and the generator's own CPU time per answer. The generator
// signs each delivery from an HMAC of its pull request's prefix, hashed
// once (sign.go; the head sha is the payload's last member): the same
// signature as webhook.Sign for a few dozen bytes of hashing, as the CPU
// the generator spends is taken from the servers.
//
// The servers run in a child process (this binary with -serve), apart from
// the load generator, as GitHub is apart from a real App: the generator's
// goroutines do not share the servers' Go scheduler. The servers share the
// child and take turns, so they meet the same conditions. PostgreSQL runs
// as its own server process (fsync on: every 2xx is a synced commit).
//
// It only talks to 127.0.0.1, and each level is bounded by -duration and
// -max-requests.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gilf-review/gilf/internal/pgtest"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/postgres"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/webhook"
)

// Bounds of one measured level.
const (
	DefaultDuration    = 5 * time.Second
	DefaultMaxRequests = 100_000
	DefaultWarmup      = 300
	DefaultSize        = 25 << 10
	DefaultRepeat      = 3
	MaxRepeat          = 20
	// The floor at concurrency 64 (SPEC §1), as ratios to the bare
	// handler in the same run: SQLite at least 0.10× with p99 at most
	// 100 ms, PostgreSQL at least 0.05× with p99 at most 150 ms.
	TargetConcurrency = 64
	FloorRatio        = 0.10
	FloorP99          = 100 * time.Millisecond
	FloorRatioPG      = 0.05
	FloorP99PG        = 150 * time.Millisecond
	// SettleTimeout bounds the engines' catching up before one run (see
	// settler).
	SettleTimeout = 5 * time.Minute
	// settleRetry is how long one checkpoint attempt waits for the
	// store's connections, and the pause before the next.
	settleRetry = 50 * time.Millisecond
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "intakeload:", err)
		os.Exit(1)
	}
}

type config struct {
	payload     string
	size        int
	levels      []int
	duration    time.Duration
	maxRequests int
	warmup      int
	repeat      int
	sync        store.Synchronous
	dir         string
	cpuProfile  string
	postgres    bool
	settle      bool
	prs         []int // traffic shapes: how many pull requests the deliveries spread over
}

func parseFlags() (config, error) {
	var c config
	var levels, syncLevel, prs string
	flag.StringVar(&c.payload, "payload", "", "a real pull_request webhook payload (JSON file)")
	flag.IntVar(&c.size, "size", DefaultSize, "payload size in bytes after padding pull_request.body")
	flag.StringVar(&levels, "c", "1,16,64", "concurrency levels")
	flag.DurationVar(&c.duration, "duration", DefaultDuration, "measured time per level and handler")
	flag.IntVar(&c.maxRequests, "max-requests", DefaultMaxRequests, "request cap per level and handler")
	flag.IntVar(&c.warmup, "warmup", DefaultWarmup, "unmeasured requests before each run")
	flag.IntVar(&c.repeat, "repeat", DefaultRepeat, "runs per level and handler (bare and gilf alternate); the table shows the median")
	flag.StringVar(&syncLevel, "synchronous", string(store.DefaultSynchronous), "SQLite synchronous level: FULL or NORMAL")
	flag.StringVar(&c.dir, "dir", "", "directory for the SQLite file (default: a new temp dir, removed after)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the servers (whole run) to this file")
	flag.StringVar(&prs, "prs", "1,500", "traffic shapes, each measured in turn: spread the deliveries over this many pull requests of the repository (1: each is a new head of one, superseding the last)")
	flag.BoolVar(&c.postgres, "postgres", false, "also measure gilf on a private PostgreSQL server (Debian's postgresql package)")
	flag.BoolVar(&c.settle, "settle", true, "before every run, let the engines finish what the runs before left them (SQLite: wal_checkpoint(RESTART); PostgreSQL: VACUUM (ANALYZE), CHECKPOINT), so that no run pays for another's writes")
	flag.Parse()
	if c.payload == "" {
		return c, errors.New("-payload is required")
	}
	for _, s := range strings.Split(levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1024 {
			return c, fmt.Errorf("bad concurrency level %q", s)
		}
		c.levels = append(c.levels, n)
	}
	if c.duration <= 0 || c.duration > 10*time.Minute || c.maxRequests < 1 {
		return c, errors.New("-duration must be in (0, 10m] and -max-requests positive")
	}
	for _, s := range strings.Split(prs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 900_000_000 {
			return c, fmt.Errorf("bad -prs %q: each must be in [1, 900000000]", s)
		}
		c.prs = append(c.prs, n)
	}
	if c.repeat < 1 || c.repeat > MaxRepeat {
		return c, fmt.Errorf("-repeat must be in [1, %d]", MaxRepeat)
	}
	c.sync = store.Synchronous(strings.ToUpper(syncLevel))
	return c, nil
}

// secretEnv carries the webhook secret to the server child (not argv,
// which other users of the machine can read).
const secretEnv = "GILF_INTAKELOAD_SECRET"

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "-serve" {
		return serveChild(os.Args[2:])
	}
	cfg, err := parseFlags()
	if err != nil {
		return err
	}
	tmpl, err := buildPayload(cfg.payload, cfg.size)
	if err != nil {
		return err
	}
	dir := cfg.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "gilf-intakeload-"); err != nil {
			return fmt.Errorf("temp dir: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	ctx := context.Background()
	var dsn string
	if cfg.postgres {
		pg, err := pgtest.Start(ctx, io.Discard)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		defer pg.Close()
		if dsn, err = createDatabase(ctx, pg, "intakeload"); err != nil {
			return err
		}
	}
	srv, err := startServers(ctx, cfg, filepath.Join(dir, "intake.db"), dsn, secret)
	if err != nil {
		return err
	}
	defer srv.stop()
	var st *settler
	if cfg.settle {
		if st, err = newSettler(ctx, filepath.Join(dir, "intake.db"), dsn); err != nil {
			return err
		}
		defer st.close(ctx)
	}

	fmt.Printf("payload %d bytes (%s, body padded), synchronous=%s, %v or %d requests per run, median of %d runs\n",
		len(tmpl.body), filepath.Base(cfg.payload), cfg.sync, cfg.duration, cfg.maxRequests, cfg.repeat)
	fmt.Println(durability(cfg.sync))
	if cfg.postgres {
		fmt.Println("durability: postgres: every 2xx waits for its transaction's commit, fsynced by the server (fsync=on, synchronous_commit=on)")
	}
	if st != nil {
		fmt.Println("between runs: " + st.describe())
	}
	seq := new(atomic.Int64) // delivery numbers: every delivery of the run is new
	for _, prs := range cfg.prs {
		fmt.Printf("\ntraffic: %s\n", shape(prs))
		header := fmt.Sprintf("%5s | %12s %10s", "c", "bare req/s", "bare p99")
		for _, g := range srv.gilf {
			header += fmt.Sprintf(" | %18s %10s %6s", g.name+" req/s", "p99", "ratio")
		}
		fmt.Println(header + " | durable")
		atTarget := make([][]result, len(srv.gilf))
		var bareAtTarget []result
		sg, err := newSigner(tmpl, secret, prs)
		if err != nil {
			return err
		}
		for _, c := range cfg.levels {
			gen := &generator{tmpl: tmpl, signer: sg, seq: seq, prs: prs}
			var bs []result
			gs := make([][]result, len(srv.gilf))
			durable := "ok"
			// Bare and each gilf alternate, repeat times: on a shared machine
			// the speed drifts between runs, and every handler sees the same
			// drift.
			for range cfg.repeat {
				if err := st.settle(ctx); err != nil {
					return err
				}
				gen.load(ctx, srv.bare, c, 0, cfg.warmup)
				bs = append(bs, gen.load(ctx, srv.bare, c, cfg.duration, cfg.maxRequests))
				for i, h := range srv.gilf {
					if err := st.settle(ctx); err != nil {
						return err
					}
					gen.load(ctx, h.url, c, 0, cfg.warmup)
					mid, err := count(h.count)
					if err != nil {
						return err
					}
					g := gen.load(ctx, h.url, c, cfg.duration, cfg.maxRequests)
					after, err := count(h.count)
					if err != nil {
						return err
					}
					if after-mid != g.ok {
						durable = fmt.Sprintf("MISMATCH (%s): %d answers 2xx, %d rows", h.name, g.ok, after-mid)
					}
					gs[i] = append(gs[i], g)
				}
			}
			b := median(bs)
			failed := failures(bs)
			line := fmt.Sprintf("%5d | %12.0f %10s", c, b.rate(), ms(b.p(0.99)))
			for i := range srv.gilf {
				g := median(gs[i])
				failed += failures(gs[i])
				line += fmt.Sprintf(" | %18.0f %10s %5.2fx", g.rate(), ms(g.p(0.99)), g.rate()/b.rate())
				if c == TargetConcurrency {
					atTarget[i], bareAtTarget = gs[i], bs
				}
			}
			if failed > 0 {
				durable += fmt.Sprintf(" (%d failed)", failed)
			}
			fmt.Println(line + " | " + durable)
			for i, h := range srv.gilf {
				if r := spread(bs, gs[i]); r != "" {
					fmt.Printf("        %s:%s\n", h.name, r)
				}
			}
			if m := machineRuns(bs, srv.gilf, gs); m != "" {
				fmt.Println(m)
			}
		}
		for i, h := range srv.gilf {
			if len(atTarget[i]) > 0 {
				fmt.Println(verdict(h.name, prs, bareAtTarget, atTarget[i]))
			}
		}
	}
	return nil
}

// verdict compares the median run at TargetConcurrency, as a ratio to
// the bare handler's median in the same runs, with the engine's floor.
func verdict(engine string, prs int, bare, runs []result) string {
	m, b := median(runs), median(bare)
	floor, p99 := FloorRatio, FloorP99
	if engine == "postgres" {
		floor, p99 = FloorRatioPG, FloorP99PG
	}
	ratio := m.rate() / b.rate()
	ok := "met"
	if ratio < floor || m.p(0.99) > p99 {
		ok = "NOT met"
	}
	return fmt.Sprintf("floor on %s at c=%d, %s: >= %.2fx bare and p99 <= %s, every one durable: %s (median %.0f req/s of %d runs, %.2fx bare's %.0f, p99 %s)",
		engine, TargetConcurrency, shape(prs), floor, ms(p99), ok, m.rate(), len(runs), ratio, b.rate(), ms(m.p(0.99)))
}

// shape names a traffic shape.
func shape(prs int) string {
	if prs == 1 {
		return "1 pull request (each delivery a new head superseding the last)"
	}
	return fmt.Sprintf("%d pull requests (each delivery a new head of one of them)", prs)
}

// createDatabase makes a fresh database on the private server.
func createDatabase(ctx context.Context, pg *pgtest.Server, name string) (string, error) {
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("postgres: create database: %w", err)
	}
	return pg.DSN(name), nil
}

// settler lets the engines finish, between two runs, the work the runs
// before left them: the WAL pages not yet copied into SQLite's database
// file, and PostgreSQL's dead row versions and dirty buffers, which its
// autovacuum workers and checkpointer would otherwise work through during
// the next run, whichever handler it measures. The three servers share two
// CPUs, so without it the bare handler's and SQLite's runs pay for
// PostgreSQL's writes, and the last shape for the first. What a run leaves
// is its own engine's cost of sustained intake; the settle time is printed
// so that it is not hidden.
//
// SQLite's checkpoint is a RESTART, not a TRUNCATE: the WAL keeps its
// size, as between the writer's own checkpoints, so the next run
// overwrites it instead of growing a new file, whose every fsync is a
// journal commit.
type settler struct {
	sqlite *sql.DB   // a connection of its own to the SQLite file
	pg     *pgx.Conn // nil without -postgres
	spent  time.Duration
	runs   int
}

func newSettler(ctx context.Context, dbPath, dsn string) (*settler, error) {
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout("+strconv.Itoa(int(settleRetry.Milliseconds()))+")")
	if err != nil {
		return nil, fmt.Errorf("settle: %w", err)
	}
	db.SetMaxOpenConns(1)
	s := &settler{sqlite: db}
	if dsn != "" {
		if s.pg, err = pgx.Connect(ctx, dsn); err != nil {
			db.Close()
			return nil, fmt.Errorf("settle: postgres: %w", err)
		}
	}
	return s, nil
}

// describe says what settle does, for the report's header.
func (s *settler) describe() string {
	d := "SQLite's WAL checkpointed into the database file (wal_checkpoint(RESTART))"
	if s.pg != nil {
		d += "; PostgreSQL vacuumed (VACUUM (ANALYZE)) and checkpointed (CHECKPOINT)"
	}
	return d + ", unmeasured, so that no run pays for the runs before it"
}

// settle runs the engines' catching-up work to its end, within
// SettleTimeout. A nil settler does nothing (-settle=false).
func (s *settler) settle(ctx context.Context) error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, SettleTimeout)
	defer cancel()
	start := time.Now()
	// The store's own checkpointer may be at work (then the checkpoint
	// cannot start: busy, -1 frames), or its readers still reading:
	// tried again until it completes, within SettleTimeout.
	for {
		var busy, logFrames, done int
		if err := s.sqlite.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &logFrames, &done); err != nil {
			return fmt.Errorf("settle: sqlite: %w", err)
		}
		if busy == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("settle: sqlite: the checkpoint could not finish before the deadline (%d of %d frames): %w", done, logFrames, ctx.Err())
		case <-time.After(settleRetry):
		}
	}
	if s.pg != nil {
		for _, q := range []string{"VACUUM (ANALYZE)", "CHECKPOINT"} {
			if _, err := s.pg.Exec(ctx, q); err != nil {
				return fmt.Errorf("settle: postgres: %s: %w", q, err)
			}
		}
	}
	s.spent += time.Since(start)
	s.runs++
	return nil
}

func (s *settler) close(ctx context.Context) {
	if s.runs > 0 {
		fmt.Printf("\nsettling took %s in all, %s per run on average\n", s.spent.Round(time.Millisecond), (s.spent / time.Duration(s.runs)).Round(time.Millisecond))
	}
	s.sqlite.Close()
	if s.pg != nil {
		s.pg.Close(ctx)
	}
}

// median is the run with the median rate (the upper one of an even count).
func median(rs []result) result {
	sorted := slices.Clone(rs)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].rate() < sorted[j].rate() })
	return sorted[len(sorted)/2]
}

func failures(rs []result) int {
	n := 0
	for _, r := range rs {
		n += r.failed
	}
	return n
}

// spread lists every run's rate and p99 when there was more than one.
func spread(bs, gs []result) string {
	if len(bs) < 2 {
		return ""
	}
	p99 := func(r result) float64 { return float64(r.p(0.99)) / float64(time.Millisecond) }
	return fmt.Sprintf("  [runs: bare %s; gilf %s] [p99 ms: bare %s; gilf %s]",
		perRun(bs, result.rate), perRun(gs, result.rate), perRun(bs, p99), perRun(gs, p99))
}

// perRun lists f of every run, rounded.
func perRun(rs []result, f func(result) float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.0f", f(r))
	}
	return strings.Join(parts, " ")
}

// machineRuns lists, run by run, what the whole machine spent per 2xx
// answer (generator, servers and PostgreSQL: CPU time is not stretched
// by a slower machine as the rates are), the load generator's part of it,
// and the shares of the CPUs' time the hypervisor gave to other guests
// (steal) and spent idle with a disk request outstanding (iowait); empty
// without /proc/stat.
func machineRuns(bs []result, hs []gilfHandler, gs [][]result) string {
	if len(bs) == 0 || bs[0].machine == (machineShare{}) {
		return ""
	}
	line := func(what string, f func(result) float64) string {
		out := fmt.Sprintf("  [%s: bare %s", what, perRun(bs, f))
		for i, h := range hs {
			out += fmt.Sprintf("; %s %s", h.name, perRun(gs[i], f))
		}
		return out + "]"
	}
	cpu := line("CPU µs per answer", result.cpuPerRequest)
	for i, h := range hs {
		cpu += fmt.Sprintf(" %s/bare %.2fx", h.name, medianOf(gs[i], result.cpuPerRequest)/medianOf(bs, result.cpuPerRequest))
	}
	return "        machine:" + cpu + "\n        machine:" + line("of which the generator's", result.generatorPerRequest) + "\n        machine:" +
		line("steal %", func(r result) float64 { return 100 * r.machine.steal }) +
		line("iowait %", func(r result) float64 { return 100 * r.machine.iowait })
}

// medianOf is the median of f over rs.
func medianOf(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// durability states the crash model the measured numbers pay for.
func durability(s store.Synchronous) string {
	if s == store.SynchronousNormal {
		return "durability: synchronous=NORMAL: every 2xx survives a process crash; a power loss may roll back the last group commits"
	}
	return "durability: synchronous=FULL: every 2xx waits for its group commit's WAL fsync, so it survives a process crash and a power loss"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// servers is the child process serving the handlers.
type servers struct {
	cmd   *exec.Cmd
	stdin io.Closer
	bare  string
	gilf  []gilfHandler // sqlite, then postgres when measured
}

// gilfHandler is gilf's intake on one engine.
type gilfHandler struct{ name, url, count string }

// startServers starts the child and reads the URLs it prints: the bare
// handler's, then "<engine> <url>" per gilf handler, then "ready".
func startServers(ctx context.Context, cfg config, dbPath, dsn string, secret []byte) (*servers, error) {
	args := []string{"-serve", "-db", dbPath, "-synchronous", string(cfg.sync)}
	if dsn != "" {
		args = append(args, "-postgres", dsn)
	}
	if cfg.cpuProfile != "" {
		args = append(args, "-cpuprofile", cfg.cpuProfile)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), secretEnv+"="+hex.EncodeToString(secret))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // closed by stop: the child's signal to exit
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start servers: %w", err)
	}
	s := &servers{cmd: cmd, stdin: stdin}
	sc := bufio.NewScanner(out)
	for first := true; ; first = false {
		if !sc.Scan() {
			s.stop()
			return nil, fmt.Errorf("servers did not start: %v", sc.Err())
		}
		line := sc.Text()
		switch name, url, _ := strings.Cut(line, " "); {
		case line == "ready":
			return s, nil
		case first:
			s.bare = line
		default:
			s.gilf = append(s.gilf, gilfHandler{name: name, url: url, count: strings.TrimSuffix(url, "/webhook") + "/count"})
		}
	}
}

func (s *servers) stop() {
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "servers:", err)
	}
}

func count(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, fmt.Errorf("count deliveries: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("count deliveries: %d %s %v", resp.StatusCode, b, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// serveChild is the -serve side: gilf's handler over a real store and the
// bare handler, each on its own loopback listener, until stdin closes.
func serveChild(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dbPath := fs.String("db", "", "SQLite file")
	syncLevel := fs.String("synchronous", string(store.DefaultSynchronous), "FULL or NORMAL")
	cpuProfile := fs.String("cpuprofile", "", "CPU profile of the servers")
	dsn := fs.String("postgres", "", "PostgreSQL URL of a second gilf handler")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret, err := hex.DecodeString(os.Getenv(secretEnv))
	if err != nil || len(secret) == 0 {
		return fmt.Errorf("serve: %s must hold the hex secret", secretEnv)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := sqlite.Open(ctx, *dbPath, logger, store.Options{Synchronous: store.Synchronous(*syncLevel)})
	if err != nil {
		return err
	}
	defer db.Close()
	dbs := []struct {
		name string
		db   *store.DB
	}{{"sqlite", db}}
	if *dsn != "" {
		pdb, err := postgres.Open(ctx, *dsn, logger, store.Options{})
		if err != nil {
			return err
		}
		defer pdb.Close()
		dbs = append(dbs, struct {
			name string
			db   *store.DB
		}{"postgres", pdb})
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	bareURL, stopB, err := serve(bare)
	if err != nil {
		return err
	}
	defer stopB()
	fmt.Println(bareURL)
	for _, e := range dbs {
		gilf, err := webhook.New(e.db, logger, webhook.Config{Secret: secret})
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/webhook", gilf)
		mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
			n, err := e.db.CountDeliveries(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			fmt.Fprintln(w, n)
		})
		url, stop, err := serve(mux)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Println(e.name, url)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it, or dies
	return nil
}

// serve runs h on a loopback listener with webhook's recommended timeouts.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler: h, ReadHeaderTimeout: webhook.ReadHeaderTimeout, ReadTimeout: webhook.ReadTimeout,
		WriteTimeout: webhook.WriteTimeout, IdleTimeout: webhook.IdleTimeout, MaxHeaderBytes: webhook.MaxHeaderBytes,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "serve:", err)
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "shutdown:", err)
		}
		<-done
	}
	return "http://" + ln.Addr().String() + "/webhook", stop, nil
}

// template is a compact real payload with its head sha positions.
type template struct {
	body  []byte
	heads []int // offsets of the 40-hex head sha
	prs   []int // offsets of the pull request number (prDigits digits)
}

// prMarker stands for the pull request number in the template: prDigits
// digits, replaced per delivery by prBase + n mod -prs.
const (
	prMarker = "999999999"
	prDigits = len(prMarker)
	prBase   = 100000000
)

// buildPayload compacts a real payload and pads pull_request.body so the
// whole is size bytes. Its keys are sorted, as json.Marshal sorts them,
// except along pull_request.head.sha, which comes last: every byte before
// the head sha then depends on the pull request number alone, so the
// generator signs a delivery from its pull request's hashed prefix and
// hashes a few dozen bytes of its own (sign.go). The server reads the
// same members as in any order.
func buildPayload(path string, size int) (template, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return template{}, fmt.Errorf("read payload: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return template{}, fmt.Errorf("payload: %w", err)
	}
	pr, ok := m["pull_request"].(map[string]any)
	if !ok {
		return template{}, errors.New("payload has no pull_request")
	}
	head := pr["head"].(map[string]any)
	const marker = "ffffffffffffffffffffffffffffffffffffffff"
	head["sha"] = marker
	m["number"], pr["number"] = json.Number(prMarker), json.Number(prMarker)
	text, _ := pr["body"].(string) // null in some payloads: start empty
	pr["body"] = text
	b, err := marshalLast(m, headSHAPath)
	if err != nil {
		return template{}, err
	}
	if pad := size - len(b); pad > 0 {
		const sentence = "This pull request changes the intake path. "
		filler := strings.Repeat(sentence, pad/len(sentence)+1)[:pad]
		pr["body"] = text + filler
		if b, err = marshalLast(m, headSHAPath); err != nil {
			return template{}, err
		}
	}
	t := template{body: b}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(marker))
		if j < 0 {
			break
		}
		t.heads = append(t.heads, i+j)
		i += j + len(marker)
	}
	if len(t.heads) == 0 {
		return template{}, errors.New("head sha not found in the payload")
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`"number":`+prMarker))
		if j < 0 {
			break
		}
		t.prs = append(t.prs, i+j+len(`"number":`))
		i += j + len(`"number":`) + prDigits
	}
	if len(t.prs) != 2 {
		return template{}, fmt.Errorf("found %d pull request numbers in the payload, want 2", len(t.prs))
	}
	return t, nil
}

// headSHAPath is the head sha's place in a pull_request payload.
var headSHAPath = []string{"pull_request", "head", "sha"}

// marshalLast is json.Marshal's compact encoding of m, keys sorted, except
// that the member named by last[0] comes after the others, and within its
// value (an object) last[1:] does likewise.
func marshalLast(m map[string]any, last []string) ([]byte, error) {
	if len(last) == 0 {
		return json.Marshal(m)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != last[0] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	v, ok := m[last[0]]
	if !ok {
		return nil, fmt.Errorf("payload has no %q", last[0])
	}
	b := []byte{'{'}
	member := func(k string, raw []byte) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		kb, _ := json.Marshal(k)
		b = append(append(append(b, kb...), ':'), raw...)
	}
	for _, k := range keys {
		raw, err := json.Marshal(m[k])
		if err != nil {
			return nil, err
		}
		member(k, raw)
	}
	var raw []byte
	var err error
	if sub, isObject := v.(map[string]any); isObject {
		raw, err = marshalLast(sub, last[1:])
	} else if len(last) > 1 {
		return nil, fmt.Errorf("payload's %q is not an object", last[0])
	} else {
		raw, err = json.Marshal(v)
	}
	if err != nil {
		return nil, err
	}
	member(last[0], raw)
	return append(b, '}'), nil
}

type generator struct {
	tmpl   template
	signer *signer
	seq    *atomic.Int64
	prs    int // deliveries spread over this many pull requests
}

type result struct {
	ok, failed int
	elapsed    time.Duration
	lat        []time.Duration
	machine    machineShare  // zero when /proc/stat could not be read
	generator  time.Duration // the load generator's own CPU time; 0 when unknown
}

// generatorPerRequest is the load generator's CPU time per 2xx answer, in µs.
func (r result) generatorPerRequest() float64 {
	if r.ok == 0 {
		return 0
	}
	return float64(r.generator.Nanoseconds()) / float64(r.ok) / 1e3
}

// cpuPerRequest is the machine's CPU time per 2xx answer, in µs.
func (r result) cpuPerRequest() float64 {
	if r.ok == 0 {
		return 0
	}
	return r.machine.busyNs / float64(r.ok) / 1e3
}

func (r result) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

func (r result) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(q*float64(len(r.lat)-1))]
}

// load sends requests from c workers, each on its own keep-alive
// connection, until max requests were sent or d passed (d == 0: only the
// count bounds it).
//
// The client is a minimal HTTP/1.1 one (one writev per request, the
// answer parsed by Content-Length), not net/http's: on a shared machine
// the generator's own CPU is taken from the servers it measures, and
// net/http's client costs about twice this one per request.
func (g *generator) load(ctx context.Context, url string, c int, d time.Duration, max int) result {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	addr := strings.TrimPrefix(url, "http://")
	host, path, _ := strings.Cut(addr, "/")
	path = "/" + path
	var sent atomic.Int64
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	before, statErr := machineTimes()
	genBefore, genErr := processCPU()
	start := time.Now()
	for range c {
		wg.Go(func() {
			w := worker{g: g, host: host, path: path, body: bytes.Clone(g.tmpl.body)}
			defer w.close()
			lat := make([]time.Duration, 0, 1024)
			ok, failed := 0, 0
			for ctx.Err() == nil && sent.Add(1) <= int64(max) {
				t0 := time.Now()
				if err := w.do(g.seq.Add(1)); err != nil {
					failed++
					w.close()
					continue
				}
				lat = append(lat, time.Since(t0))
				ok++
			}
			mu.Lock()
			res.ok += ok
			res.failed += failed
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if after, err := machineTimes(); statErr == nil && err == nil {
		res.machine = before.share(after)
	}
	if after, err := processCPU(); genErr == nil && err == nil {
		res.generator = after - genBefore
	}
	sort.Slice(res.lat, func(i, j int) bool { return res.lat[i] < res.lat[j] })
	return res
}

// requestTimeout bounds one request's round trip.
const requestTimeout = 30 * time.Second

// worker is one keep-alive connection of the load generator.
type worker struct {
	g          *generator
	host, path string
	body       []byte
	conn       net.Conn
	rd         *bufio.Reader
	head       []byte
}

func (w *worker) close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

// do sends delivery n (a new delivery id and head sha, signed) and reads
// the answer; any answer but 2xx is an error.
func (w *worker) do(n int64) error {
	if w.conn == nil {
		c, err := net.DialTimeout("tcp", w.host, requestTimeout)
		if err != nil {
			return err
		}
		w.conn, w.rd = c, bufio.NewReaderSize(c, 4096)
	}
	sha := fmt.Sprintf("%040x", n)
	for _, at := range w.g.tmpl.heads {
		copy(w.body[at:], sha)
	}
	k := int(n % int64(w.g.prs))
	w.g.tmpl.setPR(w.body, k)
	sig, err := w.g.signer.sign(w.body, k)
	if err != nil {
		return err
	}
	w.head = fmt.Appendf(w.head[:0], "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: %08x-0000-4000-8000-%012x\r\n"+
		"X-Hub-Signature-256: %s\r\nContent-Length: %d\r\n\r\n",
		w.path, w.host, n>>48, n, sig, len(w.body))
	if err := w.conn.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return err
	}
	bufs := net.Buffers{w.head, w.body}
	if _, err := bufs.WriteTo(w.conn); err != nil {
		return err
	}
	return w.readAnswer()
}

// readAnswer reads a status line, headers and a Content-Length body.
func (w *worker) readAnswer() error {
	line, err := w.rd.ReadSlice('\n')
	if err != nil {
		return err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 2")) {
		return fmt.Errorf("answer %q", bytes.TrimSpace(line))
	}
	length, closing := -1, false
	for {
		line, err := w.rd.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		k, v, _ := bytes.Cut(line, []byte(":"))
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return fmt.Errorf("content-length %q", v)
			}
		case bytes.EqualFold(k, []byte("Connection")) && bytes.EqualFold(v, []byte("close")):
			closing = true
		}
	}
	if length < 0 {
		return errors.New("answer without Content-Length")
	}
	if _, err := w.rd.Discard(length); err != nil {
		return err
	}
	if closing {
		w.close()
	}
	return nil
}
