package registrytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// StartPrivate is Start for a private registry: Verdaccio serves and
// accepts nothing without Registry.Token (a bearer token of its one
// user, made at start), as a company's registry would.
func StartPrivate(ctx context.Context, dir string, log io.Writer) (*Registry, error) {
	return startRegistry(ctx, dir, log, false, true)
}

// addUser registers the private registry's one user (npm adduser's
// request) and keeps its token; every later request of r.client carries
// it.
func (r *Registry) addUser(ctx context.Context) error {
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return fmt.Errorf("password: %w", err)
	}
	doc, err := json.Marshal(map[string]any{
		"_id": "org.couchdb.user:gilf", "name": "gilf", "password": hex.EncodeToString(pw),
		"type": "user", "roles": []string{}, "date": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.URL+"-/user/org.couchdb.user:gilf", bytes.NewReader(doc))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("add user: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("add user: %w", err)
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.Token == "" {
		return fmt.Errorf("add user: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	r.Token = out.Token
	r.client = &http.Client{Transport: bearer{token: out.Token, next: r.client.Transport}}
	return nil
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}
