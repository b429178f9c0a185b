// Package githubtest is a fake GitHub REST API for tests: an httptest
// server that answers with the real response examples of
// shared/data/github-api (GitHub's OpenAPI examples and octokit's recorded
// fixtures), with the fields a test cares about overridden.
//
// It behaves like GitHub where gilf depends on it: App JWTs are verified
// with the test's public key (RS256, iss, iat/exp window); installation
// tokens are minted, expire, are scoped to the repositories named when
// minting and are checked on every call; the tarball endpoint redirects
// to a separate codeload server with a one-time credential in the query;
// reviews and check runs that were posted are listed back; check runs are
// updated (PATCH merges status, conclusion and output, appends at most 50
// annotations per request, counting output.annotations_count); reviews
// are edited in place (PUT body) and dismissed (PUT …/dismissals), and
// the inline comments posted with one are kept (ReviewComments: a
// comment without a path, line or body fails the review with 422); the
// App webhook's delivery log (SetDeliveries) is listed with cursor pagination
// and redelivery requests are recorded (Redeliveries); GET /app describes
// the App (AppPermissions, AppEvents). Every request
// is recorded (method, path, JSON body) and faults can be injected per
// endpoint.
//
//	key, _ := rsa.GenerateKey(rand.Reader, 2048)
//	srv := githubtest.New(t, githubtest.Options{AppID: 42, PublicKey: &key.PublicKey})
//	// point the client at srv.URL, allow srv.CodeloadHost() for downloads
//	srv.Fail(githubtest.CreateReview, githubtest.Fault{Kind: githubtest.LandThenStatus, Status: 502})
//	... run ...
//	posted := srv.Posted() // POSTs with their JSON bodies
package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/shared"
)

// Endpoint names one REST operation (GitHub's operation ids).
type Endpoint string

const (
	CreateToken    Endpoint = "apps/create-installation-access-token"
	GetPull        Endpoint = "pulls/get"
	ListFiles      Endpoint = "pulls/list-files"
	GetContent     Endpoint = "repos/get-content"
	Tarball        Endpoint = "repos/download-tarball-archive"
	Codeload       Endpoint = "codeload"
	CreateReview   Endpoint = "pulls/create-review"
	ListReviews    Endpoint = "pulls/list-reviews"
	CreateCheckRun Endpoint = "checks/create"
	ListCheckRuns  Endpoint = "checks/list-for-ref"
	GetCheckRun    Endpoint = "checks/get"
	UpdateCheckRun Endpoint = "checks/update"
	UpdateReview   Endpoint = "pulls/update-review"
	DismissReview  Endpoint = "pulls/dismiss-review"
)

// FaultKind is what an injected fault does.
type FaultKind int

const (
	// Status answers Status (e.g. 502) with a basic-error body.
	Status FaultKind = iota
	// SecondaryRateLimit answers 403 with the secondary-rate-limit
	// documentation_url, and Retry-After when RetryAfter > 0.
	SecondaryRateLimit
	// PrimaryRateLimit answers 403 with x-ratelimit-remaining: 0 and
	// x-ratelimit-reset: Reset.
	PrimaryRateLimit
	// LandThenStatus performs the request (a POST lands) and then answers
	// Status as if the response was lost.
	LandThenStatus
	// Unauthorized answers 401 Bad credentials (like an expired token).
	Unauthorized
	// Validation answers the real 422 "Validation Failed" body recorded
	// in octokit's errors fixture.
	Validation
)

// Fault is injected on the next Times requests of an endpoint (1 when
// 0), after letting Skip requests through (Skip: 1 faults the second
// request, e.g. the second batch of annotations).
type Fault struct {
	Kind       FaultKind
	Status     int
	Times      int
	Skip       int
	RetryAfter time.Duration
	Reset      time.Time
	// Message replaces a Status fault's message (default: the status
	// text), e.g. "Resource not accessible by integration".
	Message string
}

