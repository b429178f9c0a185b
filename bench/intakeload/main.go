// Command intakeload measures webhook intake on loopback: gilf's real
// handler (HMAC, decode, durable group commit to SQLite) against a bare
// net/http handler that only reads the body and answers 202, in the same
// run, at each concurrency level. Every request is a signed ~25 KB
// pull_request delivery with a unique delivery id and head sha. After each
// gilf level it checks that every 2xx answer has its row in the store.
//
// It only talks to 127.0.0.1, and each level is bounded by -duration and
// -max-requests.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/webhook"
)

// Bounds of one measured level.
const (
	DefaultDuration    = 5 * time.Second
	DefaultMaxRequests = 100_000
	DefaultWarmup      = 300
	DefaultSize        = 25 << 10
	// The target: twice Probot's 2.3k req/s at concurrency 64.
	TargetConcurrency = 64
	TargetRate        = 4600
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
	sync        store.Synchronous
	dir         string
	cpuProfile  string
}

func parseFlags() (config, error) {
	var c config
	var levels, syncLevel string
	flag.StringVar(&c.payload, "payload", "", "a real pull_request webhook payload (JSON file)")
	flag.IntVar(&c.size, "size", DefaultSize, "payload size in bytes after padding pull_request.body")
	flag.StringVar(&levels, "c", "1,16,64", "concurrency levels")
	flag.DurationVar(&c.duration, "duration", DefaultDuration, "measured time per level and handler")
	flag.IntVar(&c.maxRequests, "max-requests", DefaultMaxRequests, "request cap per level and handler")
	flag.IntVar(&c.warmup, "warmup", DefaultWarmup, "unmeasured requests before each level")
	flag.StringVar(&syncLevel, "synchronous", string(store.DefaultSynchronous), "SQLite synchronous level: FULL or NORMAL")
	flag.StringVar(&c.dir, "dir", "", "directory for the SQLite file (default: a new temp dir, removed after)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
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
	c.sync = store.Synchronous(strings.ToUpper(syncLevel))
	return c, nil
}

func run() error {
	cfg, err := parseFlags()
	if err != nil {
		return err
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
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
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := store.Open(ctx, filepath.Join(dir, "intake.db"), logger, store.Options{Synchronous: cfg.sync})
	if err != nil {
		return err
	}
	defer db.Close()
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	gilf, err := webhook.New(db, logger, webhook.Config{Secret: secret})
	if err != nil {
		return err
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	gilfURL, stopG, err := serve(gilf)
	if err != nil {
		return err
	}
	defer stopG()
	bareURL, stopB, err := serve(bare)
	if err != nil {
		return err
	}
	defer stopB()

	fmt.Printf("payload %d bytes (%s, body padded), synchronous=%s, %v or %d requests per level\n",
		len(tmpl.body), filepath.Base(cfg.payload), cfg.sync, cfg.duration, cfg.maxRequests)
	fmt.Println(durability(cfg.sync))
	fmt.Printf("%5s | %12s %10s | %12s %10s | %6s | %s\n", "c", "bare req/s", "bare p99", "gilf req/s", "gilf p99", "ratio", "durable")
	var seq atomic.Int64
	var last *result
	var lastRatio float64
	for _, c := range cfg.levels {
		gen := &generator{tmpl: tmpl, secret: secret, seq: &seq}
		gen.load(ctx, bareURL, c, 0, cfg.warmup)
		b := gen.load(ctx, bareURL, c, cfg.duration, cfg.maxRequests)
		gen.load(ctx, gilfURL, c, 0, cfg.warmup)
		mid, err := db.CountDeliveries(ctx)
		if err != nil {
			return err
		}
		g := gen.load(ctx, gilfURL, c, cfg.duration, cfg.maxRequests)
		after, err := db.CountDeliveries(ctx)
		if err != nil {
			return err
		}
		durable := "ok"
		if after-mid != g.ok {
			durable = fmt.Sprintf("MISMATCH: %d answers 2xx, %d rows", g.ok, after-mid)
		}
		if b.failed+g.failed > 0 {
			durable += fmt.Sprintf(" (failed: bare %d, gilf %d)", b.failed, g.failed)
		}
		fmt.Printf("%5d | %12.0f %10s | %12.0f %10s | %5.2fx | %s\n", c, b.rate(), ms(b.p(0.99)), g.rate(), ms(g.p(0.99)),
			g.rate()/b.rate(), durable)
		if c == TargetConcurrency {
			last = &g
			lastRatio = g.rate() / b.rate()
		}
	}
	if last != nil {
		verdict := "met"
		if last.rate() < TargetRate {
			verdict = "NOT met"
		}
		fmt.Printf("target at c=%d: >= %d req/s (2x Probot's 2.3k), every one durable: %s (%.0f req/s); aim: >= 0.5x bare (%.2fx)\n",
			TargetConcurrency, TargetRate, verdict, last.rate(), lastRatio)
	}
	return nil
}

// durability states the crash model the measured numbers pay for.
func durability(s store.Synchronous) string {
	if s == store.SynchronousNormal {
		return "durability: synchronous=NORMAL with WAL: every 2xx survives a process crash; a power loss may roll back the last group commits"
	}
	return "durability: synchronous=FULL with WAL: every 2xx waits for its group commit's fsync, so it survives a process crash and a power loss"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

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
}

// buildPayload compacts a real payload and pads pull_request.body so the
// whole is size bytes.
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
	text, _ := pr["body"].(string) // null in some payloads: start empty
	pr["body"] = text
	b, err := json.Marshal(m)
	if err != nil {
		return template{}, err
	}
	if pad := size - len(b); pad > 0 {
		const sentence = "This pull request changes the intake path. "
		filler := strings.Repeat(sentence, pad/len(sentence)+1)[:pad]
		pr["body"] = text + filler
		if b, err = json.Marshal(m); err != nil {
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
	return t, nil
}

type generator struct {
	tmpl   template
	secret []byte
	seq    *atomic.Int64
}

type result struct {
	ok, failed int
	elapsed    time.Duration
	lat        []time.Duration
}

func (r result) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

func (r result) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(q*float64(len(r.lat)-1))]
}

// load sends requests from c workers until max requests were sent or d
// passed (d == 0: only the count bounds it).
func (g *generator) load(ctx context.Context, url string, c int, d time.Duration, max int) result {
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c, MaxConnsPerHost: c, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var sent atomic.Int64
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			body := bytes.Clone(g.tmpl.body)
			lat := make([]time.Duration, 0, 1024)
			ok, failed := 0, 0
			for ctx.Err() == nil && sent.Add(1) <= int64(max) {
				n := g.seq.Add(1)
				sha := fmt.Sprintf("%040x", n)
				for _, at := range g.tmpl.heads {
					copy(body[at:], sha)
				}
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					failed++
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "pull_request")
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("%08x-0000-4000-8000-%012x", n>>48, n))
				req.Header.Set("X-Hub-Signature-256", webhook.Sign(g.secret, body))
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failed++
					continue
				}
				_, copyErr := io.Copy(io.Discard, resp.Body)
				closeErr := resp.Body.Close()
				if resp.StatusCode/100 != 2 || copyErr != nil || closeErr != nil {
					failed++
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
	sort.Slice(res.lat, func(i, j int) bool { return res.lat[i] < res.lat[j] })
	return res
}
