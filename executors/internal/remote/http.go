package remote

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// MaxResponseBytes bounds a provider's JSON answer that is decoded.
const MaxResponseBytes = 1 << 20

// Send sends req, the call op, with client. A status in want returns
// the response, and the caller closes its body; any other status closes
// the body and returns statusErr's error for the response. A transport
// error is returned as "<prefix>: <op>: <error>".
func Send(client *http.Client, req *http.Request, prefix, op string, statusErr func(*http.Response) error, want ...int) (*http.Response, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", prefix, op, err)
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, statusErr(resp)
}

// DecodeJSON decodes one JSON value of at most MaxResponseBytes.
func DecodeJSON(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if len(b) > MaxResponseBytes {
		return fmt.Errorf("response exceeds %d bytes", MaxResponseBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// Client is the client an executor calls its provider with: c, or a
// client with no overall timeout (streams are long) when c is nil, made
// never to follow a redirect.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = &http.Client{}
	}
	return noRedirects(c)
}

// noRedirects returns a copy of c that never follows a redirect:
// credentials in a header could otherwise be forwarded to another host.
// A redirect then surfaces as its 3xx status.
func noRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// CheckBaseURL accepts https, and plain http only to a loopback host:
// credentials never cross a network in the clear. It returns the URL
// without a trailing slash; name is the setting, for messages.
func CheckBaseURL(name, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", name, raw, err)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%s %q: want scheme://host[:port][/path]", name, raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return "", fmt.Errorf("%s %q: plain http is allowed only to a loopback host", name, raw)
		}
	default:
		return "", fmt.Errorf("%s %q: scheme %q, want https", name, raw, u.Scheme)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// loopbackHost reports whether h is localhost or a loopback IP.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
