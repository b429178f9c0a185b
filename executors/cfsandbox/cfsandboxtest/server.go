// Package cfsandboxtest is a local stand-in for Cloudflare's sandbox
// bridge Worker (cloudflare/sandbox-sdk, packages/sandbox/src/bridge), for
// tests. It speaks the bridge's HTTP API under /v1: POST /v1/sandbox,
// PUT /v1/sandbox/{id}/file/<path>, POST /v1/sandbox/{id}/exec answering
// an SSE stream (stdout/stderr events with base64 data, then exit
// {"exit_code":N} or error {"error","code"}), DELETE /v1/sandbox/{id},
// with bearer-token auth and the bridge's checks (ID format, /workspace
// confinement, 32 MiB writes). Files are really stored, in a directory per
// sandbox standing for /workspace; commands really run, as the bridge
// does: argv shell-quoted into one bash command line.
package cfsandboxtest

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors/internal/standin"
)

// Limits of the bridge.
const (
	// MaxWriteBytes is the bridge's ceiling on one file write.
	MaxWriteBytes = 32 << 20
	// ChunkBytes is the largest output chunk sent in one event.
	ChunkBytes = 16 << 10
	// ProcessPath is the PATH commands get.
	ProcessPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// FaultKind is a failure injected into exec streams.
type FaultKind int

const (
	FaultNone FaultKind = iota
	// FaultCutStream drops the connection after the first output chunk.
	FaultCutStream
	// FaultNoExit ends the stream cleanly without an exit event.
	FaultNoExit
	// FaultErrorEvent ends the stream with an error event
	// (exec_transport_error) instead of the exit.
	FaultErrorEvent
	// FaultIgnoreTimeout does not stop the command at timeout_ms.
	FaultIgnoreTimeout
)

// Fault injects failures.
type Fault struct {
	// CreateStatus, when set, answers every create with this status.
	CreateStatus int
	// ExecCall is the 1-based index, per sandbox, of the exec the stream
	// fault applies to (exec 1 prepares the checkout); 0 for all.
	ExecCall int
	Stream   FaultKind
}

// Options configure the stand-in.
type Options struct {
	// Token is the bridge's SANDBOX_API_KEY (required).
	Token string
	// MaxInstances, when set, answers 503 capacity_exceeded when a new
	// sandbox would exceed it, as the bridge's pool does.
	MaxInstances int
	// Path replaces ProcessPath as the PATH of commands.
	Path string
}

// Server is the stand-in; its methods are safe for concurrent use.
type Server struct {
	URL  string
	opts Options
	srv  *httptest.Server
	root string

	mu        sync.Mutex
	created   map[string]bool
	live      map[string]*sandbox // sandboxes with a container
	procs     map[*proc]struct{}
	fault     Fault
	deletes   int
	closed    bool
	problems  []string
	procsDone sync.WaitGroup
}

type sandbox struct {
	id    string
	dir   string // stands for /workspace
	execs int
	procs map[*proc]struct{}
}

type proc struct {
	pgid     int
	events   chan procEvent
	timedOut atomic.Bool
	gone     atomic.Bool
}

type procEvent struct {
	stream string
	data   []byte
	state  *os.ProcessState
}

// New starts a stand-in and registers its Close with t.Cleanup.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Token == "" {
		t.Fatal("cfsandboxtest: Options.Token is required")
	}
	if opts.Path == "" {
		opts.Path = ProcessPath
	}
	s := &Server{opts: opts, root: t.TempDir(), created: map[string]bool{}, live: map[string]*sandbox{}, procs: map[*proc]struct{}{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close destroys every sandbox and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for id := range s.live {
		s.destroyLocked(id)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.procsDone.Wait()
	s.srv.Close()
}

// SetFault replaces the injected faults.
func (s *Server) SetFault(f Fault) { s.mu.Lock(); defer s.mu.Unlock(); s.fault = f }

// Live is how many sandboxes have a container and were not destroyed.
func (s *Server) Live() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.live) }

// Running is how many commands have not been reaped.
func (s *Server) Running() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.procs) }

// Created is how many sandbox IDs were handed out; Deletes how many
// DELETEs were answered.
func (s *Server) Created() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.created) }
func (s *Server) Deletes() int { s.mu.Lock(); defer s.mu.Unlock(); return s.deletes }

// Problems lists protocol violations seen from the client.
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// CheckClean fails t unless no sandbox is live, no command runs (waiting
// up to bound), every created sandbox was deleted, and no protocol
// problem was seen.
func (s *Server) CheckClean(t testing.TB, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for (s.Live() > 0 || s.Running() > 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.Live(); n != 0 {
		t.Errorf("cfsandboxtest: %d sandbox(es) left alive", n)
	}
	if n := s.Running(); n != 0 {
		t.Errorf("cfsandboxtest: %d command(s) left running", n)
	}
	if c, d := s.Created(), s.Deletes(); d < c {
		t.Errorf("cfsandboxtest: %d sandbox(es) created, %d deleted", c, d)
	}
	for _, p := range s.Problems() {
		t.Errorf("cfsandboxtest: protocol problem: %s", p)
	}
}

var idPattern = regexp.MustCompile(`^[a-z2-7]{1,128}$`)

func errorJSON(w http.ResponseWriter, msg, code string, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code}); err != nil {
		return // the client went away
	}
}

func okJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/sandbox") {
		errorJSON(w, "not found", "not_found", http.StatusNotFound)
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(strings.ToLower(auth), "bearer ") || auth[7:] != s.opts.Token {
		errorJSON(w, "Unauthorized", "unauthorized", http.StatusUnauthorized)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/sandbox")
	if rest == "" && r.Method == http.MethodPost {
		s.create(w)
		return
	}
	id, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	if !idPattern.MatchString(id) {
		errorJSON(w, "Invalid sandbox ID format", "invalid_request", http.StatusBadRequest)
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodDelete:
		s.mu.Lock()
		s.deletes++
		s.destroyLocked(id)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	case sub == "exec" && r.Method == http.MethodPost:
	case strings.HasPrefix(sub, "file/") && r.Method == http.MethodPut:
	default:
		errorJSON(w, "not found", "not_found", http.StatusNotFound)
		return
	}
	sb, err := s.container(id)
	if err != nil {
		errorJSON(w, err.Error(), "capacity_exceeded", http.StatusServiceUnavailable)
		return
	}
	if sub == "exec" {
		s.exec(w, r, sb)
		return
	}
	s.write(w, r, sb, strings.TrimPrefix(sub, "file/"))
}

func (s *Server) create(w http.ResponseWriter) {
	s.mu.Lock()
	f := s.fault
	s.mu.Unlock()
	if f.CreateStatus != 0 {
		errorJSON(w, "injected failure", "injected", f.CreateStatus)
		return
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		errorJSON(w, err.Error(), "internal", http.StatusInternalServerError)
		return
	}
	id := strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(b), "="))
	s.mu.Lock()
	s.created[id] = true
	s.mu.Unlock()
	okJSON(w, map[string]string{"id": id})
}

// container gives the sandbox its container on first use, as the bridge's
// pool does.
func (s *Server) container(id string) (*sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.live[id]; ok {
		return sb, nil
	}
	if s.opts.MaxInstances > 0 && len(s.live) >= s.opts.MaxInstances {
		return nil, errors.New("instance limit reached")
	}
	sb := &sandbox{id: id, dir: filepath.Join(s.root, id, "workspace"), procs: map[*proc]struct{}{}}
	if err := os.MkdirAll(sb.dir, 0o755); err != nil {
		return nil, err
	}
	s.live[id] = sb
	return sb, nil
}

func (s *Server) destroyLocked(id string) {
	sb, ok := s.live[id]
	if !ok {
		return
	}
	delete(s.live, id)
	for p := range sb.procs {
		p.gone.Store(true)
		standin.KillGroup(p.pgid, syscall.SIGKILL)
	}
}

// resolve is the bridge's resolveWorkspacePath: normalise, and require
// /workspace or below. It returns the host path.
func resolve(sb *sandbox, p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		p = "/workspace/" + p
	}
	var parts []string
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(parts) > 0 {
				parts = parts[:len(parts)-1]
			}
		default:
			parts = append(parts, seg)
		}
	}
	if len(parts) == 0 || parts[0] != "workspace" {
		return "", false
	}
	return filepath.Join(append([]string{sb.dir}, parts[1:]...)...), true
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, sb *sandbox, rel string) {
	if rel == "" {
		errorJSON(w, "file path must not be empty", "invalid_request", http.StatusBadRequest)
		return
	}
	hp, ok := resolve(sb, "/"+rel)
	if !ok {
		errorJSON(w, "path must resolve to a location within /workspace", "invalid_request", http.StatusForbidden)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxWriteBytes+1))
	if err != nil {
		errorJSON(w, err.Error(), "invalid_request", http.StatusBadRequest)
		return
	}
	if len(body) > MaxWriteBytes {
		errorJSON(w, fmt.Sprintf("payload too large: exceeds the %d-byte limit", MaxWriteBytes), "payload_too_large", http.StatusRequestEntityTooLarge)
		return
	}
	if err = os.MkdirAll(filepath.Dir(hp), 0o755); err == nil {
		err = os.WriteFile(hp, body, 0o644)
	}
	if err != nil {
		errorJSON(w, "write failed: "+err.Error(), "workspace_archive_write_error", http.StatusBadGateway)
		return
	}
	okJSON(w, map[string]bool{"ok": true})
}

