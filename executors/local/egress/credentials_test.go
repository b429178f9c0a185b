package egress

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A private registry's token is added by the proxy: the client sends
// none, the registry sees it on every request (the cache's own packument
// look-ups included), and without it the registry refuses.
func TestProxyAddsCredentials(t *testing.T) {
	reg := newStandin()
	reg.token = "s3cr3t-registry-token"
	target, roots := serveStandinTLS(t, reg)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(reg.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := ReadCredentials(target + "=" + file)
	if err != nil {
		t.Fatal(err)
	}
	ca := testCA(t)
	tp := terminating(t, target, ca, roots, openCache(t, t.TempDir(), 0, 0), creds)
	c := proxyClient(t, tp, ca.Pool())
	status, body := fetchVia(t, c, "https://"+target+pkgTarball)
	if status != http.StatusOK || !bytes.Equal(body, reg.tarballs["pkg"]["1.0.0"]) {
		t.Fatalf("with the proxy's token: %d %.80q", status, body)
	}
	reg.mu.Lock()
	auths := append([]string(nil), reg.auths...)
	reg.mu.Unlock()
	for i, a := range auths {
		if a != "Bearer "+reg.token {
			t.Errorf("request %d (%s) carried %q", i, reg.seen()[i], a)
		}
	}
	if len(auths) != 2 {
		t.Errorf("the registry saw %v, want the packument and the tarball", reg.seen())
	}

	ca2 := testCA(t)
	bare := terminating(t, target, ca2, roots, nil, nil)
	if status, _ := fetchVia(t, proxyClient(t, bare, ca2.Pool()), "https://"+target+"/pkg"); status != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want the registry's 401", status)
	}
}

func TestReadCredentials(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tok := write("tok", "abc123\n")
	basic := write("basic", "Basic dXNlcjpwYXNz")
	limit := write("limit", strings.Repeat("a", MaxCredentialBytes))
	got, err := ReadCredentials(" npm.example.com=" + tok + ", 127.0.0.1:4873=" + basic + ",big.example.com:443=" + limit)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"npm.example.com:443": "Bearer abc123", "npm.example.com:80": "Bearer abc123",
		"127.0.0.1:4873": "Basic dXNlcjpwYXNz", "big.example.com:443": "Bearer " + strings.Repeat("a", MaxCredentialBytes),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"npm.example.com",
		"npm.example.com=relative/path",
		"*.example.com=" + tok,
		"npm.example.com=" + filepath.Join(dir, "missing"),
		"npm.example.com=" + write("two", "a\nb"),
		"npm.example.com=" + write("empty", " \n"),
		"npm.example.com=" + write("spaces", "not a token"),
		"npm.example.com=" + write("over", strings.Repeat("a", MaxCredentialBytes+1)),
		"npm.example.com=" + tok + ",npm.example.com:443=" + tok,
	} {
		if _, err := ReadCredentials(bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "abc123") {
			t.Errorf("%q: the error repeats the token: %v", bad, err)
		}
	}
}
