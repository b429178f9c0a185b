package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"
)

func TestServerGetApp(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	srv := New(t, Options{AppID: 7, PublicKey: &key.PublicKey, Now: func() time.Time { return now },
		AppEvents: []string{"pull_request"}})
	u := srv.URL + "app"
	if code, _ := do(t, "GET", u, "", ""); code != 401 {
		t.Errorf("no auth: %d, want 401", code)
	}
	if code, _ := do(t, "GET", u, "Bearer "+signed(t, other, "7", now.Add(-time.Minute), now.Add(9*time.Minute)), ""); code != 401 {
		t.Errorf("JWT of another key: %d, want 401", code)
	}
	code, m := do(t, "GET", u, "Bearer "+signed(t, key, "7", now.Add(-time.Minute), now.Add(9*time.Minute)), "")
	if code != 200 {
		t.Fatalf("GET /app: %d %v", code, m)
	}
	// GitHub's documented shape: the example's fields, with the
	// server's id and the slug of its bot.
	if m["id"] != float64(7) || m["slug"] != "gilf" || m["name"] != "Octocat App" || m["owner"] == nil || m["html_url"] == nil {
		t.Errorf("GET /app: %v", m)
	}
	if p, _ := m["permissions"].(map[string]any); p["metadata"] != "read" {
		t.Errorf("permissions %v, want the example's", m["permissions"])
	}
	if ev, _ := m["events"].([]any); len(ev) != 1 || ev[0] != "pull_request" {
		t.Errorf("events %v, want AppEvents", m["events"])
	}
	if n := srv.Count(GetApp); n != 3 {
		t.Errorf("recorded %d GET /app, want 3", n)
	}
}
