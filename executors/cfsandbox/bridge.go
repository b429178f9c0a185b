package cfsandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

// MaxResponseBytes bounds a JSON answer of the bridge that gilf decodes.
const MaxResponseBytes = remote.MaxResponseBytes

// sandboxIDPattern is the bridge's own check on sandbox IDs.
var sandboxIDPattern = regexp.MustCompile(`^[a-z2-7]{1,128}$`)

// bridgeClient calls the sandbox bridge Worker (cloudflare/sandbox-sdk
// bridge: /v1/sandbox…) with a bearer token.
type bridgeClient struct {
	base  string // without trailing slash
	token string
	http  *http.Client
}

func (c *bridgeClient) create(ctx context.Context) (string, error) {
	resp, err := c.do(ctx, "create sandbox", http.MethodPost, "/v1/sandbox", "application/json", strings.NewReader("{}"), -1, http.StatusOK, http.StatusCreated)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		ID string `json:"id"`
	}
	if err := remote.DecodeJSON(resp.Body, &out); err != nil {
		return "", fmt.Errorf("cf-sandbox: create sandbox: %w", err)
	}
	if !sandboxIDPattern.MatchString(out.ID) {
		return "", fmt.Errorf("cf-sandbox: create sandbox: the bridge returned an unusable sandbox ID %q", remote.CleanMessage(out.ID))
	}
	return out.ID, nil
}

// upload writes body (size bytes) to the absolute path inside /workspace.
func (c *bridgeClient) upload(ctx context.Context, id, path string, body io.Reader, size int64) error {
	p := "/v1/sandbox/" + id + "/file/" + escapePath(strings.TrimPrefix(path, "/"))
	// Hide a Close the body may have: the HTTP client would close it.
	body = struct{ io.Reader }{body}
	resp, err := c.do(ctx, "upload archive", http.MethodPut, p, "application/octet-stream", body, size, http.StatusOK, http.StatusCreated, http.StatusNoContent)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// kill destroys the sandbox; the bridge answers 204 also for a sandbox it
// never started.
func (c *bridgeClient) kill(ctx context.Context, id string) error {
	resp, err := c.do(ctx, "delete sandbox", http.MethodDelete, "/v1/sandbox/"+id, "", nil, -1, http.StatusNoContent, http.StatusOK, http.StatusNotFound)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// execRequest is the bridge's ExecRequest.
type execRequest struct {
	Argv      []string `json:"argv"`
	TimeoutMs int64    `json:"timeout_ms,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
}

// exec runs argv and streams its output to out. started is called once
// the bridge accepted the command.
func (c *bridgeClient) exec(ctx context.Context, op, id string, req execRequest, out io.Writer, started func()) (execEnd, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return execEnd{}, fmt.Errorf("cf-sandbox: %s: encode request: %w", op, err)
	}
	resp, err := c.do(ctx, op, http.MethodPost, "/v1/sandbox/"+id+"/exec", "application/json", bytes.NewReader(b), int64(len(b)), http.StatusOK)
	if err != nil {
		return execEnd{}, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return execEnd{}, &StreamError{Prefix: "cf-sandbox", Stream: "exec", Op: op, Reason: fmt.Sprintf("response content type %q, want text/event-stream", remote.CleanMessage(ct))}
	}
	if started != nil {
		started()
	}
	end, err := readExecStream(resp.Body, out)
	if err != nil {
		return execEnd{}, remote.StreamFailed(ctx, "cf-sandbox", op, err)
	}
	return end, nil
}

// do sends one call; a status outside want is an *APIError. size < 0
// means unknown.
func (c *bridgeClient) do(ctx context.Context, op, method, path, contentType string, body io.Reader, size int64, want ...int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("cf-sandbox: %s: %w", op, err)
	}
	if size >= 0 && body != nil {
		req.ContentLength = size
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("User-Agent", userAgent)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return remote.Send(c.http, req, "cf-sandbox", op, func(resp *http.Response) error { return apiError(op, resp) }, want...)
}

// bridgeRunner runs each step's shell as one exec.
type bridgeRunner struct {
	c   *bridgeClient
	id  string
	cwd string
}

func (r *bridgeRunner) RunStep(ctx context.Context, script []byte, budget time.Duration, out io.Writer, started func()) (remote.ProcEnd, error) {
	began := time.Now()
	end, err := r.c.exec(ctx, "run step", r.id, execRequest{Argv: []string{"sh", "-c", string(script)}, TimeoutMs: budget.Milliseconds(), Cwd: r.cwd}, out, started)
	if err != nil {
		return remote.ProcEnd{}, err
	}
	return toProcEnd(end, time.Since(began) >= budget, "run step")
}

// toProcEnd reads an exec's end. An error event after the budget, or a
// non-zero exit then, is the sandbox stopping the command at timeout_ms;
// an error event before it is an infrastructure error.
func toProcEnd(end execEnd, pastBudget bool, op string) (remote.ProcEnd, error) {
	if end.errCode != "" {
		if pastBudget {
			return remote.ProcEnd{Code: -1, Status: "stopped at timeout_ms: " + end.errMsg, TimedOut: true}, nil
		}
		return remote.ProcEnd{}, &ExecError{Op: op, Code: end.errCode, Msg: end.errMsg}
	}
	p := remote.ProcEnd{Exited: end.exitCode >= 0, Code: end.exitCode, Status: fmt.Sprintf("exit code %d", end.exitCode)}
	if end.exitCode != 0 && pastBudget {
		p.TimedOut = true
	}
	return p, nil
}

// errNoKill: the bridge has no call that stops one command.
var errNoKill = errors.New("the sandbox bridge cannot stop one command; the sandbox is destroyed at the end of the run")

func (r *bridgeRunner) StopStep(context.Context) error { return errNoKill }