// Options set the pull request the server serves. Zero fields take the
// value of the real example (pulls.get: octocat/Hello-World#1347, head
// 6dcb09b…, base master).
type Options struct {
	AppID     int64          // required
	PublicKey *rsa.PublicKey // required: verifies App JWTs
	// BasePath mounts the API, default "/api/v3" (GitHub Enterprise
	// Server's layout). Use "/" to serve at the root.
	BasePath       string
	InstallationID int64
	// OtherInstallations are more installations of the App that may mint
	// tokens for the same repository (to test what one installation's
	// state does to another's).
	OtherInstallations []int64
	Owner, Repo        string
	Number             int
	HeadSHA            string
	BaseRef            string
	Author             string
	Labels             []string
	Draft              bool
	// HeadRepoMissing serves head.repo as null (a deleted fork).
	HeadRepoMissing bool
	// Files are the changed file names; nil serves the example's list.
	Files []string
	// Patches are the unified diffs of Files by name; a file without one
	// gets the example's patch.
	Patches map[string]string
	// BaseFiles are files of the base branch by path (read at BaseRef;
	// any other ref is a 404). A path not listed is a 404.
	BaseFiles map[string][]byte
	// Tarball is served by codeload; nil serves the recorded octokit
	// get-archive tarball.
	Tarball []byte
	// BaseSHA is the pull request's base.sha (default: the example's).
	// BaseTarball is served at BaseSHA; nil answers 404 there (an
	// archive GitHub does not have), unless BaseSHA is also the head.
	BaseSHA     string
	BaseTarball []byte
	// Now is the server's clock (token expiry, JWT checks); default
	// time.Now.
	Now func() time.Time
	// TokenTTL is an installation token's lifetime (default 1 h).
	TokenTTL time.Duration
	// BotLogin is the author of posted reviews (default "gilf[bot]");
	// GET /app answers its slug (the login without "[bot]").
	BotLogin string
	// AppPermissions and AppEvents replace the example's permissions and
	// events in GET /app.
	AppPermissions map[string]string
	AppEvents      []string
}

// Request is one recorded request. Auth says how it authenticated
// ("jwt", "token", "none" or "invalid") — never the credential.
type Request struct {
	Endpoint Endpoint
	Method   string
	Path     string // without BasePath, e.g. /repos/octocat/Hello-World/pulls/1347
	Query    url.Values
	Accept   string
	Auth     string
	Body     map[string]any // the JSON body, when there is one
}

// Server is the fake API. URL is the API root to configure the client
// with (it ends in BasePath + "/").
type Server struct {
	URL         string
	CodeloadURL string

	t        testing.TB
	opts     Options
	api      *httptest.Server
	codeload *httptest.Server
	data     string

	mu           sync.Mutex
	requests     []Request
	faults       map[Endpoint][]Fault
	tokens       map[string]token
	minted       int
	downloads    map[string][]byte // one-time codeload credentials, with the archive each serves
	redirect     string            // tarball Location override
	reviews      []map[string]any
	dismissals   []Dismissal
	checkRuns    []*checkRun
	nextID       int64
	lastJWTTimes [2]time.Time
	hooks        hookDeliveries
	rateUsed     int // API requests so far, for X-RateLimit-Remaining

	// reviewComments are the inline comments posted with a review, by
	// review id (GitHub lists them apart from the review).
	reviewComments map[int64][]map[string]any
	// conv is the conversation's state (conversation.go).
	conv *conversation
}

// RateLimit is the primary rate limit every API answer reports, as
// GitHub's X-RateLimit-* headers: each request uses one.
const RateLimit = 5000

// rateLimited sets GitHub's rate-limit headers on every API answer but a
// fault's: X-RateLimit-Remaining counts down from RateLimit (a
// PrimaryRateLimit fault answers 0).
func (s *Server) rateLimited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.rateUsed++
		used := s.rateUsed
		s.mu.Unlock()
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(RateLimit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(RateLimit-used, 0)))
		h.Set("X-RateLimit-Used", strconv.Itoa(used))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(s.opts.Now().Add(time.Hour).Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
		next.ServeHTTP(w, r)
	})
}

type token struct {
	repos   []string
	perms   map[string]any
	expires time.Time
	revoked bool
}

