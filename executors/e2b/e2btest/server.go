// Package e2btest is a local stand-in for E2B, for tests: one HTTP server
// that speaks E2B's published wire format for the management API
// (POST/GET/DELETE /sandboxes, PUT …/network) and for envd (multipart
// POST /files, process.Process/Start as a Connect server stream,
// process.Process/SendSignal). Files are really stored, in a directory per
// sandbox; processes are really run, as child processes, and their output
// streamed as Connect envelopes. It keeps E2B's behaviours that bite: a
// sandbox created without a timeout dies after 15 s, exitCode is omitted
// when 0, envd answers 401 before any framing, a client disconnect does
// not stop a process, and faults can be injected (429 on create, a stream
// cut mid-way, a truncated envelope, no end event).
package e2btest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults of the stand-in, E2B's where E2B has one.
const (
	// DefaultSandboxTimeout is E2B's default sandbox lifetime when the
	// create request has no timeout.
	DefaultSandboxTimeout = 15 * time.Second
	// MaxSandboxTimeout is the longest lifetime a create may ask for.
	MaxSandboxTimeout = 24 * time.Hour
	// EnvdVersion is reported for every sandbox.
	EnvdVersion = "0.6.13"
	// ChunkBytes is envd's largest output chunk.
	ChunkBytes = 32 << 10
	// MaxRequestFrameBytes bounds the Start request envelope.
	MaxRequestFrameBytes = 1 << 20
	// ProcessPath is the PATH processes get.
	ProcessPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// Home is the sandbox user's home; files and working directories must
	// be under it or under /tmp.
	Home = "/home/user"
)

// Options configure the stand-in.
type Options struct {
	// APIKey is the only key the API accepts (required).
	APIKey string
	// Domain is returned in create responses (null when empty) and is the
	// suffix of host-routed envd URLs, 49983-<id>.<Domain>.
	Domain string
	// DefaultTimeout replaces DefaultSandboxTimeout when set.
	DefaultTimeout time.Duration
	// MaxConcurrent, when set, answers 429 to a create beyond that many
	// live sandboxes, as E2B's team limit does.
	MaxConcurrent int
	// CPUCount and MemoryMB are reported by GET /sandboxes/{id}
	// (2 and 512 when zero).
	CPUCount int
	MemoryMB int
	// TLS serves https (needed for host routing).
	TLS bool
	// Path replaces ProcessPath as the PATH of processes (to stand for a
	// template that lacks a tool).
	Path string
}

// FaultKind is a failure the stand-in injects into one process stream.
type FaultKind int

const (
	FaultNone FaultKind = iota
	// FaultCutStream drops the connection after the start event and the
	// first output chunk, with no end-of-stream frame. The process keeps
	// running, as it does in envd.
	FaultCutStream
	// FaultTruncatedEnvelope sends an envelope header promising more
	// bytes than follow, then drops the connection.
	FaultTruncatedEnvelope
	// FaultNoEndEvent ends a clean stream without the end event.
	FaultNoEndEvent
	// FaultUnauthorized answers 401 JSON before any framing, as envd's
	// auth middleware does.
	FaultUnauthorized
	// FaultEndStreamError ends the stream with a Connect error (Fault.Code)
	// and no end event.
	FaultEndStreamError
	// FaultIgnoreDeadline does not kill the process at Connect-Timeout-Ms.
	FaultIgnoreDeadline
)

// Fault injects failures.
type Fault struct {
	// CreateStatus, when set, answers every create with this status and
	// E2B's error body.
	CreateStatus int
	// StartCall is the 1-based index, per sandbox, of the Start call the
	// stream fault applies to (call 1 prepares the checkout); 0 for all.
	StartCall int
	Stream    FaultKind
	// Code is the Connect code of FaultEndStreamError.
	Code string
}

// CreateRecord is one create request as received.
type CreateRecord struct {
	// Fields are the request's top-level JSON fields, raw.
	Fields    map[string]json.RawMessage
	SandboxID string // empty when the create was refused
}

// Has reports whether the request carried the field.
func (c CreateRecord) Has(field string) bool { _, ok := c.Fields[field]; return ok }

// NetworkRecord is one PUT /sandboxes/{id}/network.
type NetworkRecord struct {
	SandboxID string
	Body      json.RawMessage
}

