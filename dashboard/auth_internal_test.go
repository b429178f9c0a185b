package dashboard

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// TestSecureCookie pins the Secure decision: off only for plain HTTP from
// loopback to a loopback host name.
func TestSecureCookie(t *testing.T) {
	for _, tt := range []struct {
		name, remote, host string
		tls                bool
		secure             bool
	}{
		{"loopback v4", "127.0.0.1:5000", "127.0.0.1:8080", false, false},
		{"loopback v6", "[::1]:5000", "[::1]:8080", false, false},
		{"localhost", "127.0.0.1:5000", "localhost:8080", false, false},
		{"TLS on loopback", "127.0.0.1:5000", "127.0.0.1:8443", true, true},
		{"remote client", "203.0.113.9:5000", "127.0.0.1:8080", false, true},
		{"proxy on loopback for a public name", "127.0.0.1:5000", "gilf.example.com", false, true},
		{"remote over TLS", "203.0.113.9:5000", "gilf.example.com", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://"+tt.host+"/dashboard", nil)
			r.RemoteAddr, r.Host = tt.remote, tt.host
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			} else {
				r.TLS = nil
			}
			if got := secureCookie(r); got != tt.secure {
				t.Errorf("secure = %v, want %v", got, tt.secure)
			}
		})
	}
}

func TestSafeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://ev.example/a?b=c": "https://ev.example/a?b=c",
		"http://ev.example/a":      "http://ev.example/a",
		"javascript:alert(1)":      "",
		"JAVASCRIPT:alert(1)":      "",
		"data:text/html,<b>x</b>":  "",
		"//ev.example/a":           "",
		"review-artifacts/o/r/key": "",
		"https:///nohost":          "",
		"":                         "",
	} {
		if got := safeURL(in); got != want {
			t.Errorf("safeURL(%q) = %q, want %q", in, got, want)
		}
	}
}
