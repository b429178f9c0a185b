package e2btest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/executors/internal/standin"
)

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") != s.opts.APIKey {
		writeJSON(w, http.StatusUnauthorized, errorBody(401, "Invalid API key, it must start with 'e2b_' prefix and be valid"))
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/sandboxes")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		s.create(w, r)
	case strings.HasPrefix(rest, "/"):
		id, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
		switch {
		case sub == "" && r.Method == http.MethodDelete:
			s.mu.Lock()
			ok := s.killLocked(id)
			if ok {
				s.killed++
			}
			s.mu.Unlock()
			if !ok {
				writeJSON(w, http.StatusNotFound, errorBody(404, fmt.Sprintf("sandbox %q not found", id)))
				return
			}
			w.WriteHeader(http.StatusNoContent)
		case sub == "" && r.Method == http.MethodGet:
			s.detail(w, id)
		case sub == "network" && r.Method == http.MethodPut:
			s.network(w, r, id)
		default:
			writeJSON(w, http.StatusNotFound, errorBody(404, "no route"))
		}
	default:
		writeJSON(w, http.StatusMethodNotAllowed, errorBody(405, "method not allowed"))
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "unreadable body"))
		return
	}
	rec := CreateRecord{}
	var req struct {
		TemplateID string `json:"templateID"`
		Timeout    *int64 `json:"timeout"`
		Secure     bool   `json:"secure"`
	}
	if err := json.Unmarshal(body, &rec.Fields); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "invalid JSON: "+err.Error()))
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "invalid request: "+err.Error()))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := len(s.creates)
	s.creates = append(s.creates, rec)
	switch {
	case s.fault.CreateStatus != 0:
		writeJSON(w, s.fault.CreateStatus, map[string]any{"code": s.fault.CreateStatus, "message": "injected failure", "error_code": "sandbox_create_failed"})
		return
	case req.TemplateID == "":
		writeJSON(w, http.StatusBadRequest, errorBody(400, "templateID is required"))
		return
	case s.opts.MaxConcurrent > 0 && len(s.sandboxes) >= s.opts.MaxConcurrent:
		writeJSON(w, http.StatusTooManyRequests, errorBody(429, fmt.Sprintf("you have reached the maximum number of concurrent E2B sandboxes (%d)", s.opts.MaxConcurrent)))
		return
	}
	timeout := s.opts.DefaultTimeout
	if req.Timeout != nil {
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	if timeout > MaxSandboxTimeout || timeout < 0 {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "Timeout cannot be greater than 24 hours"))
		return
	}
	sb := &sandbox{id: "i" + randomHex(10), procs: map[int]*proc{}, meta: rec.Fields["metadata"]}
	if req.Secure {
		sb.token = randomHex(16)
	}
	sb.dir = filepath.Join(s.root, sb.id)
	if err := makeDirs(sb.dir); err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody(500, err.Error()))
		return
	}
	id := sb.id
	sb.timer = time.AfterFunc(timeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.killLocked(id) {
			s.expired++
		}
	})
	s.sandboxes[id] = sb
	s.creates[idx].SandboxID = id
	var domain any
	if s.opts.Domain != "" {
		domain = s.opts.Domain
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"templateID":         req.TemplateID,
		"sandboxID":          id,
		"alias":              req.TemplateID,
		"clientID":           "6532622b",
		"envdVersion":        EnvdVersion,
		"envdAccessToken":    sb.token,
		"trafficAccessToken": nil,
		"domain":             domain,
	})
}

// makeDirs makes a new sandbox's home and /tmp under dir.
func makeDirs(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(Home)), 0o755); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(dir, "tmp"), 0o1777)
}

func (s *Server) detail(w http.ResponseWriter, id string) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, errorBody(404, fmt.Sprintf("sandbox %q not found", id)))
		return
	}
	now := time.Now().UTC()
	writeJSON(w, http.StatusOK, map[string]any{
		"templateID": "base", "sandboxID": sb.id, "clientID": "6532622b",
		"startedAt": now.Format(time.RFC3339), "endAt": now.Add(time.Hour).Format(time.RFC3339),
		"cpuCount": s.opts.CPUCount, "memoryMB": s.opts.MemoryMB, "diskSizeMB": 1024,
		"state": "running", "envdVersion": EnvdVersion,
	})
}

func (s *Server) network(w http.ResponseWriter, r *http.Request, id string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || !json.Valid(body) {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "invalid JSON"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sandboxes[id]; !ok {
		writeJSON(w, http.StatusNotFound, errorBody(404, fmt.Sprintf("sandbox %q not found", id)))
		return
	}
	s.networks = append(s.networks, NetworkRecord{SandboxID: id, Body: body})
	w.WriteHeader(http.StatusNoContent)
}

// killLocked removes the sandbox and kills its processes; s.mu is held.
func (s *Server) killLocked(id string) bool {
	sb, ok := s.sandboxes[id]
	if !ok {
		return false
	}
	delete(s.sandboxes, id)
	sb.timer.Stop()
	for _, p := range sb.procs {
		p.gone.Store(true)
		standin.KillGroup(p.pgid, syscall.SIGKILL)
	}
	return true
}
