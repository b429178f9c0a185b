package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

// envd is the daemon inside every E2B sandbox; these are the parts of its
// API gilf speaks (E2B spec/envd.yaml and process.proto).
const (
	// EnvdPort is envd's port, the first label of a host-routed URL.
	EnvdPort = 49983
	// KeepaliveSeconds asks envd for a keepalive event after this much
	// silence, as E2B's SDK does.
	KeepaliveSeconds = 50
)

// envdClient calls one sandbox's envd. It never carries the API key.
type envdClient struct {
	base      string // envd base URL, no trailing slash
	sandboxID string
	token     string // envdAccessToken; empty when the sandbox is not secure
	user      string
	http      *http.Client
}

// envdBaseURL is where a sandbox's envd answers: override (the debug-mode
// URL, GILF_E2B_ENVD_URL) when set, else https://49983-<id>.<domain>.
func envdBaseURL(override, sandboxID, domain string) string {
	if override != "" {
		return override
	}
	return fmt.Sprintf("https://%d-%s.%s", EnvdPort, sandboxID, domain)
}

func (c *envdClient) header(req *http.Request) {
	if c.token != "" {
		req.Header.Set("X-Access-Token", c.token)
	}
	// E2B's SDK always names the sandbox and port, whatever the routing.
	req.Header.Set("E2b-Sandbox-Id", c.sandboxID)
	req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(EnvdPort))
	req.Header.Set("User-Agent", userAgent)
}

// upload writes the file f (size bytes) to path in the sandbox, owned by
// the user, with a multipart POST /files.
func (c *envdClient) upload(ctx context.Context, path string, f io.Reader, size int64) error {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", pathBase(path)); err != nil {
		return fmt.Errorf("e2b: upload archive: %w", err)
	}
	prefix := bytes.Clone(head.Bytes())
	head.Reset()
	if err := mw.Close(); err != nil {
		return fmt.Errorf("e2b: upload archive: %w", err)
	}
	suffix := head.Bytes()
	q := url.Values{"path": {path}, "username": {c.user}}
	body := io.MultiReader(bytes.NewReader(prefix), f, bytes.NewReader(suffix))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/files?"+q.Encode(), body)
	if err != nil {
		return fmt.Errorf("e2b: upload archive: %w", err)
	}
	req.ContentLength = int64(len(prefix)) + size + int64(len(suffix))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	c.header(req)
	resp, err := remote.Send(c.http, req, "e2b", "upload archive", func(resp *http.Response) error { return apiError("upload archive", resp) }, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var written []struct {
		Path string `json:"path"`
		Type string `json:"type"`
	}
	if err := remote.DecodeJSON(resp.Body, &written); err != nil {
		return fmt.Errorf("e2b: upload archive: %w", err)
	}
	for _, w := range written {
		if w.Path == path {
			return nil
		}
	}
	return fmt.Errorf("e2b: upload archive: envd did not report writing %s", path)
}

func pathBase(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// start runs one process through process.Process/Start and streams its
// output to out. timeout becomes Connect-Timeout-Ms, which envd enforces
// as the process's lifetime. started is called with the pid once envd
// reports the process running.
func (c *envdClient) start(ctx context.Context, op string, cfg processConfig, timeout time.Duration, out io.Writer, started func(pid uint32)) (remote.ProcEnd, error) {
	msg, err := json.Marshal(startRequest{Process: cfg, Stdin: false})
	if err != nil {
		return remote.ProcEnd{}, fmt.Errorf("e2b: %s: encode request: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/process.Process/Start", bytes.NewReader(encodeEnvelope(0, msg)))
	if err != nil {
		return remote.ProcEnd{}, fmt.Errorf("e2b: %s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Content-Encoding", "identity")
	req.Header.Set("Connect-Accept-Encoding", "identity")
	if ms := timeout.Milliseconds(); ms > 0 {
		req.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(ms, 10))
	}
	req.Header.Set("Keepalive-Ping-Interval", strconv.Itoa(KeepaliveSeconds))
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.user+":")))
	c.header(req)
	// envd's auth middleware and E2B's proxy answer before any framing:
	// a status other than 200 is an *APIError.
	resp, err := remote.Send(c.http, req, "e2b", op, func(resp *http.Response) error { return apiError(op, resp) }, http.StatusOK)
	if err != nil {
		return remote.ProcEnd{}, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/connect+json") {
		return remote.ProcEnd{}, &StreamError{Prefix: "e2b", Stream: "process", Op: op, Reason: fmt.Sprintf("response content type %q, want application/connect+json", remote.CleanMessage(ct))}
	}
	end, err := readProcessStream(&frameReader{r: resp.Body, max: MaxFrameBytes}, out, started)
	if err != nil {
		err = remote.StreamFailed(ctx, "e2b", op, err)
		var re *RPCError
		if errors.As(err, &re) && re.Op == "" {
			re.Op = op
		}
		return remote.ProcEnd{}, err
	}
	return end, nil
}

