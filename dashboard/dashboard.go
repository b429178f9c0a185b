// Package dashboard is gilf's operator dashboard (SPEC §8): server-rendered
// HTML under /dashboard and a JSON API under /api/v1/, both behind one
// token. It reads the store through Reader and changes it only through
// Requeuer and Canceller (the queue's and job page's retry and cancel
// buttons); it opens stored evidence through Evidence.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/gilf-review/gilf/internal/failguard"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/store"
)

// Reader is what the dashboard reads. *store.DB implements it.
type Reader interface {
	RunList(ctx context.Context, q store.RunQuery) (store.RunPage, error)
	// RunView reads one run; when there is none, an error for which
	// Config.IsNotFound holds.
	RunView(ctx context.Context, id int64) (store.RunView, error)
	CostsByDay(ctx context.Context, since time.Time) ([]store.CostDay, error)
	CostsByRepo(ctx context.Context, since time.Time) ([]store.RepoCostDay, error)
	JobList(ctx context.Context, q store.JobQuery) ([]store.JobView, error)
	// JobDetail reads one job with its attempts and runs; when there is
	// none, an error for which Config.IsNotFound holds.
	JobDetail(ctx context.Context, id int64) (store.JobDetail, error)
	JobAttempts(ctx context.Context, ids []int64) (map[int64][]store.JobAttempt, error)
	RefusalCounts(ctx context.Context, since time.Time) ([]store.RefusalCount, error)
	ShadowPairs(ctx context.Context, since time.Time) ([]store.ShadowPair, error)
}

// Requeuer queues a finished job again as a re-run; it reports the job's
// state afterwards and whether it was queued again.
type Requeuer interface {
	RerunJob(ctx context.Context, id int64, reason string) (string, bool, error)
}

// Canceller cancels a queued or running job; it reports the job's state
// afterwards and whether this call cancelled it.
type Canceller interface {
	CancelQueuedJob(ctx context.Context, id int64, reason string) (string, bool, error)
}

// MinTokenLen is the shortest token New accepts.
const MinTokenLen = 16

// Defaults of Config.
const (
	DefaultSessionTTL = 12 * time.Hour
	// DefaultTokenFailureLimit wrong tokens (login form or bearer) from
	// one client address within DefaultTokenFailureWindow answer every
	// further try 429 until the window turns, right token or not: guessing
	// goes no faster than this. Behind a proxy, set TrustedProxies, or
	// every client is the proxy.
	DefaultTokenFailureLimit  = 10
	DefaultTokenFailureWindow = 5 * time.Minute
	DefaultCostDays           = 30
)

// Config is what New needs.
type Config struct {
	// Token is GILF_DASHBOARD_TOKEN: a bearer token, or the password of
	// the login form. At least MinTokenLen bytes.
	Token  string
	Reader Reader
	Queue  Requeuer
	Cancel Canceller
	// Evidence, when set, opens the evidence store's objects for the run
	// page's links (evidence.go); nil: a link only where the stored
	// reference has an http(s) URL.
	Evidence Evidence
	// IsNotFound tells the reader's "no such run" error apart from a
	// failure; nil answers every error 500.
	IsNotFound func(error) bool
	Logger     *slog.Logger
	Now        func() time.Time // nil: time.Now
	SessionTTL time.Duration    // 0: DefaultSessionTTL
	// TrustedProxies are GILF_TRUSTED_PROXIES: the reverse proxies whose
	// X-Forwarded-For names the client of a token failure.
	TrustedProxies []netip.Prefix
	// TokenFailureLimit and TokenFailureWindow default to
	// DefaultTokenFailureLimit and DefaultTokenFailureWindow.
	TokenFailureLimit  int
	TokenFailureWindow time.Duration
}

// Handler serves /dashboard and /api/v1/.
type Handler struct {
	cfg   Config
	keys  keys
	pages *template.Template
	mux   *http.ServeMux
	xorig *http.CrossOriginProtection
	fails *failguard.Guard // wrong tokens per client
}

//go:embed templates/*.html static/style.css
var files embed.FS

