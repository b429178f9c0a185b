package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func signed(t *testing.T, key *rsa.PrivateKey, iss string, iat, exp time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: iss, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp),
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func do(t *testing.T, method, url, auth, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, m
}

// TestServerAuth checks the fake enforces what GitHub enforces: a JWT
// signed by the App's key with a short lifetime, and tokens scoped to the
// repositories named at mint time.
func TestServerAuth(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	srv := New(t, Options{AppID: 7, PublicKey: &key.PublicKey, Now: func() time.Time { return now }})
	mint := srv.URL + "app/installations/1/access_tokens"
	body := `{"repositories":["Hello-World"]}`
	tests := []struct {
		name string
		jwt  string
		want int
	}{
		{name: "valid", jwt: signed(t, key, "7", now.Add(-time.Minute), now.Add(9*time.Minute)), want: 201},
		{name: "wrong key", jwt: signed(t, other, "7", now.Add(-time.Minute), now.Add(9*time.Minute)), want: 401},
		{name: "wrong issuer", jwt: signed(t, key, "8", now.Add(-time.Minute), now.Add(9*time.Minute)), want: 401},
		{name: "expired", jwt: signed(t, key, "7", now.Add(-20*time.Minute), now.Add(-time.Minute)), want: 401},
		{name: "exp too far ahead", jwt: signed(t, key, "7", now, now.Add(11*time.Minute)), want: 401},
	}
	var tok string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, m := do(t, "POST", mint, "Bearer "+tc.jwt, body)
			if code != tc.want {
				t.Fatalf("status %d, want %d (%v)", code, tc.want, m)
			}
			if code == 201 {
				tok, _ = m["token"].(string)
			}
		})
	}
	if !strings.HasPrefix(tok, "ghs_") {
		t.Fatalf("token %q", tok)
	}
	pull := srv.URL + "repos/octocat/Hello-World/pulls/1347"
	if code, _ := do(t, "GET", pull, "Bearer "+tok, ""); code != 200 {
		t.Errorf("scoped token on its repo: %d", code)
	}
	if code, _ := do(t, "GET", srv.URL+"repos/octocat/Other/pulls/1347", "Bearer "+tok, ""); code != 401 {
		t.Errorf("scoped token on another repo: %d, want 401", code)
	}
	if code, _ := do(t, "GET", pull, "", ""); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	srv.ExpireTokens()
	if code, _ := do(t, "GET", pull, "Bearer "+tok, ""); code != 401 {
		t.Errorf("expired token: %d, want 401", code)
	}
	if code, _ := do(t, "POST", mint, "Bearer "+signed(t, key, "7", now.Add(-time.Minute), now.Add(9*time.Minute)), `{}`); code != 422 {
		t.Errorf("unscoped mint: %d, want 422", code)
	}
	reqs := srv.Requests()
	if len(reqs) == 0 || reqs[0].Endpoint != CreateToken || reqs[0].Path != "/app/installations/1/access_tokens" || reqs[0].Body["repositories"] == nil {
		t.Errorf("first recorded request = %+v", reqs[0])
	}
	if got := srv.TokensMinted(); got != 1 {
		t.Errorf("minted %d", got)
	}
	if srv.URL != srv.api.URL+"/api/v3/" || !strings.Contains(srv.CodeloadURL, "127.0.0.1") {
		t.Errorf("URL %s codeload %s", srv.URL, srv.CodeloadURL)
	}
}

// TestServerFaults: faults are consumed in order, Times at a time.
func TestServerFaults(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	srv := New(t, Options{AppID: 7, PublicKey: &key.PublicKey, Now: func() time.Time { return now }, BasePath: "/"})
	srv.Fail(CreateToken, Fault{Kind: Status, Status: 502, Times: 2})
	srv.Fail(CreateToken, Fault{Kind: SecondaryRateLimit, RetryAfter: 7 * time.Second})
	mint := srv.URL + "app/installations/1/access_tokens"
	j := signed(t, key, "7", now.Add(-time.Minute), now.Add(9*time.Minute))
	var codes []int
	for range 4 {
		code, _ := do(t, "POST", mint, "Bearer "+j, `{"repositories":["Hello-World"]}`)
		codes = append(codes, code)
	}
	if want := []int{502, 502, 403, 201}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v", codes, want)
	}
	if srv.URL != srv.api.URL+"/" {
		t.Errorf("root-mounted URL = %s", srv.URL)
	}
}