// readProcessStream reads Start's response frames: a start event, data
// and keepalive events, exactly one end event, then the end-of-stream
// frame. A deadline_exceeded error in the end-of-stream frame is envd
// killing the process at Connect-Timeout-Ms: a timed-out process, not an
// infrastructure error.
func readProcessStream(fr *frameReader, out io.Writer, started func(pid uint32)) (remote.ProcEnd, error) {
	var end remote.ProcEnd
	gotEnd := false
	for {
		f, err := fr.next()
		if errors.Is(err, errNoFrame) {
			return end, streamBroken("the stream ended without an end-of-stream frame")
		}
		if err != nil {
			return end, err
		}
		if f.endStream() {
			es, err := decodeEndStream(f.msg)
			if err != nil {
				return end, err
			}
			if es.Error != nil {
				if es.Error.Code == "deadline_exceeded" {
					end.TimedOut = true
					if !gotEnd {
						end.Code, end.Status = -1, "killed at its deadline"
					}
					return end, nil
				}
				return end, &RPCError{Code: es.Error.Code, Message: remote.CleanMessage(es.Error.Message)}
			}
			if !gotEnd {
				return end, streamBroken("the stream ended without an end event")
			}
			return end, nil
		}
		ev, err := decodeEvent(f.msg)
		if err != nil {
			return end, err
		}
		switch e := ev.Event; {
		case e.Start != nil:
			if started != nil {
				started(e.Start.Pid)
			}
		case e.Data != nil:
			for _, b := range [][]byte{e.Data.Stdout, e.Data.Stderr, e.Data.Pty} {
				if len(b) == 0 {
					continue
				}
				if _, err := out.Write(b); err != nil {
					return end, fmt.Errorf("e2b: keep process output: %w", err)
				}
			}
		case e.End != nil:
			gotEnd = true
			end.Exited = e.End.Exited
			end.Code = int(e.End.ExitCode) // omitted when 0
			end.Status = remote.CleanMessage(e.End.Status)
			if end.Status == "" {
				end.Status = fmt.Sprintf("exit code %d", end.Code)
			}
		}
	}
}

// signal kills the process pid with SIGKILL through the unary
// process.Process/SendSignal. A process that is already gone is not an
// error.
func (c *envdClient) signal(ctx context.Context, pid uint32) error {
	body := fmt.Sprintf(`{"process":{"pid":%d},"signal":"SIGNAL_SIGKILL"}`, pid)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/process.Process/SendSignal", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("e2b: kill process %d: %w", pid, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.user+":")))
	c.header(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("e2b: kill process %d: %w", pid, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	// A unary Connect error: HTTP status plus {"code","message"}.
	ae := apiError(fmt.Sprintf("kill process %d", pid), resp)
	if ae.Code == "not_found" {
		return nil
	}
	if ae.Code != "" && resp.Header.Get("Content-Type") == "application/json" && ae.Status != http.StatusUnauthorized {
		return &RPCError{Op: ae.Op, Code: ae.Code, Message: ae.Msg}
	}
	return ae
}
