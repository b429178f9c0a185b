package remote

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestCleanMessage(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "controls and runs of space", in: "a\x1b[31m\n\tb  \x00c\ufffd", want: "a [31m b c"},
		{name: "at the limit", in: strings.Repeat("é", MaxErrorMessageRunes), want: strings.Repeat("é", MaxErrorMessageRunes)},
		{name: "one rune over", in: strings.Repeat("é", MaxErrorMessageRunes+1), want: strings.Repeat("é", MaxErrorMessageRunes) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CleanMessage(tc.in); got != tc.want {
				t.Errorf("CleanMessage(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestReadErrorBody(t *testing.T) {
	parse := func(body []byte) (string, string, bool) {
		var p struct{ Code, Error string }
		if json.Unmarshal(body, &p) != nil || p.Error == "" {
			return "", "", false
		}
		return p.Code, p.Error, true
	}
	tests := []struct {
		name, body, code, msg string
	}{
		{name: "provider body", body: `{"Code":"c1","Error":"no\nsuch sandbox"}`, code: "c1", msg: "no such sandbox"},
		{name: "plain text", body: "<html>bad gateway</html>", msg: "<html>bad gateway</html>"},
		{name: "over the body limit", body: strings.Repeat("x", MaxErrorBodyBytes+10), msg: strings.Repeat("x", MaxErrorMessageRunes) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingReader{r: strings.NewReader(tc.body)}
			code, msg := ReadErrorBody(&http.Response{Body: io.NopCloser(body)}, parse)
			if code != tc.code || msg != tc.msg {
				t.Errorf("ReadErrorBody = %q, %q, want %q, %q", code, msg, tc.code, tc.msg)
			}
			if body.n > MaxErrorBodyBytes {
				t.Errorf("read %d bytes, over MaxErrorBodyBytes %d", body.n, MaxErrorBodyBytes)
			}
		})
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += n
	return n, err
}

func TestAPIErrorText(t *testing.T) {
	if got, want := APIErrorText("p", "create sandbox", 429, "", ""), "p: create sandbox: HTTP 429"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := APIErrorText("p", "op", 503, "capacity_exceeded", "full"), "p: op: HTTP 503 (capacity_exceeded): full"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDecodeJSON(t *testing.T) {
	value := func(n int) string { return `"` + strings.Repeat("a", n-2) + `"` }
	tests := []struct {
		name, in string
		wantErr  bool
	}{
		{name: "at the limit", in: value(MaxResponseBytes)},
		{name: "one byte over", in: value(MaxResponseBytes + 1), wantErr: true},
		{name: "malformed", in: `{"a":`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v string
			err := DecodeJSON(strings.NewReader(tc.in), &v)
			if (err != nil) != tc.wantErr {
				t.Fatalf("DecodeJSON: %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestSend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/ok":
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	client := noRedirects(srv.Client())
	statusErr := func(resp *http.Response) error { return errors.New("status " + resp.Status) }
	tests := []struct {
		name, path, wantErr string
	}{
		{name: "wanted status", path: "/ok"},
		{name: "other status", path: "/other", wantErr: "status 418 I'm a teapot"},
		{name: "redirect not followed", path: "/redirect", wantErr: "status 302 Found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := Send(client, req, "p", "get", statusErr, http.StatusOK, http.StatusCreated)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				resp.Body.Close()
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Send: %v, want %q", err, tc.wantErr)
			}
		})
	}
	t.Run("transport error", func(t *testing.T) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://127.0.0.1:1/", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Send(client, req, "p", "get", statusErr, http.StatusOK)
		if err == nil || !strings.HasPrefix(err.Error(), "p: get: ") {
			t.Fatalf("Send: %v, want a p: get: error", err)
		}
	})
}

func TestCheckBaseURL(t *testing.T) {
	tests := []struct {
		name, raw, want string
		wantErr         bool
	}{
		{name: "https", raw: "https://api.example.com/v1/", want: "https://api.example.com/v1"},
		{name: "http loopback IP", raw: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{name: "http localhost", raw: "http://LOCALHOST:1", want: "http://LOCALHOST:1"},
		{name: "http IPv6 loopback", raw: "http://[::1]:1", want: "http://[::1]:1"},
		{name: "http remote", raw: "http://api.example.com", wantErr: true},
		{name: "credentials", raw: "https://u:p@api.example.com", wantErr: true},
		{name: "query", raw: "https://api.example.com/?a=1", wantErr: true},
		{name: "no host", raw: "https:///x", wantErr: true},
		{name: "other scheme", raw: "ftp://api.example.com", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckBaseURL("SETTING", tc.raw)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("CheckBaseURL(%q) = %q, %v; want %q, error %v", tc.raw, got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "SETTING ") {
				t.Errorf("error %q does not name the setting", err)
			}
		})
	}
}

func TestDefaultDurations(t *testing.T) {
	a, b, c := time.Duration(0), 5*time.Second, -time.Second
	errs := DefaultDurations("x",
		DurationOption{Name: "a", V: &a, Def: time.Minute},
		DurationOption{Name: "b", V: &b, Def: time.Minute},
		DurationOption{Name: "c", V: &c, Def: time.Minute},
	)
	if a != time.Minute || b != 5*time.Second || c != -time.Second {
		t.Errorf("durations %v %v %v, want 1m0s 5s -1s", a, b, c)
	}
	if len(errs) != 1 || errs[0].Error() != "x c -1s is negative" {
		t.Errorf("errors %v, want one for c", errs)
	}
}

func TestSecretNames(t *testing.T) {
	got := SecretNames([]validation.Secret{{Name: "B", Value: "1"}, {Value: "2"}, {Name: "A"}, {Name: "B", Value: "3"}})
	if diff := cmp.Diff([]string{"A", "B"}, got); diff != "" {
		t.Errorf("SecretNames (-want +got):\n%s", diff)
	}
}

func TestRetry(t *testing.T) {
	errTemp, errFinal := errors.New("temporary"), errors.New("final")
	tests := []struct {
		name      string
		results   []error
		wantCalls int
		wantErr   error
	}{
		{name: "first call succeeds", results: []error{nil}, wantCalls: 1},
		{name: "temporary then success", results: []error{errTemp, nil}, wantCalls: 2},
		{name: "not temporary stops", results: []error{errFinal, nil}, wantCalls: 1, wantErr: errFinal},
		{name: "attempts run out", results: []error{errTemp, errTemp, errTemp, nil}, wantCalls: 3, wantErr: errTemp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // cleanup still runs after the run's ctx ended
			calls := 0
			err := Retry(ctx, 3, time.Second, func(err error) bool { return errors.Is(err, errTemp) }, func(cctx context.Context) error {
				if cctx.Err() != nil {
					t.Errorf("call %d got an ended context", calls)
				}
				if _, ok := cctx.Deadline(); !ok {
					t.Errorf("call %d got a context without a deadline", calls)
				}
				calls++
				return tc.results[calls-1]
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("Retry: %v, want %v", err, tc.wantErr)
			}
			if calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestPackArchive(t *testing.T) {
	dir := t.TempDir()
	noise := make([]byte, 64<<10) // incompressible: the archive's size is stable
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), noise, 0o600); err != nil {
		t.Fatal(err)
	}
	pack := func(t *testing.T, max int64) (*os.File, int64, string, error) {
		tmp := t.TempDir()
		f, n, err := PackArchive(context.Background(), Pack{Dir: dir, TempRoot: tmp, Pattern: "t-*.tar.gz", MaxBytes: max, Prefix: "p", Executor: "the test executor"})
		return f, n, tmp, err
	}
	f, size, _, err := pack(t, 1<<30)
	if err != nil {
		t.Fatalf("PackArchive: %v", err)
	}
	if err := DiscardArchive(f, "p"); err != nil {
		t.Fatalf("DiscardArchive: %v", err)
	}
	if _, err := os.Stat(f.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("archive still there after DiscardArchive: %v", err)
	}
	tests := []struct {
		name    string
		max     int64
		refused bool
	}{
		{name: "at the limit", max: size},
		{name: "one byte under", max: size - 1, refused: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, n, tmp, err := pack(t, tc.max)
			if tc.refused {
				var ref *validation.Refusal
				if !errors.As(err, &ref) || ref.Code != validation.CodeArchiveTooLarge || !strings.Contains(ref.Msg, "the test executor") {
					t.Fatalf("PackArchive: %v, want an archive_too_large refusal naming the executor", err)
				}
				if left, _ := os.ReadDir(tmp); len(left) != 0 {
					t.Errorf("%d files left in the temp root", len(left))
				}
				return
			}
			if err != nil {
				t.Fatalf("PackArchive: %v", err)
			}
			defer func() {
				if err := DiscardArchive(f, "p"); err != nil {
					t.Error(err)
				}
			}()
			if n != size {
				t.Errorf("size %d, want %d", n, size)
			}
			if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 0 {
				t.Errorf("archive at offset %d (%v), want rewound", off, err)
			}
		})
	}
}

func TestParsePlatform(t *testing.T) {
	got := ParsePlatform("os=Linux\narch=aarch64\nkernel=6.1.0\x1b[0m\nnode=v20.1.0\nnoise\n")
	want := validation.Platform{OS: "linux", Arch: "arm64", Kernel: "6.1.0 [0m", Node: "v20.1.0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParsePlatform (-want +got):\n%s", diff)
	}
	for m, want := range map[string]string{"x86_64": "amd64", "i686": "386", "riscv64": "riscv64"} {
		if got := goArch(m); got != want {
			t.Errorf("goArch(%q) = %q, want %q", m, got, want)
		}
	}
}