var safeWord = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./-]+$`)

// shellQuote is the bridge's quoting of one argv token.
func shellQuote(arg string) string {
	if safeWord.MatchString(arg) {
		return arg
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return "$'" + r.Replace(arg) + "'"
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Argv      []string `json:"argv"`
		TimeoutMs *float64 `json:"timeout_ms"`
		Cwd       *string  `json:"cwd"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		errorJSON(w, "Invalid JSON body", "invalid_request", http.StatusBadRequest)
		return
	}
	if len(req.Argv) == 0 {
		errorJSON(w, "argv must be a non-empty array", "invalid_request", http.StatusBadRequest)
		return
	}
	dir := sb.dir
	if req.Cwd != nil {
		hp, ok := resolve(sb, *req.Cwd)
		if !ok {
			errorJSON(w, "cwd must resolve to a location within /workspace", "invalid_request", http.StatusForbidden)
			return
		}
		dir = hp
	}
	if req.TimeoutMs == nil {
		s.mu.Lock()
		s.problems = append(s.problems, "exec without timeout_ms")
		s.mu.Unlock()
	}
	s.mu.Lock()
	sb.execs++
	n := sb.execs
	f := s.fault
	s.mu.Unlock()
	kind := FaultNone
	if f.ExecCall == 0 || f.ExecCall == n {
		kind = f.Stream
	}
	quoted := make([]string, len(req.Argv))
	for i, a := range req.Argv {
		quoted[i] = shellQuote(a)
	}
	var deadline time.Duration
	if req.TimeoutMs != nil && *req.TimeoutMs > 0 && kind != FaultIgnoreTimeout {
		deadline = time.Duration(*req.TimeoutMs * float64(time.Millisecond))
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w, flusher: w.(http.Flusher)}
	sse.flusher.Flush()
	p, err := s.start(sb, []string{"/bin/bash", "-c", strings.Join(quoted, " ")}, dir, deadline)
	if err != nil {
		sse.send("error", fmt.Sprintf(`{"error":%q,"code":"exec_error"}`, err.Error()))
		return
	}
	streamExec(sse, p, kind)
}

// sseWriter writes server-sent events; after a failed write it writes
// nothing more.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	failed  bool
}

func (s *sseWriter) send(event, data string) {
	if s.failed {
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: %s\n", event)
	for _, line := range strings.Split(data, "\n") {
		fmt.Fprintf(&b, "data: %s\n", line)
	}
	b.WriteString("\n")
	if _, err := s.w.Write(b.Bytes()); err != nil {
		s.failed = true
		return
	}
	s.flusher.Flush()
}

// streamExec sends the process's output and its exit as the exec's
// events, with the injected fault kind.
func streamExec(sse *sseWriter, p *proc, kind FaultKind) {
	for ev := range p.events {
		if ev.state == nil {
			sse.send(ev.stream, base64.StdEncoding.EncodeToString(ev.data))
			if kind == FaultCutStream || sse.failed {
				go func() {
					for range p.events {
					}
				}()
				if kind == FaultCutStream {
					panic(http.ErrAbortHandler)
				}
				return
			}
			continue
		}
		switch {
		case p.gone.Load() || kind == FaultCutStream:
			panic(http.ErrAbortHandler)
		case kind == FaultNoExit:
		case kind == FaultErrorEvent:
			sse.send("error", `{"error":"exec failed: injected","code":"exec_transport_error"}`)
		default:
			code := ev.state.ExitCode() // -1 when killed by a signal: code ?? -1
			sse.send("exit", fmt.Sprintf(`{"exit_code":%d}`, code))
		}
	}
}

func (s *Server) start(sb *sandbox, argv []string, dir string, deadline time.Duration) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + s.opts.Path, "HOME=" + sb.dir, "LANG=C.UTF-8"}
	// Started under the lock, so Close (which sets closed under it before
	// waiting) never races a new process.
	s.mu.Lock()
	var gone error
	if _, alive := s.live[sb.id]; !alive || s.closed {
		gone = errors.New("the sandbox is gone")
	}
	outR, errR, err := standin.Start(cmd, gone)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	p := &proc{pgid: cmd.Process.Pid, events: make(chan procEvent, 16)}
	sb.procs[p] = struct{}{}
	s.procs[p] = struct{}{}
	s.procsDone.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.procsDone.Done()
		waitErr := standin.Watch{
			Cmd: cmd, PGID: p.pgid, Stdout: outR, Stderr: errR, ChunkBytes: ChunkBytes,
			Deadline: deadline, TimedOut: func() { p.timedOut.Store(true) },
			Send: func(stream string, data []byte) { p.events <- procEvent{stream: stream, data: data} },
		}.Wait()
		var ee *exec.ExitError
		if waitErr != nil && !errors.As(waitErr, &ee) {
			p.gone.Store(true)
		}
		p.events <- procEvent{state: cmd.ProcessState}
		close(p.events)
		s.mu.Lock()
		delete(sb.procs, p)
		delete(s.procs, p)
		s.mu.Unlock()
	}()
	return p, nil
}