// Server is the stand-in. Its methods are safe for concurrent use.
type Server struct {
	// URL serves the API, and envd with header routing.
	URL  string
	opts Options
	srv  *httptest.Server
	root string

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	procs     map[*proc]struct{}
	creates   []CreateRecord
	networks  []NetworkRecord
	problems  []string
	fault     Fault
	killed    int
	expired   int
	closed    bool
	procsDone sync.WaitGroup
}

type sandbox struct {
	id     string
	token  string
	dir    string // the sandbox's filesystem root on the host
	timer  *time.Timer
	starts int
	procs  map[int]*proc // by pid
	meta   json.RawMessage
}

// New starts a stand-in and registers its Close with t.Cleanup.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.APIKey == "" {
		t.Fatal("e2btest: Options.APIKey is required")
	}
	if opts.DefaultTimeout == 0 {
		opts.DefaultTimeout = DefaultSandboxTimeout
	}
	if opts.Path == "" {
		opts.Path = ProcessPath
	}
	if opts.CPUCount == 0 {
		opts.CPUCount = 2
	}
	if opts.MemoryMB == 0 {
		opts.MemoryMB = 512
	}
	s := &Server{
		opts:      opts,
		root:      t.TempDir(),
		sandboxes: map[string]*sandbox{},
		procs:     map[*proc]struct{}{},
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if opts.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close kills every sandbox and process and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for id := range s.sandboxes {
		s.killLocked(id)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.procsDone.Wait()
	s.srv.Close()
}

// Client returns an HTTP client that reaches this server whatever host a
// URL names (so host-routed envd URLs work) and trusts its certificate.
func (s *Server) Client() *http.Client {
	addr := s.srv.Listener.Addr().String()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	if s.opts.TLS {
		base := s.srv.Client().Transport.(*http.Transport)
		tr.TLSClientConfig = &tls.Config{RootCAs: base.TLSClientConfig.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}
}

// SetFault replaces the injected faults.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// Live is how many sandboxes are alive.
func (s *Server) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sandboxes)
}

// Running is how many processes have not yet been reaped.
func (s *Server) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs)
}

// Killed is how many sandboxes were deleted through the API; Expired how
// many died at their timeout.
func (s *Server) Killed() int  { s.mu.Lock(); defer s.mu.Unlock(); return s.killed }
func (s *Server) Expired() int { s.mu.Lock(); defer s.mu.Unlock(); return s.expired }

// Creates returns every create request received.
func (s *Server) Creates() []CreateRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CreateRecord(nil), s.creates...)
}

// NetworkUpdates returns every network update received.
func (s *Server) NetworkUpdates() []NetworkRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]NetworkRecord(nil), s.networks...)
}

// Problems lists protocol violations the stand-in saw from its client
// (the API key sent to envd, a missing Connect header, …).
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

func (s *Server) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// CheckClean fails t unless every sandbox was deleted, every process
// reaped (waiting up to bound), and no protocol problem was seen.
func (s *Server) CheckClean(t testing.TB, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for (s.Live() > 0 || s.Running() > 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.Live(); n != 0 {
		t.Errorf("e2btest: %d sandbox(es) left alive", n)
	}
	if n := s.Running(); n != 0 {
		t.Errorf("e2btest: %d process(es) left running", n)
	}
	for _, p := range s.Problems() {
		t.Errorf("e2btest: protocol problem: %s", p)
	}
}

var hostRouted = regexp.MustCompile(`^49983-([A-Za-z0-9-]+)\.(.+)$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	hostID := ""
	if m := hostRouted.FindStringSubmatch(host); m != nil {
		if m[2] != s.opts.Domain {
			writeJSON(w, http.StatusBadGateway, map[string]any{"code": 502, "message": "unknown domain " + m[2]})
			return
		}
		hostID = m[1]
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/sandboxes") && hostID == "":
		s.serveAPI(w, r)
	case r.URL.Path == "/files" || strings.HasPrefix(r.URL.Path, "/process.Process/"):
		s.serveEnvd(w, r, hostID)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": "no route " + r.URL.Path})
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the client went away
	}
}

func errorBody(code int, msg string) map[string]any {
	return map[string]any{"code": code, "message": msg}
}

// hostPath maps an absolute sandbox path to the host, or reports that it
// is outside what the stand-in's sandbox user may touch.
func (sb *sandbox) hostPath(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		p = path.Join(Home, p)
	}
	p = path.Clean(p)
	if p != Home && !strings.HasPrefix(p, Home+"/") && p != "/tmp" && !strings.HasPrefix(p, "/tmp/") {
		return "", false
	}
	return filepath.Join(sb.dir, filepath.FromSlash(p)), true
}