// New starts the server and its codeload server; both stop when the test
// ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.AppID == 0 || opts.PublicKey == nil {
		t.Fatal("githubtest: Options.AppID and Options.PublicKey are required")
	}
	if opts.BasePath == "" {
		opts.BasePath = "/api/v3"
	}
	opts.BasePath = "/" + strings.Trim(opts.BasePath, "/")
	if opts.BasePath == "/" {
		opts.BasePath = ""
	}
	if opts.InstallationID == 0 {
		opts.InstallationID = 1
	}
	s := &Server{
		t:         t,
		opts:      opts,
		data:      shared.Data(t, "github-api"),
		faults:    make(map[Endpoint][]Fault),
		tokens:    make(map[string]token),
		downloads: make(map[string][]byte),
		nextID:    1000,
	}
	pr := s.example("pulls.get.response.200.default.json")
	head := pr["head"].(map[string]any)
	base := pr["base"].(map[string]any)
	if s.opts.Owner == "" {
		s.opts.Owner = base["repo"].(map[string]any)["owner"].(map[string]any)["login"].(string)
	}
	if s.opts.Repo == "" {
		s.opts.Repo = base["repo"].(map[string]any)["name"].(string)
	}
	if s.opts.Number == 0 {
		s.opts.Number = int(pr["number"].(float64))
	}
	if s.opts.HeadSHA == "" {
		s.opts.HeadSHA = head["sha"].(string)
	}
	if s.opts.BaseRef == "" {
		s.opts.BaseRef = base["ref"].(string)
	}
	if s.opts.BaseSHA == "" {
		s.opts.BaseSHA = base["sha"].(string)
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.opts.TokenTTL == 0 {
		s.opts.TokenTTL = time.Hour
	}
	if s.opts.BotLogin == "" {
		s.opts.BotLogin = "gilf[bot]"
	}
	if s.opts.Tarball == nil {
		b, err := os.ReadFile(filepath.Join(s.data, "octokit-fixtures", "get-archive.codeload-legacy.tar.gz"))
		if err != nil {
			t.Fatalf("githubtest: %v", err)
		}
		s.opts.Tarball = b
	}

	mux := http.NewServeMux()
	bp := s.opts.BasePath
	mux.HandleFunc("POST "+bp+"/app/installations/{id}/access_tokens", s.createToken)
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/pulls/{number}", s.repo(GetPull, s.getPull))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/pulls/{number}/files", s.repo(ListFiles, s.listFiles))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/contents/{path...}", s.repo(GetContent, s.getContent))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/tarball/{ref...}", s.repo(Tarball, s.tarball))
	mux.HandleFunc("POST "+bp+"/repos/{owner}/{repo}/pulls/{number}/reviews", s.repo(CreateReview, s.createReview))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/pulls/{number}/reviews", s.repo(ListReviews, s.listReviews))
	mux.HandleFunc("POST "+bp+"/repos/{owner}/{repo}/check-runs", s.repo(CreateCheckRun, s.createCheckRun))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/commits/{ref}/check-runs", s.repo(ListCheckRuns, s.listCheckRuns))
	mux.HandleFunc("GET "+bp+"/repos/{owner}/{repo}/check-runs/{id}", s.repo(GetCheckRun, s.getCheckRun))
	mux.HandleFunc("PATCH "+bp+"/repos/{owner}/{repo}/check-runs/{id}", s.repo(UpdateCheckRun, s.updateCheckRun))
	mux.HandleFunc("PUT "+bp+"/repos/{owner}/{repo}/pulls/{number}/reviews/{id}", s.repo(UpdateReview, s.updateReview))
	mux.HandleFunc("PUT "+bp+"/repos/{owner}/{repo}/pulls/{number}/reviews/{id}/dismissals", s.repo(DismissReview, s.dismissReview))
	mux.HandleFunc("GET "+bp+"/app/hook/deliveries", s.app(ListDeliveries, s.listDeliveries))
	mux.HandleFunc("POST "+bp+"/app/hook/deliveries/{id}/attempts", s.app(Redeliver, s.redeliver))
	mux.HandleFunc("GET "+bp+"/app", s.app(GetApp, s.getApp))
	s.conversationRoutes(mux, bp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, "", "none", nil)
		s.basicError(w, http.StatusNotFound, "Not Found")
	})
	s.api = httptest.NewServer(s.rateLimited(mux))
	t.Cleanup(s.api.Close)
	s.codeload = httptest.NewServer(http.HandlerFunc(s.serveCodeload))
	t.Cleanup(s.codeload.Close)
	s.URL = s.api.URL + bp + "/"
	s.CodeloadURL = s.codeload.URL
	return s
}

// Host is the API server's host:port.
func (s *Server) Host() string { return strings.TrimPrefix(s.api.URL, "http://") }

// CodeloadHost is the codeload server's host:port, to allow as a
// download host.
func (s *Server) CodeloadHost() string { return strings.TrimPrefix(s.codeload.URL, "http://") }

// Fail queues a fault for the next requests of ep.
func (s *Server) Fail(ep Endpoint, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults[ep] = append(s.faults[ep], f)
}

// SetHeadSHA moves the pull request's head (a new push).
func (s *Server) SetHeadSHA(sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.HeadSHA = sha
}

// SetTarball replaces the archive codeload serves.
func (s *Server) SetTarball(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Tarball = b
}