// New returns a ready handler, or an error when cfg is incomplete.
func New(cfg Config) (*Handler, error) {
	switch {
	case len(cfg.Token) < MinTokenLen:
		return nil, fmt.Errorf("dashboard: token must be at least %d bytes", MinTokenLen)
	case cfg.Reader == nil:
		return nil, errors.New("dashboard: no reader")
	case cfg.Queue == nil:
		return nil, errors.New("dashboard: no queue")
	case cfg.Cancel == nil:
		return nil, errors.New("dashboard: no canceller")
	case cfg.Logger == nil:
		return nil, errors.New("dashboard: no logger")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.IsNotFound == nil {
		cfg.IsNotFound = func(error) bool { return false }
	}
	if cfg.TokenFailureLimit == 0 {
		cfg.TokenFailureLimit = DefaultTokenFailureLimit
	}
	if cfg.TokenFailureWindow <= 0 {
		cfg.TokenFailureWindow = DefaultTokenFailureWindow
	}
	pages, err := template.New("").Funcs(funcs()).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	h := &Handler{cfg: cfg, keys: deriveKeys(cfg.Token), pages: pages, mux: http.NewServeMux(),
		xorig: http.NewCrossOriginProtection(), fails: failguard.New(cfg.TokenFailureLimit, cfg.TokenFailureWindow, cfg.Now)}
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET /dashboard/style.css", h.style)
	m.HandleFunc("GET /dashboard/login", h.loginForm)
	m.HandleFunc("POST /dashboard/login", h.login)
	m.Handle("POST /dashboard/logout", h.post(h.logout))
	m.Handle("GET /dashboard", h.page(h.runsPage))
	m.Handle("GET /dashboard/{$}", h.page(h.runsPage))
	m.Handle("GET /dashboard/runs/{id}", h.page(h.runPage))
	m.Handle("GET /dashboard/jobs/{id}", h.page(h.jobPage))
	m.Handle("GET /dashboard/costs", h.page(h.costsPage))
	m.HandleFunc("GET /dashboard/costs.csv", h.costsCSV)
	m.Handle("GET /dashboard/queue", h.page(h.queuePage))
	m.Handle("POST /dashboard/queue/{id}/retry", h.post(h.retry))
	m.Handle("POST /dashboard/queue/{id}/cancel", h.post(h.cancel))
	m.HandleFunc("GET /dashboard/evidence", h.evidence)
	m.Handle("GET /dashboard/refusals", h.page(h.refusalsPage))
	m.Handle("GET /dashboard/shadow", h.page(h.shadowPage))
	m.Handle("GET /api/v1/runs", h.api(h.apiRuns))
	m.Handle("GET /api/v1/runs/{id}", h.api(h.apiRun))
	m.Handle("GET /api/v1/costs", h.api(h.apiCosts))
	m.Handle("GET /api/v1/jobs", h.api(h.apiJobs))
	m.Handle("GET /api/v1/jobs/{id}", h.api(h.apiJob))
	m.Handle("GET /api/v1/refusals", h.api(h.apiRefusals))
	m.Handle("GET /api/v1/shadow", h.api(h.apiShadow))
	m.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			h.apiUnauthorized(w)
			return
		}
		writeJSON(w, http.StatusNotFound, apiError{Error: "not found"})
	})
}

// ServeHTTP sets the headers every answer carries and routes the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	// No script, no remote resource: the pages need neither.
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	if h.triesToken(r) && h.fails.Limited(h.client(r)) {
		hd.Set("Retry-After", strconv.Itoa(int(h.cfg.TokenFailureWindow.Seconds())))
		http.Error(w, "too many wrong tokens from this address; try again later", http.StatusTooManyRequests)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// triesToken reports whether a request presents the token: the login
// form, or a bearer.
func (h *Handler) triesToken(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/dashboard/login" || r.Header.Get("Authorization") != ""
}

func (h *Handler) client(r *http.Request) string { return failguard.ClientOf(r, h.cfg.TrustedProxies) }

// errNotFound is a page or API answer of 404.
var errNotFound = errors.New("not found")

// badRequest is a public error answered 400.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// status maps a handler's error to the HTTP status and public message;
// the error itself goes to the log.
func (h *Handler) status(r *http.Request, err error) (int, string) {
	var br badRequest
	switch {
	case errors.As(err, &br):
		return http.StatusBadRequest, br.msg
	case errors.Is(err, errNotFound) || h.cfg.IsNotFound(err):
		return http.StatusNotFound, "not found"
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "request cancelled"
	}
	h.cfg.Logger.Error("dashboard request failed", "method", r.Method, "path", r.URL.Path, logkey.Err, err)
	return http.StatusInternalServerError, "internal error"
}

func (h *Handler) style(w http.ResponseWriter, r *http.Request) {
	b, err := files.ReadFile("static/style.css")
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "private, max-age=300")
	if _, err := w.Write(b); err != nil {
		return // the client went away
	}
}
