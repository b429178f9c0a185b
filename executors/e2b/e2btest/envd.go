package e2btest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors/internal/standin"
)

func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, hostID string) {
	if r.Header.Get("X-API-Key") != "" {
		s.problem("the API key was sent to envd (%s)", r.URL.Path)
	}
	hdrID := r.Header.Get("E2b-Sandbox-Id")
	id := hostID
	switch {
	case id == "" && (hdrID == "" || r.Header.Get("E2b-Sandbox-Port") == ""):
		http.Error(w, "Missing header: E2b-Sandbox-Id or E2b-Sandbox-Port", http.StatusBadRequest)
		return
	case id == "":
		id = hdrID
	case hdrID != "" && hdrID != hostID:
		s.problem("host names sandbox %s but E2b-Sandbox-Id names %s", hostID, hdrID)
		http.Error(w, "sandbox id mismatch", http.StatusBadRequest)
		return
	}
	if port := r.Header.Get("E2b-Sandbox-Port"); port != "" && port != "49983" {
		http.Error(w, "port "+port+" is closed", http.StatusBadGateway)
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[id]
	s.mu.Unlock()
	if sb == nil {
		http.Error(w, "The sandbox was not found", http.StatusBadGateway)
		return
	}
	if sb.token != "" && r.Header.Get("X-Access-Token") != sb.token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "unauthorized access, please provide a valid access token or method signing if supported", "code": 401})
		return
	}
	switch r.URL.Path {
	case "/files":
		s.files(w, r, sb)
	case "/process.Process/Start":
		s.start(w, r, sb)
	case "/process.Process/SendSignal":
		s.signal(w, r, sb)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"code": "unimplemented", "message": r.URL.Path + " is not implemented"})
	}
}

// written is envd's EntryInfo for an uploaded file.
type written struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// storeFile writes body to target in the sandbox's file system.
func storeFile(sb *sandbox, target string, body io.Reader) (written, error) {
	hp, ok := sb.hostPath(target)
	if !ok {
		return written{}, fmt.Errorf("path %q is outside the sandbox user's reach", target)
	}
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		return written{}, err
	}
	f, err := os.Create(hp)
	if err != nil {
		return written{}, err
	}
	_, cerr := io.Copy(f, body)
	if err := f.Close(); cerr == nil {
		cerr = err
	}
	if cerr != nil {
		return written{}, cerr
	}
	return written{Path: path.Clean(target), Name: path.Base(target), Type: "file"}, nil
}

func knownUser(u string) bool { return u == "" || u == "user" || u == "root" }

func (s *Server) files(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, errorBody(405, "only upload is implemented"))
		return
	}
	q := r.URL.Query()
	if !knownUser(q.Get("username")) {
		writeJSON(w, http.StatusUnauthorized, errorBody(401, "invalid user "+q.Get("username")))
		return
	}
	var out []written
	store := func(target string, body io.Reader) error {
		wr, err := storeFile(sb, target, body)
		if err == nil {
			out = append(out, wr)
		}
		return err
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "bad content type"))
		return
	}
	switch mt {
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody(400, err.Error()))
			return
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeJSON(w, http.StatusBadRequest, errorBody(400, err.Error()))
				return
			}
			if part.FormName() != "file" {
				continue
			}
			target := q.Get("path")
			if target == "" {
				target = part.FileName()
			}
			if err := store(target, part); err != nil {
				writeJSON(w, http.StatusBadRequest, errorBody(400, err.Error()))
				return
			}
		}
	case "application/octet-stream":
		if q.Get("path") == "" {
			writeJSON(w, http.StatusBadRequest, errorBody(400, "path is required"))
			return
		}
		if err := store(q.Get("path"), r.Body); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody(400, err.Error()))
			return
		}
	default:
		writeJSON(w, http.StatusBadRequest, errorBody(400, "unsupported content type "+mt))
		return
	}
	if len(out) == 0 {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "no file part"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	copy(out[5:], msg)
	return out
}

// stream writes Connect frames and flushes each.
type stream struct {
	w      http.ResponseWriter
	failed bool
}

