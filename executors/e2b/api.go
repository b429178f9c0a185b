package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

// MaxResponseBytes bounds a JSON answer of the E2B API or envd that gilf
// decodes (sandbox, sandbox detail, upload result).
const MaxResponseBytes = remote.MaxResponseBytes

// sandboxIDPattern is what gilf accepts as a sandbox ID: it becomes a path
// segment of the API and a DNS label of the envd host.
var sandboxIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,62}$`)

// domainPattern is what gilf accepts as a sandbox domain from the API.
var domainPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$`)

// createRequest is E2B's NewSandbox. Only the fields gilf sets are here.
// allow_internet_access is snake_case; every other field is camelCase.
type createRequest struct {
	TemplateID string `json:"templateID"`
	// Timeout is the sandbox's time to live in seconds. E2B's default
	// when it is absent is 15 s, so it is always sent.
	Timeout             int64             `json:"timeout"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
}

// networkConfig is E2B's SandboxNetworkConfig (egress part) and, with
// AllowInternetAccess, its SandboxNetworkUpdateConfig.
type networkConfig struct {
	AllowOut            []string `json:"allowOut,omitempty"`
	DenyOut             []string `json:"denyOut,omitempty"`
	AllowInternetAccess *bool    `json:"allow_internet_access,omitempty"`
}

// sandboxInfo is E2B's Sandbox (the create response).
type sandboxInfo struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Domain          *string `json:"domain"`
}

// sandboxDetail is the part of E2B's SandboxDetail gilf reads.
type sandboxDetail struct {
	CPUCount int    `json:"cpuCount"`
	MemoryMB int    `json:"memoryMB"`
	State    string `json:"state"`
}

// apiClient calls E2B's management API with the team's API key. The key
// goes in X-API-Key to the API base URL only.
type apiClient struct {
	base string // without trailing slash
	key  string
	http *http.Client
}

func (c *apiClient) create(ctx context.Context, req createRequest) (sandboxInfo, error) {
	var info sandboxInfo
	resp, err := c.do(ctx, "create sandbox", http.MethodPost, "/sandboxes", req, http.StatusCreated, http.StatusOK)
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	if err := remote.DecodeJSON(resp.Body, &info); err != nil {
		return info, fmt.Errorf("e2b: create sandbox: %w", err)
	}
	if !sandboxIDPattern.MatchString(info.SandboxID) {
		return info, fmt.Errorf("e2b: create sandbox: the API returned an unusable sandbox ID %q", remote.CleanMessage(info.SandboxID))
	}
	if info.Domain != nil && *info.Domain != "" && !domainPattern.MatchString(*info.Domain) {
		return info, fmt.Errorf("e2b: create sandbox %s: the API returned an unusable domain %q", info.SandboxID, remote.CleanMessage(*info.Domain))
	}
	return info, nil
}

// kill deletes the sandbox. A sandbox that is already gone (404) is not an
// error: it reports gone=false.
func (c *apiClient) kill(ctx context.Context, id string) (killed bool, err error) {
	resp, err := c.do(ctx, "kill sandbox", http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, http.StatusNoContent, http.StatusOK, http.StatusNotFound)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusNotFound, nil
}

// setNetwork replaces the sandbox's egress rules.
func (c *apiClient) setNetwork(ctx context.Context, id string, n networkConfig) error {
	resp, err := c.do(ctx, "update sandbox network", http.MethodPut, "/sandboxes/"+url.PathEscape(id)+"/network", n, http.StatusNoContent, http.StatusOK)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func (c *apiClient) detail(ctx context.Context, id string) (sandboxDetail, error) {
	var d sandboxDetail
	resp, err := c.do(ctx, "get sandbox", http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, http.StatusOK)
	if err != nil {
		return d, err
	}
	defer resp.Body.Close()
	if err := remote.DecodeJSON(resp.Body, &d); err != nil {
		return d, fmt.Errorf("e2b: get sandbox %s: %w", id, err)
	}
	return d, nil
}

// do sends one API call. A status outside want is an *APIError (the body
// closed); otherwise the caller closes the body.
func (c *apiClient) do(ctx context.Context, op, method, path string, body any, want ...int) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("e2b: %s: encode request: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("e2b: %s: %w", op, err)
	}
	req.Header.Set("X-API-Key", c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return remote.Send(c.http, req, "e2b", op, func(resp *http.Response) error { return apiError(op, resp) }, want...)
}
