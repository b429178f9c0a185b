package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestLoadDashboard(t *testing.T) {
	const tok = "0123456789abcdef-dashboard"
	for _, tt := range []struct {
		name, env string
		enabled   bool
		err       string
	}{
		{"unset", "", false, ""},
		{"blank", "   ", false, ""},
		{"set", tok, true, ""},
		{"trimmed", " " + tok + "\n", true, ""},
		{"short", "fifteen-chars-x", false, "at least 16"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadDashboard(func(k string) string {
				if k == "GILF_DASHBOARD_TOKEN" {
					return tt.env
				}
				return ""
			})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), tt.env) {
					t.Fatalf("err %v, want one naming %q without the token", err, tt.err)
				}
				return
			}
			if err != nil || c.Enabled() != tt.enabled {
				t.Fatalf("%+v %v, want enabled %v", c, err, tt.enabled)
			}
			if c.Enabled() && (c.Token.Reveal() != tok || strings.Contains(fmt.Sprintf("%v %+v", c, c), tok)) {
				t.Fatalf("token %q, or printed", c.Token.Reveal())
			}
		})
	}
}

// TestDashboardRoutes checks the mount: 404 without a token, the
// dashboard's own auth with one.
func TestDashboardRoutes(t *testing.T) {
	db := newTestStore(t, nil)
	m := newServeMetrics(db)
	log := slog.New(slog.DiscardHandler)
	off := routesServer(t, db, m, http.NotFoundHandler(), nil, 0)
	paths := []string{"/dashboard", "/dashboard/", "/dashboard/login", "/dashboard/costs", "/api/v1/runs", "/api/v1/jobs"}
	for _, p := range paths {
		if code, _ := httpGet(t, off.URL, p); code != http.StatusNotFound {
			t.Errorf("GET %s without GILF_DASHBOARD_TOKEN: %d, want 404", p, code)
		}
	}

	const tok = "0123456789abcdef-dashboard"
	dash, err := newDashboard(DashboardConfig{Token: NewSecret(tok)}, nil, db, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	on := routesServer(t, db, m, http.NotFoundHandler(), dash, 0)
	for _, p := range paths[:2] {
		if code, _ := httpGet(t, on.URL, p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", p, code)
		}
	}
	if code, b := httpGet(t, on.URL, "/dashboard/login"); code != http.StatusOK || !strings.Contains(b, `name="token"`) {
		t.Errorf("login form: %d", code)
	}
	for _, p := range paths {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, on.URL+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// (The login form sends a signed-in client on to /dashboard.)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the bearer token: %d, want 200", p, resp.StatusCode)
		}
	}
	if code, _ := httpGet(t, on.URL, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz beside the dashboard: %d", code)
	}
}

// TestLoadServeConfigDashboard checks a short token stops the start
// with the other problems, without printing the token.
func TestLoadServeConfigDashboard(t *testing.T) {
	_, _, _, err := loadServeConfig(serveEnvMap(map[string]string{"GILF_DASHBOARD_TOKEN": "short-tok", "GILF_WORKERS": "0"}), nil)
	if err == nil || !strings.Contains(err.Error(), "GILF_DASHBOARD_TOKEN") || !strings.Contains(err.Error(), "GILF_WORKERS") ||
		strings.Contains(err.Error(), "short-tok") {
		t.Fatalf("err %v, want both problems and no token", err)
	}
}

// TestServeDashboard runs gilf serve with GILF_DASHBOARD_TOKEN: the API
// answers the bearer token and nothing else.
func TestServeDashboard(t *testing.T) {
	const tok = "serve-dashboard-token-0123456789"
	key := newAppKey(t)
	srv := fakeGitHub(t, key, openedPayload(t), nil)
	p := startServe(t, serveEnv(t, srv, key, t.TempDir(), "GILF_DASHBOARD_TOKEN="+tok))
	if code, _ := httpGet(t, p.url, "/api/v1/runs"); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/runs without the token: %d, want 401", code)
	}
	if code, _ := httpGet(t, p.url, "/dashboard"); code != http.StatusUnauthorized {
		t.Errorf("GET /dashboard without the token: %d, want 401", code)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.url+"/api/v1/runs", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Runs       []any  `json:"runs"`
		NextBefore *int64 `json:"next_before"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.Runs == nil || len(body.Runs) != 0 {
		t.Fatalf("GET /api/v1/runs with the token: %d %+v %v, want 200 and no runs", resp.StatusCode, body, err)
	}
	if strings.Contains(p.stderr.String(), tok) {
		t.Error("the token reached the log")
	}
}

// GILF_DASHBOARD_URL gives each check run its details_url: the job's page.
func TestLoadDashboardURL(t *testing.T) {
	const tok = "0123456789abcdef-dashboard"
	env := func(vals map[string]string) func(string) string { return func(k string) string { return vals[k] } }
	c, err := loadDashboard(env(map[string]string{"GILF_DASHBOARD_TOKEN": tok, "GILF_DASHBOARD_URL": "https://gilf.example.com/ops/"}))
	if err != nil || c.DetailsURL(12) != "https://gilf.example.com/ops/dashboard/jobs/12" {
		t.Fatalf("details url %q, %v", c.DetailsURL(12), err)
	}
	if c, err := loadDashboard(env(map[string]string{"GILF_DASHBOARD_TOKEN": tok})); err != nil || c.DetailsURL(12) != "" {
		t.Errorf("no URL: details url %q, %v; want none", c.DetailsURL(12), err)
	}
	for _, bad := range []map[string]string{
		{"GILF_DASHBOARD_TOKEN": tok, "GILF_DASHBOARD_URL": "gilf.example.com"},
		{"GILF_DASHBOARD_TOKEN": tok, "GILF_DASHBOARD_URL": "https://u:p@gilf.example.com"},
		{"GILF_DASHBOARD_TOKEN": tok, "GILF_DASHBOARD_URL": "https://gilf.example.com/?a=1"},
		{"GILF_DASHBOARD_URL": "https://gilf.example.com"},
	} {
		if _, err := loadDashboard(env(bad)); err == nil {
			t.Errorf("loadDashboard(%v) accepted it", bad)
		}
	}
}