func (st *stream) frame(flags byte, v any) {
	if st.failed {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		_, err = st.w.Write(envelope(flags, b))
	}
	if err != nil {
		st.failed = true
		return
	}
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (st *stream) event(name string, body any) {
	st.frame(0, map[string]any{"event": map[string]any{name: body}})
}

func (st *stream) end(code, msg string) {
	if code == "" {
		st.frame(0x02, map[string]any{})
		return
	}
	st.frame(0x02, map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if ct := r.Header.Get("Content-Type"); ct != "application/connect+json" {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"code": "unknown", "message": "content type " + ct})
		return
	}
	if r.Header.Get("Connect-Protocol-Version") != "1" {
		s.problem("Start without Connect-Protocol-Version: 1")
	}
	s.mu.Lock()
	sb.starts++
	n := sb.starts
	fault := s.fault
	s.mu.Unlock()
	kind := FaultNone
	if fault.StartCall == 0 || fault.StartCall == n {
		kind = fault.Stream
	}
	if kind == FaultUnauthorized {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "unauthorized access, please provide a valid access token or method signing if supported", "code": 401})
		return
	}
	msg, ok := readEnvelope(w, r)
	if !ok {
		return
	}
	var req struct {
		Process struct {
			Cmd  string            `json:"cmd"`
			Args []string          `json:"args"`
			Envs map[string]string `json:"envs"`
			Cwd  *string           `json:"cwd"`
		} `json:"process"`
		Stdin *bool `json:"stdin"`
	}
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w}
	if err := json.Unmarshal(msg, &req); err != nil {
		st.end("invalid_argument", "undecodable request: "+err.Error())
		return
	}
	if req.Stdin == nil || *req.Stdin {
		s.problem("Start without stdin:false")
	}
	if u, _, ok := r.BasicAuth(); ok && !knownUser(u) {
		st.end("unauthenticated", "user "+u+" not found")
		return
	}
	cwd := Home
	if req.Process.Cwd != nil {
		cwd = *req.Process.Cwd
	}
	dir, ok := sb.hostPath(cwd)
	if fi, err := os.Stat(dir); !ok || err != nil || !fi.IsDir() {
		st.end("invalid_argument", fmt.Sprintf("cwd '%s' does not exist", cwd))
		return
	}
	var deadline time.Duration
	if ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64); err == nil && ms > 0 && kind != FaultIgnoreDeadline {
		deadline = time.Duration(ms) * time.Millisecond
	}
	home, _ := sb.hostPath(Home)
	env := []string{"PATH=" + s.opts.Path, "HOME=" + home, "USER=user", "LOGNAME=user"}
	for k, v := range req.Process.Envs {
		env = append(env, k+"="+v)
	}
	if req.Process.Cmd == "" {
		st.end("invalid_argument", "cmd is required")
		return
	}
	p, err := s.startProc(sb, append([]string{req.Process.Cmd}, req.Process.Args...), dir, env, deadline)
	if err != nil {
		st.end("internal", "start process: "+err.Error())
		return
	}
	st.event("start", map[string]any{"pid": p.pid})
	st.event("keepalive", map[string]any{})
	streamProcess(w, st, p, kind, fault.Code)
}

// readEnvelope reads Start's one request envelope; a missing, malformed
// or truncated one is answered here (ok false).
func readEnvelope(w http.ResponseWriter, r *http.Request) (msg []byte, ok bool) {
	var hdr [5]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalid_argument", "message": "no request envelope"})
		return nil, false
	}
	size := binary.BigEndian.Uint32(hdr[1:])
	if hdr[0] != 0 || size > MaxRequestFrameBytes {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalid_argument", "message": "bad request envelope"})
		return nil, false
	}
	msg = make([]byte, size)
	if _, err := io.ReadFull(r.Body, msg); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalid_argument", "message": "truncated request envelope"})
		return nil, false
	}
	return msg, true
}

// streamProcess sends the started process's output and end as Start's response
// frames, with the injected fault kind (code for FaultEndStreamError).
func streamProcess(w http.ResponseWriter, st *stream, p *proc, kind FaultKind, code string) {
	if kind == FaultTruncatedEnvelope {
		var h [5]byte
		binary.BigEndian.PutUint32(h[1:], 100)
		if _, err := w.Write(append(h[:], `{"event":`...)); err == nil {
			w.(http.Flusher).Flush()
		}
		p.drain()
		panic(http.ErrAbortHandler)
	}
	for ev := range p.events {
		if ev.state == nil {
			st.event("data", map[string]any{ev.stream: base64.StdEncoding.EncodeToString(ev.data)})
			if kind == FaultCutStream || st.failed {
				p.drain()
				if kind == FaultCutStream {
					panic(http.ErrAbortHandler)
				}
				return
			}
			continue
		}
		if p.gone.Load() || kind == FaultCutStream {
			panic(http.ErrAbortHandler) // the sandbox is gone, and its connections with it
		}
		if kind != FaultNoEndEvent && kind != FaultEndStreamError {
			st.event("end", endEvent(ev.state))
		}
		switch {
		case kind == FaultEndStreamError:
			st.end(code, "injected: "+code)
		case p.timedOut.Load():
			st.end("deadline_exceeded", "context deadline exceeded")
		default:
			st.end("", "")
		}
	}
}

// endEvent is envd's EndEvent for a process state, in proto3 JSON: zero
// fields (exitCode 0, exited false) are omitted.
func endEvent(ps *os.ProcessState) map[string]any {
	e := map[string]any{"status": ps.String()}
	if c := ps.ExitCode(); c != 0 {
		e["exitCode"] = c
	}
	if ps.Exited() {
		e["exited"] = true
	}
	if !ps.Success() {
		e["error"] = ps.String()
	}
	return e
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"code": "unknown", "message": "want application/json"})
		return
	}
	var req struct {
		Process struct {
			Pid int `json:"pid"`
		} `json:"process"`
		Signal string `json:"signal"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalid_argument", "message": err.Error()})
		return
	}
	sig := map[string]int{"SIGNAL_SIGKILL": 9, "SIGNAL_SIGTERM": 15}[req.Signal]
	if sig == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalid_argument", "message": "unknown signal " + req.Signal})
		return
	}
	s.mu.Lock()
	p := sb.procs[req.Process.Pid]
	s.mu.Unlock()
	if p == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": "not_found", "message": fmt.Sprintf("process with pid %d not found", req.Process.Pid)})
		return
	}
	standin.KillGroup(p.pgid, syscallSignal(sig))
	writeJSON(w, http.StatusOK, map[string]any{})
}