// SetBaseTarball replaces the archive served at the base sha.
func (s *Server) SetBaseTarball(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.BaseTarball = b
}

// TarballRequests counts the tarball requests for ref so far (the API's,
// each one download).
func (s *Server) TarballRequests(ref string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Endpoint == Tarball && strings.HasSuffix(r.Path, "/tarball/"+ref) {
			n++
		}
	}
	return n
}

// RedirectTarball makes the tarball endpoint redirect to location
// instead of the codeload server.
func (s *Server) RedirectTarball(location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redirect = location
}

// ExpireTokens revokes every installation token minted so far: the next
// call with one gets 401, as after expiry.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.tokens {
		v.revoked = true
		s.tokens[k] = v
	}
}

// TokensMinted counts successful installation-token mints.
func (s *Server) TokensMinted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.minted
}

// DownloadCredentials returns the one-time credentials put in codeload
// redirect URLs, so a test can check they never reach a log.
func (s *Server) DownloadCredentials() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.downloads {
		out = append(out, k)
	}
	return out
}

// Tokens returns every installation token minted, so a test can check
// they never reach a log.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.tokens {
		out = append(out, k)
	}
	return out
}

// Requests returns every request so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Posted returns the POST requests so far, in order.
func (s *Server) Posted() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodPost {
			out = append(out, r)
		}
	}
	return out
}

// Count returns how many requests ep received.
func (s *Server) Count(ep Endpoint) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Endpoint == ep {
			n++
		}
	}
	return n
}

// example loads a JSON example from shared/data/github-api.
func (s *Server) example(name string) map[string]any {
	var m map[string]any
	s.load(name, &m)
	return m
}

func (s *Server) load(name string, v any) {
	b, err := os.ReadFile(filepath.Join(s.data, name))
	if err != nil {
		s.t.Errorf("githubtest: %v", err)
		return
	}
	if err := json.Unmarshal(b, v); err != nil {
		s.t.Errorf("githubtest: %s: %v", name, err)
	}
}

// record stores a request and returns its decoded JSON body.
func (s *Server) record(r *http.Request, ep Endpoint, auth string, body map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{
		Endpoint: ep, Method: r.Method, Path: strings.TrimPrefix(r.URL.Path, s.opts.BasePath),
		Query: r.URL.Query(), Accept: r.Header.Get("Accept"), Auth: auth, Body: body,
	})
}

func readBody(r *http.Request) (map[string]any, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil || len(b) == 0 {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// takeFault pops the next fault for ep, if any.
func (s *Server) takeFault(ep Endpoint) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[ep]
	if len(q) == 0 {
		return Fault{}, false
	}
	f := q[0]
	if f.Skip > 0 {
		q[0].Skip--
		return Fault{}, false
	}
	f.Times--
	if f.Times <= 0 {
		s.faults[ep] = q[1:]
	} else {
		q[0] = f
	}
	return f, true
}

// writeFault answers a fault. It reports false for LandThenStatus, which
// is answered after the handler ran.
func (s *Server) writeFault(w http.ResponseWriter, f Fault) {
	// A fault answers with only its own headers (PrimaryRateLimit sets
	// the rate limit's).
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "X-RateLimit-Resource"} {
		w.Header().Del(h)
	}
	switch f.Kind {
	case Status, LandThenStatus:
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		}
		msg := f.Message
		if msg == "" {
			msg = http.StatusText(f.Status)
		}
		s.basicError(w, f.Status, msg)
	case Unauthorized:
		s.basicError(w, http.StatusUnauthorized, "Bad credentials")
	case SecondaryRateLimit:
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		}
		writeJSON(w, http.StatusForbidden, map[string]any{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
		})
	case PrimaryRateLimit:
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Used", "5000")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(f.Reset.Unix(), 10))
		w.Header().Set("X-RateLimit-Resource", "core")
		writeJSON(w, http.StatusForbidden, map[string]any{
			"message":           "API rate limit exceeded for installation ID " + strconv.FormatInt(s.opts.InstallationID, 10) + ".",
			"documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting",
		})
	case Validation:
		var fx []struct {
			Status   int            `json:"status"`
			Response map[string]any `json:"response"`
		}
		s.load("octokit-fixtures/errors.normalized-fixture.json", &fx)
		writeJSON(w, fx[0].Status, fx[0].Response)
	}
}

func (s *Server) basicError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(code)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	if _, err := w.Write(b); err != nil {
		return // the client went away; nothing to do
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}
